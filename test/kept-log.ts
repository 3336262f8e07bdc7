import type { LogFields, Logger } from "@/lib/log";

/** A line a logger was given: its level, message and fields. */
export type KeptLine = { level: "debug" | "info" | "warn" | "error"; msg: string; fields?: LogFields };

/** A logger that keeps every line in `lines` (its children too) instead of writing it, for a test to read. */
export function keptLog(): { log: Logger; lines: KeptLine[] } {
  const lines: KeptLine[] = [];
  const log: Logger = {
    debug: (msg, fields) => void lines.push({ level: "debug", msg, fields }),
    info: (msg, fields) => void lines.push({ level: "info", msg, fields }),
    warn: (msg, fields) => void lines.push({ level: "warn", msg, fields }),
    error: (msg, fields) => void lines.push({ level: "error", msg, fields }),
    child: () => log,
  };
  return { log, lines };
}
