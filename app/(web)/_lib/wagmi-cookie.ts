/**
 * wagmi's cookie storage on the /request page. The server hands the client component only wagmi's own cookies:
 * whatever reaches a client component is written into the page's HTML, and the Cookie header also carries the
 * administrator's HttpOnly session cookie, which no script may ever read.
 */
export const WAGMI_STORAGE_KEY = "sponsorship.wagmi";

/** The `wagmi` cookies of a Cookie header, as a Cookie header (null when there are none). */
export function wagmiCookieHeader(cookie: string | null | undefined): string | null {
  if (!cookie) return null;
  const kept = cookie
    .split(";")
    .map((part) => part.trim())
    .filter((part) => part.startsWith(`${WAGMI_STORAGE_KEY}.`));
  return kept.length > 0 ? kept.join("; ") : null;
}
