import { chmodSync, closeSync, copyFileSync, fsyncSync, openSync, renameSync, rmSync, writeSync } from "node:fs";
import path from "node:path";

/**
 * Writes `file` whole or not at all, and durably: the content (a string, or chunks written one after another, e.g.
 * slices of a large Buffer) goes to a temporary file beside it, which is synced, renamed over `file`, and the rename
 * synced with its directory. A reader never sees half a file, and neither a full disk nor a crash or power cut at
 * any point leaves `file` empty or cut short: it is the old one or the new one. The temporary file is removed when
 * the write fails.
 */
export function writeFileDurably(file: string, content: string | Iterable<Buffer | string>, mode = 0o600): void {
  replaceDurably(file, mode, (tmp) => {
    const fd = openSync(tmp, "w", mode);
    try {
      for (const chunk of typeof content === "string" ? [content] : content) {
        const bytes = typeof chunk === "string" ? Buffer.from(chunk) : chunk;
        for (let done = 0; done < bytes.length;) done += writeSync(fd, bytes, done, bytes.length - done);
      }
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
  });
}

/** Copies `from` over `to` whole or not at all, and durably (as writeFileDurably): for files too large to hold twice. */
export function copyFileDurably(from: string, to: string, mode = 0o600): void {
  replaceDurably(to, mode, (tmp) => {
    copyFileSync(from, tmp);
    const fd = openSync(tmp, "r+");
    try {
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
  });
}

/** `fill` writes and syncs the temporary file; it is then given `mode`, renamed over `file`, and the rename synced. */
function replaceDurably(file: string, mode: number, fill: (tmp: string) => void): void {
  const tmp = `${file}.${process.pid}.tmp`;
  try {
    fill(tmp);
    // The mode of a file that already existed under the temporary name (openSync's applies only to a new one).
    chmodSync(tmp, mode);
    renameSync(tmp, file);
  } catch (error) {
    rmSync(tmp, { force: true });
    throw error;
  }
  syncDirectory(path.dirname(file));
}

/** A rename or a new file in `dir` survives a power cut once the directory itself is synced. */
export function syncDirectory(dir: string): void {
  const fd = openSync(dir, "r");
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}
