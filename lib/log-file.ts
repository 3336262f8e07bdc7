import { closeSync, fchmodSync, fstatSync, openSync, writeSync } from "node:fs";
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
 */
export function openLogFile(file: string, logger: Logger): LogFile {
  let fd: number | undefined;
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
  const write = (chunk: Buffer | string) => {
    if (closed) return;
    const data = typeof chunk === "string" ? Buffer.from(chunk) : chunk;
    let written = 0;
    try {
      if (fd === undefined) {
        fd = openSync(file, "a", 0o600);
        if (fstatSync(fd).isFile()) fchmodSync(fd, 0o600);
      }
      while (written < data.length) written += writeSync(fd, data, written);
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
