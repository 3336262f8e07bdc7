import type { Database } from "@/db/client";
import type { Executor } from "@/db/sql/run";
import { attemptRegistration, findWalletView, type WalletView } from "@/db/queries/wallets";
import type { Config } from "@/lib/config";
import type { Address } from "./address";
import { now as clockNow } from "./clock";
import { SponsorshipError } from "./errors";
import { clientIdentity, clientNetwork } from "./client-identity";
import { registerIpLockKey } from "./lock-keys";
import { RATE_LIMIT_WINDOW_MS, rateWindowStart, secondsUntil } from "./rate-limits";

/**
 * Registration (interface-spec 4.1, decisions.md): idempotent, `created` tells 201 from 200; `lastSeenAt` moves on
 * every registration. An administrator's IP block refuses it (403 ip_blocked) before anything is counted. Its own per-IP limit (REGISTER_LIMIT_IP_PER_HOUR, rolling hour, 429 without a block) keeps
 * the wallets table from being flooded. A blocked wallet can still register and shows `isBlocked: true`.
 */
export async function registerWallet(
  db: Database,
  input: { walletAddress: Address; ip: string },
  deps: { config: Config; now?: Date },
): Promise<{ wallet: WalletView; created: boolean }> {
  const at = deps.now ?? clockNow();
  // Limits and blocks key on the client identity (an IPv6 client is its prefix).
  const clientKey = clientIdentity(input.ip, deps.config.ipv6PrefixLength);
  const outcome = await attemptRegistration(
    db,
    {
      clientKey,
      clientNetwork: clientNetwork(input.ip, deps.config.ipv6PrefixLength),
      address: input.walletAddress,
      now: at,
      limit: deps.config.registerLimitIpPerHour,
      windowStart: rateWindowStart(at),
      lockKey: registerIpLockKey(clientKey),
    },
    // Admitted while the rolling hour holds fewer than the limit; a refused registration counts nothing.
    (limitReachedAtMs) => limitReachedAtMs === null,
  );
  if (!outcome.admitted && outcome.ipBlocked) {
    throw new SponsorshipError("ip_blocked", "Requests from this address are blocked by the operator");
  }
  if (!outcome.admitted) {
    const untilMs = (outcome.limitReachedAtMs ?? at.getTime()) + RATE_LIMIT_WINDOW_MS;
    throw new SponsorshipError("rate_limited", "Too many registrations from this address; retry later", secondsUntil(at, untilMs));
  }
  return { wallet: outcome.wallet, created: outcome.created };
}

/** GET /wallets/:address. */
export async function getWallet(db: Executor, walletAddress: Address, now: Date = clockNow()): Promise<WalletView> {
  const wallet = await findWalletView(db, walletAddress, now);
  if (!wallet) throw new SponsorshipError("wallet_not_found", `No wallet ${walletAddress} is registered`);
  return wallet;
}
