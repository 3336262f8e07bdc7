import { mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { encodeFunctionData, type Hex } from "viem";
import { mnemonicToAccount } from "viem/accounts";
import { authoriseRelayers, treasuryAdmin } from "@/contracts/deploy-lib";
import { anvilDir, ensureLocalChain } from "@/contracts/local-chain";
import { treasuryAbi } from "@/contracts/generated/treasury";
import { createChainClients } from "@/lib/chain/clients";
import { requestIdHash } from "@/lib/chain/ids";
import { LOCAL_DEPLOYER_KEY, parseConfig } from "@/lib/config";
import type { Logger } from "@/lib/log";
import { freePort } from "@/test/ports";
import { rpc, rpcBatch } from "./rpc";
import { note, randomAddress, waitFor, type Address } from "./util";

/**
 * The local chain's memory under load (issue 11, item 10): anvil's resident set size before and after
 * `transactions` sponsor calls sent at `rate` per second to a chain started exactly as `npm start` starts it
 * (contracts/local-chain.ts), then again after a restart from its persisted state. Bounded in count and time:
 * each batch waits for its nonces to be mined, the whole run gives up after `timeoutMs`.
 *
 * RSS, not time, is the figure: the machine is shared and noisy.
 */

const MNEMONIC = "test test test test test test test test test test test junk";

export type ChainUnderTest = { rpcUrl: string; chainId: number; treasury: Address; pid: number };

export type ChainMemoryResult = {
  blockTime: number;
  transactions: number;
  rate: number;
  blocks: number;
  /** Resident set size of anvil (MiB): after deployment, every `sampleEvery` transactions, at the end, after a restart. */
  rssMiB: { before: number; samples: { transactions: number; rss: number }[]; after: number; idle?: number; peak: number; afterRestart?: number };
  /** Seconds the chain idled (mining empty blocks) before `idle` was read. */
  idleSeconds?: number;
  /** The state file on disk (MiB) after the chain stopped. */
  stateFileMiB?: number;
  /** The restart from the persisted state reused the deployment and still knew the sponsored wallets. */
  restartKeptDeployment?: boolean;
  seconds: number;
};

export function residentMiB(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  const kb = /^VmRSS:\s+(\d+) kB$/m.exec(status)?.[1];
  if (!kb) throw new Error(`no VmRSS for pid ${pid}`);
  return Number(kb) / 1024;
}

export async function measureChainMemory(options: {
  chain: ChainUnderTest;
  transactions: number;
  /** Sponsor calls per second. */
  rate: number;
  relayers?: number;
  sampleEvery?: number;
  timeoutMs?: number;
}): Promise<Omit<ChainMemoryResult, "blockTime">> {
  const { chain, transactions: n, rate } = options;
  const sampleEvery = options.sampleEvery ?? Math.max(1, Math.floor(n / 10));
  const deadline = Date.now() + (options.timeoutMs ?? 15 * 60_000);
  const accounts = Array.from({ length: options.relayers ?? 4 }, (_, i) => mnemonicToAccount(MNEMONIC, { addressIndex: 5 + i }));
  const clients = createChainClients({ rpcUrl: chain.rpcUrl, chainId: chain.chainId });
  await authoriseRelayers(
    treasuryAdmin(clients, LOCAL_DEPLOYER_KEY, chain.treasury),
    accounts.map((a) => a.address.toLowerCase() as Address),
  );
  const startBlock = BigInt(await rpc<Hex>(chain.rpcUrl, "eth_blockNumber"));
  const before = residentMiB(chain.pid);
  let peak = before;
  const samples: { transactions: number; rss: number }[] = [];
  const nonces = (
    await rpcBatch(
      chain.rpcUrl,
      accounts.map((a) => ({ method: "eth_getTransactionCount", params: [a.address, "pending"] })),
    )
  ).map((r) => Number(r.result));
  const block = await clients.getBlock({ blockTag: "latest" });
  const maxPriorityFeePerGas = 1_000_000_000n;
  const maxFeePerGas = (block.baseFeePerGas ?? 1_000_000_000n) * 20n + maxPriorityFeePerGas;

  note(`chain memory: ${n} sponsor calls at ${rate}/s, anvil RSS ${before.toFixed(1)} MiB after deployment`);
  const t0 = performance.now();
  // One batch every 100 ms (rate/10 calls), each paced against the clock so slow sends do not pile up.
  const perBatch = Math.max(1, Math.round(rate / 10));
  let sent = 0;
  while (sent < n) {
    if (Date.now() > deadline) throw new Error(`chain memory: gave up after ${sent} of ${n} transactions (time bound)`);
    const count = Math.min(perBatch, n - sent);
    const raws = await Promise.all(
      Array.from({ length: count }, (_, j) => {
        const i = sent + j;
        const k = i % accounts.length;
        const nonce = nonces[k]!;
        nonces[k] = nonce + 1;
        return accounts[k]!.signTransaction({
          type: "eip1559",
          chainId: chain.chainId,
          to: chain.treasury,
          data: encodeFunctionData({ abi: treasuryAbi, functionName: "sponsor", args: [randomAddress(), requestIdHash(crypto.randomUUID())] }),
          nonce,
          gas: 200_000n,
          maxFeePerGas,
          maxPriorityFeePerGas,
        });
      }),
    );
    const answers = await rpcBatch(
      chain.rpcUrl,
      raws.map((raw) => ({ method: "eth_sendRawTransaction", params: [raw] })),
    );
    const refused = answers.find((a) => a.error);
    if (refused) throw new Error(`eth_sendRawTransaction: ${refused.error!.message}`);
    const before = Math.floor(sent / sampleEvery);
    sent += count;
    if (Math.floor(sent / sampleEvery) > before) {
      const rss = residentMiB(chain.pid);
      peak = Math.max(peak, rss);
      samples.push({ transactions: sent, rss });
    }
    const due = t0 + (sent / rate) * 1000;
    const wait = due - performance.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
  }
  await waitFor(
    "every chain-memory transaction to be mined",
    async () => {
      const counts = await rpcBatch(
        chain.rpcUrl,
        accounts.map((a) => ({ method: "eth_getTransactionCount", params: [a.address, "latest"] })),
      );
      return counts.every((c, k) => Number(c.result) >= nonces[k]!) ? true : undefined;
    },
    { timeoutMs: Math.max(10_000, deadline - Date.now()), intervalMs: 250 },
  );
  const seconds = (performance.now() - t0) / 1000;
  const endBlock = BigInt(await rpc<Hex>(chain.rpcUrl, "eth_blockNumber"));
  const after = residentMiB(chain.pid);
  peak = Math.max(peak, after);
  note(`chain memory: ${n} mined in ${seconds.toFixed(1)} s over ${endBlock - startBlock} blocks, anvil RSS ${after.toFixed(1)} MiB (peak ${peak.toFixed(1)})`);
  return { transactions: n, rate, blocks: Number(endBlock - startBlock), rssMiB: { before, samples, after, peak }, seconds };
}

/** Bench logs go to stderr: stdout carries the final table only. */
const quietLogger: Logger = {
  debug: () => {},
  info: () => {},
  warn: (msg) => note(`local chain: ${msg}`),
  error: (msg) => note(`local chain: ${msg}`),
  child: () => quietLogger,
};

/**
 * The bench phase `chainmemory`: the local chain of `npm start` (`ensureLocalChain`, 1-s blocks, persisted state)
 * in a temporary DATA_DIR on a free port, `transactions` sponsor calls at `rate`/s, `idleSeconds` of empty
 * blocks, then a restart from the persisted state (the deployment must be reused and the chain kept).
 */
export async function runChainMemoryPhase(options: {
  transactions: number;
  rate: number;
  idleSeconds: number;
  blockTime?: number;
}): Promise<ChainMemoryResult> {
  const dataDir = mkdtempSync(path.join(os.tmpdir(), "bench-chain-memory-"));
  const blockTime = options.blockTime ?? 1;
  const config = parseConfig({ DATA_DIR: dataDir, LOCAL_CHAIN_PORT: String(await freePort()), LOCAL_BLOCK_TIME: String(blockTime) });
  let chain = await ensureLocalChain({ config, logger: quietLogger });
  try {
    const under = { rpcUrl: chain.rpcUrl, chainId: chain.chainId, treasury: chain.treasuryAddress, pid: chain.pid };
    const measured = await measureChainMemory({ chain: under, transactions: options.transactions, rate: options.rate });
    await new Promise((r) => setTimeout(r, options.idleSeconds * 1000));
    const idle = residentMiB(chain.pid);
    const head = BigInt(await rpc<Hex>(chain.rpcUrl, "eth_blockNumber"));
    await chain.stop();
    const stateFileMiB = statSync(path.join(anvilDir(dataDir), "state.json")).size / 2 ** 20;

    chain = await ensureLocalChain({ config, logger: quietLogger });
    const restartedHead = BigInt(await rpc<Hex>(chain.rpcUrl, "eth_blockNumber"));
    const afterRestart = residentMiB(chain.pid);
    const restartKeptDeployment = !chain.deployed && chain.treasuryAddress === under.treasury && restartedHead >= head;
    note(
      `chain memory: idle ${idle.toFixed(1)} MiB after ${options.idleSeconds} s; state file ${stateFileMiB.toFixed(1)} MiB; after restart ${afterRestart.toFixed(1)} MiB (deployment kept: ${restartKeptDeployment})`,
    );
    return {
      ...measured,
      blockTime,
      rssMiB: { ...measured.rssMiB, idle, peak: Math.max(measured.rssMiB.peak, idle), afterRestart },
      idleSeconds: options.idleSeconds,
      stateFileMiB,
      restartKeptDeployment,
    };
  } finally {
    await chain.stop();
    rmSync(dataDir, { recursive: true, force: true });
  }
}
