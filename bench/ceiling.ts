import { createPublicClient, encodeFunctionData, http, toEventSelector, type Hex } from "viem";
import { mnemonicToAccount } from "viem/accounts";
import { treasuryAbi } from "@/contracts/generated/treasury";
import { authoriseRelayers, treasuryAdmin } from "@/contracts/deploy-lib";
import { createChainClients } from "@/lib/chain/clients";
import { LOCAL_DEPLOYER_KEY } from "@/lib/config";
import { rpc, rpcBatch } from "./rpc";
import { mapConcurrent, note, randomAddress, waitFor, type Address } from "./util";

/**
 * The chain's ceiling: how fast the same anvil takes the treasury's sponsor call with no service in between.
 * Several relayer accounts (anvil's accounts 5.. of the development mnemonic, authorised for the bench, so the
 * worker's own accounts and nonces are untouched), every transaction signed up front with an explicit nonce,
 * sent in JSON-RPC batches; the clock runs from the first send to the moment every nonce is mined.
 */

const MNEMONIC = "test test test test test test test test test test test junk";

export type CeilingResult = {
  transactions: number;
  relayers: number;
  sendSeconds: number;
  totalSeconds: number;
  perSecond: number;
  blocks: number;
  /** Most sponsor calls mined in one block (with 1-s blocks: the steady-state rate, bounded by the block gas limit). */
  maxPerBlock: number;
  gasPerSponsorship: { mean: number; min: number; max: number; samples: number };
  sponsoredEvents: number;
};

export async function measureCeiling(options: {
  rpcUrl: string;
  chainId: number;
  treasury: Address;
  transactions: number;
  relayers: number;
  batchSize?: number;
}): Promise<CeilingResult> {
  const { rpcUrl, chainId, treasury, transactions: n } = options;
  const accounts = Array.from({ length: options.relayers }, (_, i) => mnemonicToAccount(MNEMONIC, { addressIndex: 5 + i }));
  const clients = createChainClients({ rpcUrl, chainId });
  await authoriseRelayers(
    treasuryAdmin(clients, LOCAL_DEPLOYER_KEY, treasury),
    accounts.map((a) => a.address.toLowerCase() as Address),
  );
  const client = createPublicClient({ transport: http(rpcUrl) });
  const nonces = await Promise.all(accounts.map((a) => client.getTransactionCount({ address: a.address, blockTag: "pending" })));
  const block = await client.getBlock({ blockTag: "latest" });
  const baseFee = block.baseFeePerGas ?? 1_000_000_000n;
  const maxPriorityFeePerGas = 1_000_000_000n;
  // Full blocks raise the base fee by up to 12.5% a block: leave room for a few dozen of them.
  const maxFeePerGas = baseFee * 20n + maxPriorityFeePerGas;
  const gas = 200_000n;

  note(`ceiling: signing ${n} sponsor calls for ${accounts.length} relayer accounts`);
  const signed: Hex[] = await mapConcurrent(
    Array.from({ length: n }, (_, i) => i),
    16,
    async (i) => {
      const k = i % accounts.length;
      const account = accounts[k]!;
      const idHash = `0x${Buffer.from(crypto.getRandomValues(new Uint8Array(32))).toString("hex")}` as Hex;
      return account.signTransaction({
        type: "eip1559",
        chainId,
        to: treasury,
        data: encodeFunctionData({ abi: treasuryAbi, functionName: "sponsor", args: [randomAddress(), idHash] }),
        nonce: nonces[k]! + Math.floor(i / accounts.length),
        gas,
        maxFeePerGas,
        maxPriorityFeePerGas,
      });
    },
  );
  const targets = accounts.map((_, k) => nonces[k]! + Math.ceil((n - k) / accounts.length));
  const startBlock = BigInt(await rpc<Hex>(rpcUrl, "eth_blockNumber"));

  note(`ceiling: sending ${n} transactions`);
  const t0 = performance.now();
  const batchSize = options.batchSize ?? 100;
  const hashes: Hex[] = [];
  for (let i = 0; i < signed.length; i += batchSize) {
    const answers = await rpcBatch(
      rpcUrl,
      signed.slice(i, i + batchSize).map((raw) => ({ method: "eth_sendRawTransaction", params: [raw] })),
    );
    for (const a of answers) {
      if (a.error) throw new Error(`eth_sendRawTransaction: ${a.error.message}`);
      hashes.push(a.result as Hex);
    }
  }
  const sent = performance.now();
  await waitFor(
    "every ceiling transaction to be mined",
    async () => {
      const counts = await rpcBatch(
        rpcUrl,
        accounts.map((a) => ({ method: "eth_getTransactionCount", params: [a.address, "latest"] })),
      );
      return counts.every((c, k) => Number(c.result) >= targets[k]!) ? true : undefined;
    },
    { timeoutMs: 10 * 60_000, intervalMs: 20 },
  );
  const t1 = performance.now();
  const endBlock = BigInt(await rpc<Hex>(rpcUrl, "eth_blockNumber"));
  const perBlock = await rpcBatch(
    rpcUrl,
    Array.from({ length: Number(endBlock - startBlock) }, (_, i) => ({
      method: "eth_getBlockTransactionCountByNumber",
      params: [`0x${(startBlock + 1n + BigInt(i)).toString(16)}`],
    })),
  );
  const maxPerBlock = Math.max(0, ...perBlock.map((b) => Number(b.result ?? 0)));

  // Gas of a sample of receipts, and every Sponsored event in the range.
  const sample = hashes.filter((_, i) => i % Math.max(1, Math.floor(n / 50)) === 0);
  const receipts = await rpcBatch(
    rpcUrl,
    sample.map((h) => ({ method: "eth_getTransactionReceipt", params: [h] })),
  );
  const gasUsed = receipts.map((r) => Number(BigInt((r.result as { gasUsed: Hex }).gasUsed)));
  const failed = receipts.filter((r) => (r.result as { status: Hex }).status !== "0x1").length;
  if (failed > 0) throw new Error(`${failed} sampled ceiling transactions reverted`);
  const logs = await rpc<unknown[]>(rpcUrl, "eth_getLogs", [
    {
      address: treasury,
      fromBlock: `0x${(startBlock + 1n).toString(16)}`,
      toBlock: `0x${endBlock.toString(16)}`,
      topics: [sponsoredTopic()],
      // Only the bench's relayers: topic 3 is the relayer.
    },
  ]);
  const ours = new Set(accounts.map((a) => a.address.toLowerCase().slice(2)));
  const sponsoredEvents = (logs as { topics: Hex[] }[]).filter((l) => ours.has((l.topics[3] ?? "").slice(26).toLowerCase())).length;

  return {
    transactions: n,
    relayers: accounts.length,
    sendSeconds: (sent - t0) / 1000,
    totalSeconds: (t1 - t0) / 1000,
    perSecond: n / ((t1 - t0) / 1000),
    blocks: Number(endBlock - startBlock),
    maxPerBlock,
    gasPerSponsorship: {
      mean: gasUsed.reduce((a, b) => a + b, 0) / gasUsed.length,
      min: Math.min(...gasUsed),
      max: Math.max(...gasUsed),
      samples: gasUsed.length,
    },
    sponsoredEvents,
  };
}

let topic: Hex | undefined;
/** keccak256 of the Sponsored event's signature, from the generated ABI. */
export function sponsoredTopic(): Hex {
  if (!topic) {
    const event = treasuryAbi.find((e) => e.type === "event" && e.name === "Sponsored");
    if (!event || event.type !== "event") throw new Error("Sponsored event missing from the treasury ABI");
    topic = toEventSelector(event);
  }
  return topic;
}
