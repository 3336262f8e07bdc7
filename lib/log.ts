import { getConfig } from "./config";

/** Structured logs: one JSON object a line on stdout (errors on stderr), with the fields each caller adds. */

type Level = "debug" | "info" | "warn" | "error";
const rank: Record<Level | "silent", number> = { debug: 10, info: 20, warn: 30, error: 40, silent: 100 };

export type LogFields = Record<string, unknown>;

export interface Logger {
  debug(msg: string, fields?: LogFields): void;
  info(msg: string, fields?: LogFields): void;
  warn(msg: string, fields?: LogFields): void;
  error(msg: string, fields?: LogFields): void;
  child(fields: LogFields): Logger;
}

function threshold(): number {
  try {
    return rank[getConfig().logLevel];
  } catch {
    return rank.info;
  }
}

function serialise(value: unknown): unknown {
  if (value instanceof Error) {
    return { name: value.name, message: value.message, stack: value.stack, cause: value.cause ? serialise(value.cause) : undefined };
  }
  if (typeof value === "bigint") return value.toString();
  return value;
}

function write(level: Level, msg: string, base: LogFields, fields: LogFields | undefined): void {
  if (rank[level] < threshold()) return;
  const entry: LogFields = { time: new Date().toISOString(), level, msg, ...base };
  if (fields) for (const [k, v] of Object.entries(fields)) entry[k] = serialise(v);
  const line = JSON.stringify(entry, (_k, v) => (typeof v === "bigint" ? v.toString() : v)) + "\n";
  if (level === "error" || level === "warn") process.stderr.write(line);
  else process.stdout.write(line);
}

export function createLogger(base: LogFields = {}): Logger {
  return {
    debug: (msg, fields) => write("debug", msg, base, fields),
    info: (msg, fields) => write("info", msg, base, fields),
    warn: (msg, fields) => write("warn", msg, base, fields),
    error: (msg, fields) => write("error", msg, base, fields),
    child: (fields) => createLogger({ ...base, ...fields }),
  };
}

export const log = createLogger();
