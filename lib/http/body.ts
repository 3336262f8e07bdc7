import { HttpProblem } from "./problem";

/**
 * Request bodies (decisions.md, "Wire format"): JSON only (`415` otherwise), at most 16 KiB (`413`), and a JSON
 * object (`400 invalid_json` for anything else). The size is checked on the declared Content-Length first and on
 * the bytes actually read, so a chunked body cannot slip past the limit.
 */
export const MAX_BODY_BYTES = 16 * 1024;

/** `application/json`, with parameters such as `; charset=utf-8` allowed. */
export function isJsonContentType(value: string | null): boolean {
  if (!value) return false;
  const mediaType = value.split(";")[0]!.trim().toLowerCase();
  return mediaType === "application/json";
}

function clientHungUp(request: Request, error: unknown): boolean {
  if (request.signal.aborted) return true;
  const { code, name, message } = (error ?? {}) as { code?: unknown; name?: unknown; message?: unknown };
  return code === "ECONNRESET" || code === "ECONNABORTED" || name === "AbortError" || (typeof message === "string" && /^aborted$/i.test(message));
}

async function readLimited(request: Request, limit: number): Promise<Uint8Array> {
  const declared = request.headers.get("content-length");
  if (declared !== null && /^\d+$/.test(declared.trim()) && Number(declared) > limit) {
    throw new HttpProblem("payload_too_large", `The body must be at most ${limit} bytes`);
  }
  if (!request.body) return new Uint8Array(0);
  const reader = request.body.getReader();
  const chunks: Uint8Array[] = [];
  let total = 0;
  for (;;) {
    let chunk: ReadableStreamReadResult<Uint8Array>;
    try {
      chunk = await reader.read();
    } catch (error) {
      // The client hung up mid-body (Node's "aborted", code ECONNRESET): its own failure, never the database's outage
      // that code would otherwise be taken for (a 503 and a warning that the database is unavailable).
      if (clientHungUp(request, error)) throw new HttpProblem("request_timeout", "The request body was not received: the client closed the connection");
      throw error;
    }
    const { done, value } = chunk;
    if (done) break;
    total += value.byteLength;
    if (total > limit) {
      await reader.cancel().catch(() => {});
      throw new HttpProblem("payload_too_large", `The body must be at most ${limit} bytes`);
    }
    chunks.push(value);
  }
  const bytes = new Uint8Array(total);
  let offset = 0;
  for (const chunk of chunks) {
    bytes.set(chunk, offset);
    offset += chunk.byteLength;
  }
  return bytes;
}

/** The body of a POST as a JSON object, or an HttpProblem (415, 413, 400). */
export async function readJsonObject(request: Request, limit = MAX_BODY_BYTES): Promise<Record<string, unknown>> {
  if (!isJsonContentType(request.headers.get("content-type"))) {
    throw new HttpProblem("unsupported_media_type", "Send the body as application/json");
  }
  return parseJsonObject(await readLimited(request, limit));
}

function parseJsonObject(bytes: Uint8Array): Record<string, unknown> {
  let value: unknown;
  try {
    value = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(bytes));
  } catch {
    throw new HttpProblem("invalid_json", "The body is not valid JSON");
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw new HttpProblem("invalid_json", "The body must be a JSON object");
  }
  return value as Record<string, unknown>;
}

/**
 * A POST whose body may be left out: `{}` when it has none (empty, whatever its Content-Type: a client that sets
 * `application/json` on every POST sends no body as such), else as readJsonObject.
 */
export async function readOptionalJsonObject(request: Request, limit = MAX_BODY_BYTES): Promise<Record<string, unknown>> {
  if (request.body === null) return {};
  const bytes = await readLimited(request, limit);
  if (bytes.byteLength === 0) return {};
  if (!isJsonContentType(request.headers.get("content-type"))) {
    throw new HttpProblem("unsupported_media_type", "Send the body as application/json");
  }
  return parseJsonObject(bytes);
}
