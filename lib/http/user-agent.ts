/** User agents longer than this are cut (headers are client-controlled; the column is not a dumping ground). */
export const MAX_USER_AGENT_LENGTH = 512;

/**
 * The User-Agent as stored with a request, a sign-in or an audited action: cut to MAX_USER_AGENT_LENGTH, `null`
 * when absent. The one place the cut is made (creation, admin sign-in, server actions, /metrics' bearer check).
 */
export function storedUserAgent(value: string | null | undefined): string | null {
  return value === null || value === undefined ? null : value.slice(0, MAX_USER_AGENT_LENGTH);
}
