import { rename, symlink, writeFile } from "node:fs/promises";

/**
 * A full disk for one file, without root: the path is a link to /dev/full, whose writes fail with ENOSPC as on a disk
 * with no space left; `freeSpace` replaces the link at once by a writable file (as `rename` does), as when space is
 * freed. And `until`: the condition's value once it has one.
 */

export async function fullDiskFile(file: string): Promise<string> {
  await symlink("/dev/full", file);
  return file;
}

export async function freeSpace(file: string): Promise<void> {
  await writeFile(`${file}.new`, "");
  await rename(`${file}.new`, file);
}

export async function until<T>(probe: () => T | undefined | Promise<T | undefined>, ms = 15_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error("condition not met in time");
    await new Promise((r) => setTimeout(r, 25));
  }
}
