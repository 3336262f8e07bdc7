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
 * Names an ADMIN_TOKEN without storing it: HMAC-SHA256 keyed with the token over a fixed label. A session records
 * the fingerprint of the token it was opened with and counts only while the configured token has the same one.
 */
export function credentialFingerprint(adminToken: string): string {
  return createHmac("sha256", adminToken).update("gas-sponsorship admin session credential", "utf8").digest("hex");
}

/** A session secret: 32 random bytes, base64url (43 characters). Only its SHA-256 is stored. */
export function generateSessionSecret(): string {
  return randomBytes(32).toString("base64url");
}

/** The shape of a secret we issued; anything else is refused before it reaches the database. */
export function isWellFormedSessionSecret(value: string): boolean {
  return /^[A-Za-z0-9_-]{43}$/.test(value);
}
