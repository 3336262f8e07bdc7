import { closeSync, fchmodSync, fstatSync, openSync, renameSync, rmSync, writeSync } from "node:fs";
import type { Logger } from "@/lib/log";

export type LogFile = {
  /** Appends the chunk, or drops it while the file cannot be written. */
  write: (chunk: Buffer | string) => void;
  /** Closes the file; later chunks are dropped. */
  close: () => void;
};

/**
 * A child's log file (the web server's, the worker's, anvil's) that a full disk cannot take down: a write stream's
 * unhandled "error" (ENOSPC) would reach the supervisor's crash handler and stop the whole service. A chunk that cannot
 * be written is dropped (the child's output still reaches the terminal), the first failure is logged once with its
 * error, and every later chunk tries again on a freshly opened file: the first that is written ends the outage
 * (logged with what was dropped). Writes are synchronous, as Node writes stdout to a file: in order, nothing held in
 * memory, a failure known at once.
 *
 * The file is the owner's alone (0600), also one an older version created 0644: the logs hold requesters' IP
 * addresses (a failed administrator sign-in logs the IP) and what the children print. Only a regular file is
 * tightened: a log linked to a device (/dev/null, /dev/full) must not change the device's mode for everyone.
 *
 * It is rotated by size, so a service left running for months does not fill its disk (and stop PostgreSQL on the
 * same one) with logs: a chunk that would take the file past `maxBytes` (64 MiB) first renames it `<file>.1`, the
 * older ones to `.2` and `.3` (`keep`), the oldest removed; at most (keep + 1) x maxBytes on disk. A chunk is never
 * split across two files. A rotation that fails (the directory not writable) is logged once and the file grows on;
 * it is tried again a minute later.
 */
export const LOG_FILE_MAX_BYTES = 64 * 1024 * 1024;
export const LOG_FILE_KEEP = 3;
const ROTATION_RETRY_MS = 60_000;

export function openLogFile(file: string, logger: Logger, { maxBytes = LOG_FILE_MAX_BYTES, keep = LOG_FILE_KEEP } = {}): LogFile {
  let fd: number | undefined;
  /** The open file's size (regular files only; a device is never rotated). */
  let size: number | undefined;
  let rotationFailed = false;
  let rotationFailedAtMs = 0;
  let failing = false;
  let droppedBytes = 0;
  let closed = false;
  const release = () => {
    if (fd === undefined) return;
    try {
      closeSync(fd);
    } catch {
      // Closing a descriptor whose writes failed may fail too; it is released either way.
    }
    fd = undefined;
  };
  const rotate = () => {
    release();
    try {
      rmSync(`${file}.${keep}`, { force: true });
      for (let n = keep - 1; n >= 1; n--) {
        try {
          renameSync(`${file}.${n}`, `${file}.${n + 1}`);
        } catch (error) {
          if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw error;
        }
      }
      renameSync(file, `${file}.1`);
      rotationFailed = false;
    } catch (error) {
      if (!rotationFailed) logger.warn("cannot rotate the log file; it grows on until it can", { file, error });
      rotationFailed = true;
      rotationFailedAtMs = performance.now();
    }
  };
  const write = (chunk: Buffer | string) => {
    if (closed) return;
    const data = typeof chunk === "string" ? Buffer.from(chunk) : chunk;
    let written = 0;
    try {
      // A rotation that failed is tried again a minute later, not at every chunk (each try is a close, renames, an open).
      const rotationDue = !rotationFailed || performance.now() - rotationFailedAtMs >= ROTATION_RETRY_MS;
      if (fd !== undefined && size !== undefined && size > 0 && size + data.length > maxBytes && rotationDue) rotate();
      if (fd === undefined) {
        fd = openSync(file, "a", 0o600);
        const stat = fstatSync(fd);
        if (stat.isFile()) fchmodSync(fd, 0o600);
        size = stat.isFile() ? stat.size : undefined;
        // A file already past the limit (left by an older version, or by a failed rotation) is rotated first.
        if (size !== undefined && size > 0 && size + data.length > maxBytes && !rotationFailed) {
          rotate();
          fd = openSync(file, "a", 0o600);
          size = 0;
        }
      }
      while (written < data.length) written += writeSync(fd, data, written);
      if (size !== undefined) size += written;
      if (failing) {
        failing = false;
        logger.info("writing the log file again", { file, droppedBytes });
        droppedBytes = 0;
      }
    } catch (error) {
      // Opened again with the next chunk: space freed, or the file replaced or recreated meanwhile.
      release();
      droppedBytes += data.length - written;
      if (!failing) {
        failing = true;
        logger.warn("cannot write the log file; its lines are dropped until it can be written again", { file, error });
      }
    }
  };
  write(Buffer.alloc(0)); // opened (and created) now: a file that cannot be is said at once
  return {
    write,
    close: () => {
      closed = true;
      release();
    },
  };
}
