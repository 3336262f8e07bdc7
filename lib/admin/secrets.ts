import { createHash, createHmac, randomBytes, timingSafeEqual } from "node:crypto";

/** The administrator's credential and session secrets: hashing, comparing, generating. */

export function sha256Hex(value: string): string {
  return createHash("sha256").update(value, "utf8").digest("hex");
}

/**
 * Compares a presented token with ADMIN_TOKEN in constant time. Both sides are hashed first, so the comparison
 * runs over two equal-length digests and leaks neither the token's length nor where a guess first differs.
 */
export function tokensMatch(presented: string, expected: string): boolean {
  const a = createHash("sha256").update(presented, "utf8").digest();
  const b = createHash("sha256").update(expected, "utf8").digest();
  return timingSafeEqual(a, b);
}

/**
 * Ties a session to the ADMIN_TOKEN it was opened with: HMAC-SHA256 keyed with the token over the session's own
 * secret. The session counts only while the configured token gives the same value for the cookie presented. The
 * database holds only SHA-256 of the secret, so this value lets no one who reads it test guesses at the token
 * without a live session's cookie (a fixed label would have).
 */
export function sessionCredential(adminToken: string, sessionSecret: string): string {
  return createHmac("sha256", adminToken).update(sessionSecret, "utf8").digest("hex");
}

/** A session secret: 32 random bytes, base64url (43 characters). Only its SHA-256 is stored. */
export function generateSessionSecret(): string {
  return randomBytes(32).toString("base64url");
}

/** The shape of a secret we issued; anything else is refused before it reaches the database. */
export function isWellFormedSessionSecret(value: string): boolean {
  return /^[A-Za-z0-9_-]{43}$/.test(value);
}
