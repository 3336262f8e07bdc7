"use server";

import { refresh } from "next/cache";
import { cookies } from "next/headers";
import { redirect } from "next/navigation";
import { currentAdminSession, currentClientIp, currentUserAgent, isSecureRequest } from "@/lib/admin/request-context";
import {
  SIGNED_OUT_LOCALLY,
  sessionCookieName,
  sessionCookieNamesToClear,
  sessionCookieOptions,
  signInAdministrator,
  signOutAdministrator,
} from "@/lib/admin/session";
import { blockIpAsAdministrator, pauseSponsorships, resumeSponsorships, unblockIpAsAdministrator } from "@/lib/admin/controls";
import { blockWalletAsAdministrator, unblockWalletAsAdministrator } from "@/lib/admin/wallets";
import { sendTestWebhook } from "@/lib/admin/webhooks";
import type { AdminSession } from "@/db/schema";
import { isDatabaseOutage } from "@/db/unavailable";
import { appConfig, appDb } from "@/lib/http/app-context";
import { createLogger } from "@/lib/log";
import { isSponsorshipError } from "@/lib/sponsorship/errors";

/**
 * The dashboard's mutations. Each is a public POST endpoint (Next's server actions), so each checks the session
 * itself: rendering the form only to administrators is not a security boundary. Every change is audited in
 * admin_actions by lib/admin.
 */

const logger = createLogger({ component: "dashboard" });

export type FormState = { error: string | null; message: string | null; retryAfterSeconds?: number };

/** A form's answer while the database cannot be reached (isDatabaseOutage): nothing was done; the form works again by itself. */
const DATABASE_OUTAGE = "The database is not reachable right now, so nothing was done. Try again in a few seconds.";
/**
 * The same, when the change itself met the outage: a connection lost around its commit may have saved it, so the
 * answer does not claim it did not (every change here is idempotent: trying again is safe).
 */
const DATABASE_OUTAGE_DURING_CHANGE = "The database could not be reached, so the change may not have been saved. Check, and try again in a few seconds.";

function safeReturnTo(value: FormDataEntryValue | null): string {
  const text = typeof value === "string" ? value : "";
  // Only a dashboard path: never an open redirect.
  return /^\/dashboard(\/[A-Za-z0-9/_-]*)?$/.test(text) ? text : "/dashboard";
}

export async function signInAction(_previous: FormState, formData: FormData): Promise<FormState> {
  const token = formData.get("token");
  if (typeof token !== "string" || token.trim() === "") return { error: "Enter the administrator token.", message: null };
  let result: Awaited<ReturnType<typeof signInAdministrator>>;
  try {
    result = await signInAdministrator(appDb(), {
      token: token.trim(),
      adminToken: appConfig().adminToken,
      ipAddress: await currentClientIp(),
      ipv6PrefixLength: appConfig().ipv6PrefixLength,
      userAgent: await currentUserAgent(),
    });
  } catch (error) {
    // The sign-in form renders without the database; its answer says why it cannot sign in now.
    if (!isDatabaseOutage(error)) throw error;
    logger.warn("administrator sign-in refused: the database is unavailable", { error });
    return { error: DATABASE_OUTAGE, message: null };
  }
  switch (result.kind) {
    case "signed_in": {
      const secure = await isSecureRequest();
      (await cookies()).set(sessionCookieName(secure), result.secret, sessionCookieOptions(result.expiresAt, secure));
      redirect(safeReturnTo(formData.get("returnTo")));
    }
    // falls through: redirect() never returns
    case "invalid_token":
      return { error: "That token is not right.", message: null };
    case "rate_limited":
      return {
        error: `Too many failed sign-ins from your address. Try again in ${Math.ceil(result.retryAfterSeconds / 60)} minute${result.retryAfterSeconds > 60 ? "s" : ""}.`,
        message: null,
        retryAfterSeconds: result.retryAfterSeconds,
      };
    case "not_configured":
      return { error: "Sign-in is disabled: ADMIN_TOKEN is not configured on the server.", message: null };
  }
}

/**
 * Ends the session and clears its cookie. While the database cannot be reached the session may not be ended on the
 * server: the cookie, the only copy of its secret, is cleared all the same (the administrator asked to be signed out
 * of this browser), and the sign-in form says that the session itself lapses at its expiry (12 h at most).
 */
export async function signOutAction(): Promise<void> {
  let ended = true;
  try {
    const session = await currentAdminSession();
    if (session) await signOutAdministrator(appDb(), session, { ipAddress: await currentClientIp() });
  } catch (error) {
    if (!isDatabaseOutage(error)) throw error;
    logger.warn("sign-out: the database is unavailable; the cookie is cleared, the session lapses at its expiry", { error });
    ended = false;
  }
  // A `__Host-` cookie is only replaced by a Secure one.
  const secure = await isSecureRequest();
  const jar = await cookies();
  for (const name of sessionCookieNamesToClear(secure)) jar.delete({ name, path: "/", secure, httpOnly: true, sameSite: "strict" });
  redirect(ended ? "/dashboard" : `/dashboard?${SIGNED_OUT_LOCALLY.param}=${SIGNED_OUT_LOCALLY.value}`);
}

type SessionCheck = { session: AdminSession; refusal?: undefined } | { session?: undefined; refusal: FormState };

/** The session an administrator's change needs, or the form's answer without one (none, or the database cannot tell). */
async function checkSession(): Promise<SessionCheck> {
  try {
    const session = await currentAdminSession();
    return session ? { session } : { refusal: { error: "Your session has ended. Sign in again.", message: null } };
  } catch (error) {
    if (!isDatabaseOutage(error)) throw error;
    logger.warn("administration refused: the database is unavailable", { error });
    return { refusal: { error: DATABASE_OUTAGE, message: null } };
  }
}

function describeFailure(error: unknown): string {
  if (isDatabaseOutage(error)) {
    logger.warn("administration failed: the database is unavailable", { error });
    return DATABASE_OUTAGE_DURING_CHANGE;
  }
  if (isSponsorshipError(error)) {
    if (error.code === "invalid_address") return "That is not a wallet address (0x followed by 40 hex characters).";
    if (error.code === "invalid_value") return "Give a reason (up to 1,000 characters).";
    return error.message;
  }
  logger.error("administration failed", { error });
  return "The change could not be saved. Please try again.";
}

async function changeWallet(formData: FormData, change: "block" | "unblock"): Promise<FormState> {
  const { session, refusal } = await checkSession();
  if (!session) return refusal;
  const walletAddress = String(formData.get("walletAddress") ?? "");
  const reason = String(formData.get("reason") ?? "");
  if (reason.trim() === "") return { error: "Give a reason: it is kept in the audit log.", message: null };
  const context = { session, ipAddress: await currentClientIp() };
  try {
    if (change === "block") {
      const { created } = await blockWalletAsAdministrator(appDb(), context, { walletAddress, reason });
      refresh();
      return { error: null, message: created ? "Wallet blocked." : "The wallet was already blocked." };
    }
    const { lifted } = await unblockWalletAsAdministrator(appDb(), context, { walletAddress, reason });
    refresh();
    return { error: null, message: lifted.length > 0 ? "Wallet unblocked." : "The wallet was not blocked." };
  } catch (error) {
    return { error: describeFailure(error), message: null };
  }
}

export async function blockWalletAction(_previous: FormState, formData: FormData): Promise<FormState> {
  return changeWallet(formData, "block");
}

export async function unblockWalletAction(_previous: FormState, formData: FormData): Promise<FormState> {
  return changeWallet(formData, "unblock");
}

/* ------------------------------------------------------------- controls */

async function withSession(run: (context: { session: AdminSession; ipAddress: string }) => Promise<string>): Promise<FormState> {
  const { session, refusal } = await checkSession();
  if (!session) return refusal;
  try {
    const message = await run({ session, ipAddress: await currentClientIp() });
    refresh();
    return { error: null, message };
  } catch (error) {
    if (isSponsorshipError(error) && error.code === "invalid_value") return { error: error.message, message: null };
    return { error: describeFailure(error), message: null };
  }
}

export async function pauseAction(_previous: FormState, formData: FormData): Promise<FormState> {
  const reason = String(formData.get("reason") ?? "");
  if (reason.trim() === "") return { error: "Give a reason: it is shown on /health and kept in the audit log.", message: null };
  return withSession(async (context) =>
    (await pauseSponsorships(appDb(), context, { reason })).changed ? "Sponsorships paused." : "Sponsorships were already paused.",
  );
}

export async function resumeAction(_previous: FormState, formData: FormData): Promise<FormState> {
  const reason = String(formData.get("reason") ?? "");
  return withSession(async (context) =>
    (await resumeSponsorships(appDb(), context, { reason })).changed ? "Sponsorships resumed." : "Sponsorships were not paused.",
  );
}

export async function blockIpAction(_previous: FormState, formData: FormData): Promise<FormState> {
  const cidr = String(formData.get("cidr") ?? "");
  const reason = String(formData.get("reason") ?? "");
  if (reason.trim() === "") return { error: "Give a reason: it is kept in the audit log.", message: null };
  return withSession(async (context) => `Blocked ${(await blockIpAsAdministrator(appDb(), context, { cidr, reason })).cidr}.`);
}

export async function unblockIpAction(_previous: FormState, formData: FormData): Promise<FormState> {
  const id = String(formData.get("id") ?? "");
  if (!/^[0-9a-f-]{36}$/i.test(id)) return { error: "That block does not exist.", message: null };
  return withSession(async (context) => ((await unblockIpAsAdministrator(appDb(), context, { id })) ? "Block lifted." : "That block was already lifted."));
}

/* ------------------------------------------------------------- webhooks */

export async function sendTestWebhookAction(_previous: FormState): Promise<FormState> {
  const { session, refusal } = await checkSession();
  if (!session) return refusal;
  try {
    const { eventId } = await sendTestWebhook(appDb(), { session, ipAddress: await currentClientIp() });
    refresh();
    if (!eventId) return { error: "No webhook endpoint is configured (WEBHOOK_URLS), or no worker has registered it yet.", message: null };
    return { error: null, message: `Test event ${eventId} queued for every endpoint.` };
  } catch (error) {
    return { error: describeFailure(error), message: null };
  }
}
