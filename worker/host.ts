import { readFileSync, readlinkSync } from "node:fs";
import { hostname } from "node:os";

/**
 * Where this worker's pid means something. A pid can only be probed (`kill(pid, 0)`) from the same PID namespace:
 * two containers can share a hostname (host networking, a fixed `hostname:` in compose) while each sees only its
 * own pids, so "same hostname and no such pid" would call a live worker in the other container dead and take its
 * relayers (they would then go back and forth). The namespace is Linux's `/proc/self/ns/pid` link
 * (`pid:[4026531836]`), qualified by the kernel's boot id (namespace numbers repeat from machine to machine: the
 * initial one is always 4026531836); where either cannot be read, null, and then no other worker's pid is probed.
 */
export type ProcessSpace = { hostname: string; pidNamespace: string | null };

function readPidNamespace(): string | null {
  try {
    return `${readFileSync("/proc/sys/kernel/random/boot_id", "utf8").trim()}/${readlinkSync("/proc/self/ns/pid")}`;
  } catch {
    return null;
  }
}

const here: ProcessSpace = { hostname: hostname(), pidNamespace: readPidNamespace() };

export function processSpace(): ProcessSpace {
  return here;
}

/** Whether `other`'s pid can be probed from this process (same host and same PID namespace, both known). */
export function sameProcessSpace(other: { hostname: string; pidNamespace: string | null }, ours: ProcessSpace = here): boolean {
  return other.hostname === ours.hostname && ours.pidNamespace !== null && other.pidNamespace === ours.pidNamespace;
}
