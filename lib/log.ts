import { getConfig, type Config } from "./config";
import { redactedUrl } from "./redact-url";

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

/**
 * The configured URLs' forms that may carry a credential (a provider's key in an RPC_URL's path or query, a token in
 * a webhook URL's path, a password in DATABASE_URL), each with what a log line says instead: the origin. Errors
 * quote them (viem's `URL: ...` line, without the user and password), and log files are read by more people than
 * the configuration.
 */
function urlRedactions(config: Config): [string, string][] {
  const pairs: [string, string][] = [];
  for (const raw of [...config.rpcUrls, ...config.webhookUrls, config.databaseUrl ?? ""]) {
    let url: URL;
    try {
      url = new URL(raw);
    } catch {
      continue;
    }
    const redacted = redactedUrl(raw);
    if (redacted === raw || `${redacted}/` === raw) continue;
    url.username = "";
    url.password = "";
    for (const form of new Set([raw, url.toString()])) pairs.push([form, redacted]);
  }
  // A URL that begins another is replaced after it.
  return pairs.sort(([a], [b]) => b.length - a.length);
}

let redactions: { config: Config; pairs: [string, string][] } | undefined;

function redact(line: string): string {
  let config: Config;
  try {
    config = getConfig();
  } catch {
    return line;
  }
  if (redactions?.config !== config) redactions = { config, pairs: urlRedactions(config) };
  for (const [secret, shown] of redactions.pairs) if (line.includes(secret)) line = line.split(secret).join(shown);
  return line;
}

function serialise(value: unknown): unknown {
  if (value instanceof Error) {
    return { name: value.name, message: value.message, stack: value.stack, cause: value.cause ? serialise(value.cause) : undefined };
  }
  if (typeof value === "bigint") return value.toString();
  return value;
}

/** Where a logger's lines go instead of stdout and stderr (a test keeping a process's lines to print on failure). */
export type LogSink = (line: string, level: Level) => void;

function write(level: Level, msg: string, base: LogFields, fields: LogFields | undefined, sink: LogSink | undefined): void {
  if (!sink && rank[level] < threshold()) return;
  const entry: LogFields = { time: new Date().toISOString(), level, msg, ...base };
  if (fields) for (const [k, v] of Object.entries(fields)) entry[k] = serialise(v);
  const line = redact(JSON.stringify(entry, (_k, v) => (typeof v === "bigint" ? v.toString() : v))) + "\n";
  if (sink) sink(line, level);
  else if (level === "error" || level === "warn") process.stderr.write(line);
  else process.stdout.write(line);
}

/** A logger with `base` in every line; with `sink`, every line (whatever LOG_LEVEL says) goes to it instead. */
export function createLogger(base: LogFields = {}, sink?: LogSink): Logger {
  return {
    debug: (msg, fields) => write("debug", msg, base, fields, sink),
    info: (msg, fields) => write("info", msg, base, fields, sink),
    warn: (msg, fields) => write("warn", msg, base, fields, sink),
    error: (msg, fields) => write("error", msg, base, fields, sink),
    child: (fields) => createLogger({ ...base, ...fields }, sink),
  };
}

export const log = createLogger();
