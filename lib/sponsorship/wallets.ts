import type { Executor } from "@/db/sql/run";
import { findWalletView, registerWalletInDatabase, type WalletView } from "@/db/queries/wallets";
import type { Config } from "@/lib/config";
import type { Address } from "./address";
import { now as clockNow } from "./clock";
import { SponsorshipError } from "./errors";
import { clientIdentity, clientNetwork } from "./client-identity";
import { RATE_LIMIT_WINDOW_MS, rateWindowStart, secondsUntil } from "./rate-limits";

/**
 * Registration (interface-spec 4.1, decisions.md): idempotent, `created` tells 201 from 200; `lastSeenAt` moves on
 * every registration. An administrator's IP block refuses it (403 ip_blocked) before anything is counted. Its own
 * per-IP limit (REGISTER_LIMIT_IP_PER_HOUR, rolling hour, 429 without a block) keeps the wallets table from being
 * flooded: admitted while the identity's rolling hour holds fewer registrations than the limit; a refused
 * registration counts nothing; Retry-After runs until the hit that reached the limit leaves the window. A blocked
 * wallet can still register and shows `isBlocked: true`.
 *
 * Where it runs (rules.ts maps every rule): inside PostgreSQL, in one prepared round trip to `register_wallet`
 * (db/functions/register_wallet.sql), under the identity's advisory lock (lock-keys.ts, registerIpLockKey), so
 * concurrent registrations from one identity cannot exceed the limit; the hit and the upsert commit together.
 */
export async function registerWallet(
  db: Executor,
  input: { walletAddress: Address; ip: string },
  deps: { config: Config; now?: Date },
): Promise<{ wallet: WalletView; created: boolean }> {
  const at = deps.now ?? clockNow();
  // Limits and blocks key on the client identity (an IPv6 client is its prefix).
  const outcome = await registerWalletInDatabase(db, {
    clientKey: clientIdentity(input.ip, deps.config.ipv6PrefixLength),
    clientNetwork: clientNetwork(input.ip, deps.config.ipv6PrefixLength),
    address: input.walletAddress,
    now: at,
    limit: deps.config.registerLimitIpPerHour,
    windowStart: rateWindowStart(at),
  });
  if ("outcome" in outcome) return { wallet: outcome.wallet, created: outcome.created };
  if (outcome.refusal === "ip_blocked") {
    throw new SponsorshipError("ip_blocked", "Requests from this address are blocked by the operator");
  }
  throw new SponsorshipError(
    "rate_limited",
    "Too many registrations from this address; retry later",
    secondsUntil(at, outcome.limitReachedAtMs + RATE_LIMIT_WINDOW_MS),
  );
}

/** GET /wallets/:address. */
export async function getWallet(db: Executor, walletAddress: Address, now: Date = clockNow()): Promise<WalletView> {
  const wallet = await findWalletView(db, walletAddress, now);
  if (!wallet) throw new SponsorshipError("wallet_not_found", `No wallet ${walletAddress} is registered`);
  return wallet;
}
