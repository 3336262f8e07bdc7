import type { Address, Hex, PrivateKeyAccount } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import type { Database } from "@/db/client";
import { listWorkerPresence } from "@/db/queries/heartbeats";
import { pipelinedTransaction } from "@/db/sql/transaction";
import {
  acquireRelayerLease,
  ensureRelayerAccounts,
  findHighestStoredNonce,
  listRelayerLeases,
  lockLeasedRelayers,
  releaseRelayerLeases,
  renewRelayerLeases,
  setRelayerNextNonces,
} from "@/db/queries/relayers";
import type { Logger } from "@/lib/log";
import type { WorkerChain } from "./chain";
import { FatalWorkerError } from "./errors";
import { processAlive } from "@/lib/process-alive";
import { sameProcessSpace } from "./host";

/**
 * The relayer keys this worker may use, and which of them it leases right now. Each relayer's nonce sequence is
 * owned by exactly one worker: a lease is taken only when free, expired or left by a dead process on this host
 * (in this PID namespace),
 * and shared fairly (each live worker holds ceil(relayers / workers), more only of what no other would take:
 * rebalance). On taking a lease the next nonce is
 * reconciled with the chain (pending nonce) and with the highest nonce stored in the database.
 */

export class LeaseLostError extends Error {
  override name = "LeaseLostError";
}

export type RelayerPoolOptions = {
  db: Database;
  chain: WorkerChain;
  log: Logger;
  workerId: string;
  keys: readonly Hex[];
  leaseTtlMs: number;
  /** Called when a lease of this worker is taken or ends: what it knew of the relayer belongs to another tenure. */
  onLeaseChange?: (address: Address) => void;
};

export class RelayerPool {
  private readonly accounts = new Map<Address, PrivateKeyAccount>();
  private readonly held = new Set<Address>();
  private cursor = 0;

  constructor(private readonly options: RelayerPoolOptions) {
    for (const key of options.keys) {
      const account = privateKeyToAccount(key);
      this.accounts.set(account.address.toLowerCase() as Address, account);
    }
  }

  /** Every configured relayer address (lowercase). */
  get configured(): Address[] {
    return [...this.accounts.keys()].sort();
  }

  /** The relayers this worker leases now, sorted. */
  get leased(): Address[] {
    return [...this.held].sort();
  }

  account(address: Address): PrivateKeyAccount {
    const account = this.accounts.get(address);
    if (!account) throw new Error(`no key for relayer ${address}`);
    return account;
  }

  /** Leased relayers in round-robin order, starting after the one used last (spreads attempts over keys). */
  rotation(): Address[] {
    const leased = this.leased;
    if (leased.length === 0) return [];
    const start = this.cursor % leased.length;
    this.cursor = (this.cursor + 1) % Math.max(1, leased.length);
    return [...leased.slice(start), ...leased.slice(0, start)];
  }

  /**
   * Registers the configured relayers. A relayer this database knows on another chain stops the start: its next
   * nonce and open transactions belong to that chain, and using them here would assign wrong nonces.
   */
  async register(chainId: number): Promise<void> {
    const elsewhere = await ensureRelayerAccounts(this.options.db, chainId, this.configured);
    if (elsewhere.length > 0) {
      const { address, chainId: other } = elsewhere[0]!;
      throw new FatalWorkerError(
        `relayer ${address} has nonce state for chain ${other} in this database, but RPC_URL is chain ${chainId}: ` +
          "use one database per chain (or other relayer keys)",
      );
    }
  }

  /** Forgets a relayer whose lease turned out to be lost (fenced write refused). */
  drop(address: Address, why: string): void {
    if (!this.forget(address)) return;
    this.options.log.warn("relayer lease lost", { relayer: address, why });
  }

  private forget(address: Address): boolean {
    if (!this.held.delete(address)) return false;
    this.options.onLeaseChange?.(address);
    return true;
  }

  /** Extends the leases (with the heartbeat); forgets the ones another worker took. */
  async renew(): Promise<void> {
    const mine = this.leased;
    if (mine.length === 0) return;
    const still = new Set(await renewRelayerLeases(this.options.db, this.options.workerId, mine, this.options.leaseTtlMs));
    for (const address of mine) if (!still.has(address)) this.drop(address, "taken over by another worker");
  }

  /**
   * Takes or gives back leases so that every live worker holds its fair share, and no relayer a live worker has the
   * key of is left to nobody. Called between stages, never while a stage uses a relayer.
   *
   * A worker's share is ceil(its relayers / the live workers that hold keys for some of them, itself included). A
   * lease is given back only to a competitor below its own share that holds the key (its share computed as it
   * computes it), at most as many as it lacks; and a free relayer is taken beyond the share when no such competitor
   * would take it. Until session 25 a worker gave back its extras whoever could take them: with keys that only
   * partly overlap (four here, one of them there: a rolling change of RELAYER_PRIVATE_KEYS) two relayers were held by
   * nobody, and the transactions they had sent were never settled.
   */
  async rebalance(): Promise<void> {
    const { db, workerId, leaseTtlMs, log } = this.options;
    const presence = await listWorkerPresence(db);
    // A pid is probed only in our own PID namespace on our host (worker/host.ts); anywhere else, the beat's age.
    const dead = new Set(
      presence.filter((w) => w.workerId !== workerId && ((sameProcessSpace(w) && !processAlive(w.pid)) || w.lastBeatAgeMs > leaseTtlMs)).map((w) => w.workerId),
    );
    // Keys a worker holds, as it said in its heartbeat (one that has not said: all of ours).
    const keysOf = (w: { configuredRelayers: string[] | null }): Set<Address> =>
      w.configuredRelayers === null ? new Set(this.accounts.keys()) : new Set(w.configuredRelayers.map((a) => a.toLowerCase() as Address));
    const overlaps = (a: Set<Address>, b: Set<Address>) => [...a].some((address) => b.has(address));
    const mine = new Set(this.accounts.keys());
    const others = presence
      .filter((w) => w.workerId !== workerId && !dead.has(w.workerId))
      .map((w) => ({ workerId: w.workerId, keys: keysOf(w), said: w.configuredRelayers !== null }));
    // Only workers that hold keys for some of our relayers compete for them: a worker with other keys, or none,
    // must not shrink our share and leave accounts unused.
    const competitors = others.filter((w) => overlaps(w.keys, mine));
    // A worker's share, as it counts it: its keys over itself and the live workers holding some of them.
    const everyone = [{ workerId, keys: mine, said: true }, ...others];
    const shareOf = (w: { workerId: string; keys: Set<Address> }) =>
      Math.ceil(w.keys.size / (everyone.filter((v) => v.workerId !== w.workerId && overlaps(v.keys, w.keys)).length + 1));
    const share = shareOf(everyone[0]!);

    const everyKey = new Set<Address>([...mine, ...competitors.flatMap((w) => [...w.keys])]);
    const leases = await listRelayerLeases(db, [...everyKey].sort());
    // Forget what the database says is no longer ours.
    for (const lease of leases) if (this.held.has(lease.address) && lease.leaseOwner !== workerId) this.drop(lease.address, "owner changed");

    // What each competitor lacks of its share (its own rivals include this worker).
    const lacking = new Map<string, number>();
    for (const w of competitors) {
      const held = leases.filter((l) => l.leaseOwner === w.workerId && !l.leaseExpired).length;
      lacking.set(w.workerId, shareOf(w) - held);
    }
    /**
     * A competitor below its share that would take this relayer; counted as taking it when `claim`. One whose
     * heartbeat does not say its keys is never counted on: it may hold none of them.
     */
    const takerOf = (address: Address, claim: boolean): string | undefined => {
      const taker = competitors.find((w) => w.said && w.keys.has(address) && (lacking.get(w.workerId) ?? 0) > 0)?.workerId;
      if (taker !== undefined && claim) lacking.set(taker, lacking.get(taker)! - 1);
      return taker;
    };

    if (this.held.size > share) {
      const extra = this.leased
        .reverse()
        .filter((address) => takerOf(address, true) !== undefined)
        .slice(0, this.held.size - share);
      if (extra.length > 0) {
        await releaseRelayerLeases(db, workerId, extra);
        for (const address of extra) this.forget(address);
        log.info("relayer leases released for another worker", { relayers: extra, share, workers: competitors.length + 1 });
        return;
      }
      // Nothing to give back: what no other worker would take is still taken below (a relayer whose other key holder
      // stopped, or one given back after a failed reconciliation).
    }

    for (const lease of leases) {
      if (!mine.has(lease.address) || this.held.has(lease.address)) continue;
      // Beyond the share only what no competitor below its share would take: left alone, nobody would settle it.
      if (this.held.size >= share && takerOf(lease.address, false) !== undefined) continue;
      // Expiry as the database judges it (this worker's wall clock may step or differ from the one that set it).
      const free = lease.leaseOwner === null || lease.leaseOwner === workerId || dead.has(lease.leaseOwner) || lease.leaseExpired;
      if (!free) continue;
      const acquired = await acquireRelayerLease(db, lease.address, workerId, leaseTtlMs, [...dead]);
      if (!acquired) continue;
      try {
        await this.reconcile(lease.address, acquired.nextNonce);
        this.options.onLeaseChange?.(lease.address);
        this.held.add(lease.address);
        log.info("relayer lease acquired", { relayer: lease.address, previousOwner: acquired.previousOwner, share, workers: competitors.length + 1 });
      } catch (error) {
        // Not reconciled, not used: give it back so nobody waits for the lease to expire.
        await releaseRelayerLeases(db, workerId, [lease.address]).catch(() => {});
        throw error;
      }
    }
  }

  /**
   * The next nonce after taking a lease: never below the chain's pending nonce (the key may have been used
   * elsewhere) nor below what the database already assigned. Stored transactions the node lost (pending nonce
   * below them) are re-broadcast by the confirm stage.
   */
  private async reconcile(address: Address, storedNext: number): Promise<void> {
    const { db, chain, workerId, log } = this.options;
    const [nonces, highest] = await Promise.all([chain.nonces([address]), findHighestStoredNonce(db, address)]);
    const chainPending = nonces.get(address)!.pending;
    const next = Math.max(chainPending, highest + 1, storedNext);
    if (chainPending > highest + 1 && highest >= 0) {
      log.warn("relayer nonce ahead of the database: the key was used outside this service", { relayer: address, chainPending, highestStored: highest });
    }
    if (chainPending < highest + 1) {
      log.info("relayer has stored transactions the node does not hold; they will be re-broadcast", {
        relayer: address,
        chainPending,
        highestStored: highest,
      });
    }
    if (next !== storedNext) {
      await pipelinedTransaction(db, async (tx) => {
        const [locked] = await tx.send([lockLeasedRelayers(workerId, [address])]);
        if (!locked.has(address)) throw new LeaseLostError(`lease of ${address} lost while reconciling`);
        await tx.send([setRelayerNextNonces(workerId, new Map([[address, next]]))]);
      });
    }
  }

  /** Gives every lease back (graceful shutdown): another worker can take over at once. */
  async releaseAll(): Promise<void> {
    const mine = this.leased;
    for (const address of mine) this.forget(address);
    await releaseRelayerLeases(this.options.db, this.options.workerId, mine);
  }
}
