import { createECDH, randomBytes, randomUUID } from "node:crypto";
import { parseArgs } from "node:util";
import { secp256k1 } from "@noble/curves/secp256k1";
import { encodeFunctionData, keccak256, serializeTransaction, type Address, type TransactionSerializableEIP1559 } from "viem";
import { generatePrivateKey, privateKeyToAccount, sign } from "viem/accounts";
import { treasuryAbi } from "@/contracts/generated/treasury";
import { createChainClients } from "@/lib/chain/clients";
import { requestIdHash } from "@/lib/chain/ids";
import { createNodeFetch } from "@/lib/chain/node-fetch";
import { startTestChain } from "@/test/chain";
import { encodeSponsorCall, SPONSOR_GAS_LIMIT, signSponsorTransaction } from "@/worker/stages/transactions";
import { median } from "./util";

/**
 * `npx tsx bench/worker-sign.ts [--rounds 7] [--n 2000] [--calls 400] [--no-rpc] [--windows]`: microseconds of CPU
 * (user + system, process.cpuUsage) of what the worker does per relay attempt and per JSON-RPC call, each piece
 * timed alone in interleaved rounds (median of rounds; the machine is shared, so only ratios within one run mean
 * anything). docs/performance.md, "Session 6: cuts (issue 15)".
 *
 * Signing (worker/stages/transactions.ts): the attempt as signed before session 6 (calldata through
 * encodeFunctionData on every attempt) and now (encodeSponsorCall: the selector computed once), and its pieces:
 * calldata, request id hash, serialising, hashing, secp256k1 (noble, through viem's `sign`).
 * `--windows` also times noble's base-point multiplication and signing with other precomputation windows (noble
 * precomputes the base point with a window of 8 when the module loads), and the same multiplication in OpenSSL
 * (node:crypto's ECDH public key).
 *
 * JSON-RPC (the worker's transport: viem's `http` transport over lib/chain/node-fetch.ts, as worker/chain.ts builds
 * it), against a private anvil on a port from TEST_PORT_BASE: one call alone through the batching client (viem
 * schedules a batch with `setTimeout(0)` even for one call), the same without batching, eight calls issued together
 * (per call), and the same request posted through node-fetch directly (the floor under viem).
 */

const { values: args } = parseArgs({
  options: {
    rounds: { type: "string", default: "7" },
    n: { type: "string", default: "2000" },
    calls: { type: "string", default: "400" },
    "no-rpc": { type: "boolean", default: false },
    windows: { type: "boolean", default: false },
  },
});
const ROUNDS = Number(args.rounds);
const N = Number(args.n);
const CALLS = Number(args.calls);

const show = (name: string, xs: number[]) =>
  process.stdout.write(`  ${name.padEnd(58)} ${median(xs).toFixed(1).padStart(7)} µs  (rounds ${xs.map((x) => x.toFixed(0)).join(", ")})\n`);

async function cpuPer(n: number, fn: (i: number) => unknown): Promise<number> {
  const t0 = process.cpuUsage();
  for (let i = 0; i < n; i++) await fn(i);
  const used = process.cpuUsage(t0);
  return (used.user + used.system) / n;
}

/** Times each variant once per round, in the same order every round; returns the samples by name. */
async function interleave(variants: Record<string, (i: number) => unknown>, n: number): Promise<Record<string, number[]>> {
  const samples: Record<string, number[]> = {};
  for (const fn of Object.values(variants)) await cpuPer(Math.min(n, 200), fn); // warm-up (JIT)
  for (let r = 0; r < ROUNDS; r++) for (const [name, fn] of Object.entries(variants)) (samples[name] ??= []).push(await cpuPer(n, fn));
  return samples;
}

// ---- Signing, per relay attempt ----
const key = generatePrivateKey();
const account = privateKeyToAccount(key);
const treasury = "0x5FbDB2315678afecb367f032d93F642f64180aa3" as Address;
const fees = { maxFeePerGas: 3_000_000_000n, maxPriorityFeePerGas: 1_000_000_000n };
const wallets = Array.from({ length: N }, () => `0x${randomBytes(20).toString("hex")}` as Address);
const ids = Array.from({ length: N }, () => randomUUID());
const calldata = (i: number) => encodeFunctionData({ abi: treasuryAbi, functionName: "sponsor", args: [wallets[i]!, requestIdHash(ids[i]!)] });
const txs: TransactionSerializableEIP1559[] = ids.map((_, i) => ({
  type: "eip1559",
  chainId: 31337,
  nonce: i,
  to: treasury,
  value: 0n,
  gas: SPONSOR_GAS_LIMIT,
  ...fees,
  data: calldata(i),
}));
const hashes = txs.map((tx) => keccak256(serializeTransaction(tx)));

/** The attempt as signed before session 6: encodeFunctionData per attempt, then viem's signTransaction and keccak256. */
async function signBefore(i: number) {
  const raw = await account.signTransaction({ ...txs[i]!, data: calldata(i) });
  return { raw, hash: keccak256(raw) };
}
const signNow = (i: number) => signSponsorTransaction(account, { chainId: 31337, treasury, nonce: i, fees, wallet: wallets[i]!, requestId: ids[i]! });

process.stdout.write(`per relay attempt (signing), ${N} per round, ${ROUNDS} rounds:\n`);
const signing = await interleave(
  {
    "attempt signed as before (encodeFunctionData each time)": signBefore,
    "attempt signed now (encodeSponsorCall)": signNow,
    "  calldata: encodeFunctionData (with request id hash)": calldata,
    "  calldata: encodeSponsorCall (with request id hash)": (i) => encodeSponsorCall(wallets[i]!, ids[i]!),
    "  request id hash (keccak256 of 16 bytes)": (i) => requestIdHash(ids[i]!),
    "  serializeTransaction (unsigned; viem does it twice)": (i) => serializeTransaction(txs[i]!),
    "  keccak256 of the serialised transaction": (i) => keccak256(serializeTransaction(txs[i]!)),
    "  secp256k1 signature (viem sign -> noble)": (i) => sign({ hash: hashes[i]!, privateKey: key }),
  },
  N,
);
for (const [name, xs] of Object.entries(signing)) show(name, xs);

if (args.windows) {
  const scalars = hashes.map((h) => BigInt(h) % secp256k1.CURVE.n);
  const windows: Record<string, number[]> = {};
  for (let r = 0; r < Math.min(ROUNDS, 3); r++) {
    for (const w of [8, 10, 12]) {
      secp256k1.utils.precompute(w); // rebuilds the table (not timed)
      (windows[`noble G x k, window ${w}`] ??= []).push(await cpuPer(N, (i) => secp256k1.ProjectivePoint.BASE.multiply(scalars[i]!)));
      (windows[`noble sign, window ${w}`] ??= []).push(await cpuPer(N, (i) => secp256k1.sign(hashes[i]!.slice(2), key.slice(2), { lowS: true })));
    }
  }
  secp256k1.utils.precompute(8);
  const ecdh = createECDH("secp256k1");
  const scalarBytes = scalars.map((k) => Buffer.from(k.toString(16).padStart(64, "0"), "hex"));
  windows["OpenSSL G x k (node:crypto ECDH public key)"] = [];
  for (let r = 0; r < Math.min(ROUNDS, 3); r++) {
    windows["OpenSSL G x k (node:crypto ECDH public key)"].push(
      await cpuPer(N, (i) => {
        ecdh.setPrivateKey(scalarBytes[i]!);
        return ecdh.getPublicKey();
      }),
    );
  }
  process.stdout.write("noble's base-point precomputation window:\n");
  for (const [name, xs] of Object.entries(windows)) show(name, xs);
}

// ---- JSON-RPC, per call ----
if (!args["no-rpc"]) {
  const chain = await startTestChain();
  try {
    const fetchFn = createNodeFetch();
    const options = { rpcUrl: chain.rpcUrl, chainId: 31337, timeoutMs: 5_000, retryCount: 0, fetchFn, maxResponseBodySize: false as const };
    const batching = createChainClients(options).publicClient;
    const unbatched = createChainClients({ ...options, batch: false }).publicClient;
    const body = JSON.stringify({ jsonrpc: "2.0", id: 1, method: "eth_blockNumber" });
    process.stdout.write(`per JSON-RPC call (eth_blockNumber against anvil), ${CALLS} per round, ${ROUNDS} rounds:\n`);
    const rpc = await interleave(
      {
        "one call, batching client (the worker's until session 6)": () => batching.request({ method: "eth_blockNumber" }),
        "one call, client without batching": () => unbatched.request({ method: "eth_blockNumber" }),
        "8 calls together, batching client (per call)": async () => {
          await Promise.all(Array.from({ length: 8 }, () => batching.request({ method: "eth_blockNumber" })));
        },
        "one call posted through node-fetch directly (no viem)": async () =>
          JSON.parse(await (await fetchFn(chain.rpcUrl, { method: "POST", body, headers: { "content-type": "application/json" } })).text()),
      },
      CALLS,
    );
    rpc["8 calls together, batching client (per call)"] = rpc["8 calls together, batching client (per call)"]!.map((x) => x / 8);
    for (const [name, xs] of Object.entries(rpc)) show(name, xs);
  } finally {
    await chain.stop();
  }
}
