import { readdirSync, readFileSync, readlinkSync } from "node:fs";
import { createServer } from "node:net";
import { commandLineOf, processIds } from "./process-alive";

/**
 * Whether a TCP port can be listened on, tried as the service listens: on `host`, or without one (every address,
 * IPv6 and IPv4, as Node's `server.listen(port)`). False only on EADDRINUSE; other errors (EACCES below 1024) are
 * thrown, for the caller to report as they are.
 */
export function portFree(port: number, host?: string): Promise<boolean> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once("error", (error: NodeJS.ErrnoException) => (error.code === "EADDRINUSE" ? resolve(false) : reject(error)));
    probe.listen({ port, host, exclusive: true }, () => probe.close(() => resolve(true)));
  });
}

/** A process listening on a port: its pid and command line. */
export type PortHolder = { pid: number; commandLine: string[] };

/**
 * Who listens on a TCP port (any address), from Linux's /proc/net/tcp{,6} and the sockets in /proc/<pid>/fd;
 * undefined where that cannot be told: no /proc (not Linux), or a listener found whose process is not visible
 * (another user's, without root). Read only once a port was found taken: it lists every process's descriptors.
 */
export function portHolders(port: number): PortHolder[] | undefined {
  const inodes = new Set<string>();
  let tables = 0;
  for (const table of ["/proc/net/tcp", "/proc/net/tcp6"]) {
    let text: string;
    try {
      text = readFileSync(table, "utf8");
    } catch {
      continue;
    }
    tables += 1;
    for (const line of text.split("\n").slice(1)) {
      // sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode
      const fields = line.trim().split(/\s+/);
      const local = fields[1];
      // 0A: TCP_LISTEN.
      if (local === undefined || fields[3] !== "0A" || fields[9] === undefined) continue;
      if (Number.parseInt(local.slice(local.lastIndexOf(":") + 1), 16) === port) inodes.add(fields[9]);
    }
  }
  const pids = processIds();
  if (tables === 0 || pids === undefined) return undefined;
  if (inodes.size === 0) return [];
  const holders: PortHolder[] = [];
  const found = new Set<string>();
  for (const pid of pids) {
    let fds: string[];
    try {
      fds = readdirSync(`/proc/${pid}/fd`);
    } catch {
      continue;
    }
    for (const fd of fds) {
      let target: string;
      try {
        target = readlinkSync(`/proc/${pid}/fd/${fd}`);
      } catch {
        continue;
      }
      const inode = /^socket:\[(\d+)\]$/.exec(target)?.[1];
      if (inode === undefined || !inodes.has(inode)) continue;
      found.add(inode);
      const commandLine = commandLineOf(pid);
      if (commandLine && !holders.some((h) => h.pid === pid)) holders.push({ pid, commandLine });
    }
  }
  return found.size === inodes.size ? holders : undefined;
}

/**
 * A holder as an operator reads it, on one line: "pid 123 (python3 -m http.server 3000)". A command line over 160
 * characters keeps its start and its end (the script a node or python process runs is its last words).
 */
export function describeHolder(holder: PortHolder): string {
  // One line: an argument may hold newlines (node -e with a script).
  const command = holder.commandLine.join(" ").replace(/\s+/g, " ");
  return `pid ${holder.pid} (${command.length > 160 ? `${command.slice(0, 60)} ... ${command.slice(-96)}` : command})`;
}

/**
 * The one line a start refuses a taken port with: the variable, its value, who holds it where that can be told (none
 * found listening: a connection uses it as its local port), how long it was waited for (`waitedS`), and what to do
 * (`also`: another way out, such as using a running chain).
 */
export function portTakenMessage(name: string, port: number, holders: PortHolder[] | undefined, options: { waitedS?: number; also?: string } = {}): string {
  const by =
    holders === undefined
      ? "another process"
      : holders.length === 0
        ? "a connection (no process listens on it: one uses it as its local port)"
        : holders.map(describeHolder).join(", ");
  const waited = options.waitedS === undefined ? "" : `, still after ${options.waitedS} s`;
  return `${name}=${port} is in use by ${by}${waited}: stop it, or set ${name} to a free port${options.also ?? ""}`;
}
