/**
 * A URL as it may be shown, logged or stored: its origin, then `/[redacted]` for whatever followed it. A path or a
 * query may hold a token (a Slack-style webhook URL is its own secret; a provider's RPC key sits in its path), and a
 * user name and password are never shown. A bare origin is shown as it is; an unparsable value not at all.
 */
export function redactedUrl(raw: string): string {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return "[redacted]";
  }
  const origin = `${url.protocol}//${url.host}`;
  return raw === origin || raw === `${origin}/` ? origin : `${origin}/[redacted]`;
}

/** `text` with every spelling of `raw` in it replaced by redactedUrl(raw) (an error message that quotes the URL). */
export function withoutUrl(text: string, raw: string): string {
  const redacted = redactedUrl(raw);
  let out = text;
  for (const form of new Set([raw, URL.canParse(raw) ? new URL(raw).toString() : raw])) if (form !== redacted) out = out.split(form).join(redacted);
  return out;
}
