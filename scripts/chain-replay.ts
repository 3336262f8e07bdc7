import type { Database } from "@/db/client";
import { listConfirmedRawTransactionsFrom, listRelayerAddresses } from "@/db/queries/chain-replay";
import { createChainClients } from "@/lib/chain/clients";
import type { Logger } from "@/lib/log";

/**
 * anvil writes its state every 10 s and on a clean stop, so a local chain killed outright comes back from a dump up
 * to 10 s old: the sponsorships it mined since are gone from it, while the database holds them as completed. Every
 * transaction is stored (raw, signed) before it is broadcast, so the lost ones are sent again, same bytes and same
 * hash, in nonce order: the chain ends up where it was and each wallet is paid once. Only confirmed transactions
 * at or above each relayer's restored nonce are sent; open ones are the worker's (it broadcasts them again).
 *
 * Runs right after the chain is back and the deployment checked. The worker, should it see a lost nonce missing
 * first, sends the same stored bytes itself instead of filling the hole (worker/stages/confirm/holes.ts).
 */
export async function replayLostTransactions(options: { db: Database; rpcUrl: string; logger: Logger }): Promise<number> {
  const { db, rpcUrl, logger } = options;
  const relayers = await listRelayerAddresses(db);
  if (relayers.length === 0) return 0;
  const client = createChainClients({ rpcUrl });
  const nonces = await Promise.all(relayers.map((address) => client.getTransactionCount({ address, blockTag: "latest" })));
  const lost = await listConfirmedRawTransactionsFrom(
    db,
    relayers.map((relayer, i) => ({ relayer, nonce: nonces[i]! })),
  );
  let sent = 0;
  for (const tx of lost) {
    try {
      await client.sendRawTransaction({ serializedTransaction: tx.raw });
      sent += 1;
    } catch (error) {
      logger.warn("a lost transaction could not be sent again", { relayer: tx.relayer, nonce: tx.nonce, error });
    }
  }
  if (lost.length > 0) logger.warn("the local chain came back from an older state: lost transactions sent again", { lost: lost.length, sent });
  return sent;
}
