import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync } from "node:fs";
import { connect } from "node:net";
import path from "node:path";
import { createTestClient, http, parseEther, type Address } from "viem";
import { AnvilStateRejectedError, goodStateFile, restoreGoodState, startAnvil, type Anvil } from "@/contracts/anvil";
import {
  TREASURY_INIT_CODE_HASH,
  addressOfKey,
  authoriseRelayers,
  deployContracts,
  ensureSponsorAmount,
  fundTreasury,
  readCodeHash,
  treasuryAdmin,
} from "@/contracts/deploy-lib";
import { createChainClients, type ChainClients } from "@/lib/chain/clients";
import { readLocalDeployment, writeLocalDeployment, type LocalDeploymentRecord } from "@/lib/chain/deployment";
import { ConfigError, LOCAL_DEPLOYER_KEY, type Config } from "@/lib/config";
import type { Logger } from "@/lib/log";
import { commandLineOf, processAlive, processIdentity, processIds } from "@/lib/process-alive";
import { portHolders, portTakenMessage } from "@/lib/port-holder";

/**
 * The embedded chain of `npm start` when RPC_URL is unset: anvil under `<DATA_DIR>/anvil` (its state persisted,
 * so a restart keeps the chain), the contracts deployed, funded and the relayers authorised, the deployment
 * recorded in `<DATA_DIR>/deployment.json`. A restart reuses a recorded deployment whose code is still on the
 * chain, and redeploys when the chain was reset or the contracts changed.
 */

export type LocalChain = {
  rpcUrl: string;
  chainId: number;
  registryAddress: Address;
  treasuryAddress: Address;
  /** Block of the deployment transaction. */
  deployBlock: number;
  /** True when this start deployed the contracts, false when it reused the recorded deployment. */
  deployed: boolean;
  pid: number;
  /** Resolves when anvil has exited, stopped or killed. */
  exited: Promise<void>;
  /** Stops anvil (SIGTERM, so it writes its state) and removes the pid file; false when it had to be killed. */
  stop: () => Promise<boolean>;
};

export type EnsureLocalChainOptions = {
  config: Config;
  logger: Logger;
  /** Treasury's opening balance and the level it is topped up to on restart. Default 10,000 native tokens. */
  treasuryFundWei?: bigint;
};

export const LOCAL_CHAIN_ID = 31337;
const DEFAULT_TREASURY_FUND = parseEther("10000");
/** Relayers below this balance (custom RELAYER_PRIVATE_KEYS) are credited on the local chain. */
const RELAYER_MIN_BALANCE = parseEther("100");
const RELAYER_CREDIT = parseEther("10000");

export function anvilDir(dataDir: string): string {
  return path.join(dataDir, "anvil");
}

function pidFileOf(dataDir: string): string {
  return path.join(anvilDir(dataDir), "anvil.pid");
}

/** What a refusal of a taken LOCAL_CHAIN_PORT adds to "stop it, or set LOCAL_CHAIN_PORT to a free port". */
export const LOCAL_CHAIN_PORT_ALSO = ", or RPC_URL to use a running chain";

/**
 * The pid is the anvil of this data directory (its command line runs anvil with our cache path), not a process that
 * reused the number, nor another chain's anvil (another checkout's, or one the user runs). Where the command line
 * cannot be read (no /proc: not Linux) it is not signalled: a live anvil still holding the port then makes the port
 * check refuse the start, with the port named.
 */
export function isOurAnvil(pid: number, dataDir: string): boolean {
  const argv = commandLineOf(pid);
  return !!argv && path.basename(argv[0] ?? "") === "anvil" && argv.includes(path.join(path.resolve(anvilDir(dataDir)), "cache"));
}

async function waitUntil(condition: () => boolean, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) return false;
    await new Promise((r) => setTimeout(r, 50));
  }
  return true;
}

/**
 * A previous start killed without cleanup (SIGKILL) may have left its anvil running: stop it (found by its pid file,
 * SIGTERM first, so it writes its state), never by name. It is found by the pid recorded in DATA_DIR, else by its
 * command line (our cache path; then SIGKILL, below): with DATA_DIR/anvil removed and made again while it ran, its pid file was gone, the port check then took it
 * for ours and let it be, and every start failed on the port it held. Before each signal it must still be the same
 * process (its start time: the pid may be reused meanwhile).
 */
export async function stopStaleAnvil(dataDir: string, logger: Logger): Promise<void> {
  const pidFile = pidFileOf(dataDir);
  const recorded = existsSync(pidFile) ? Number(readFileSync(pidFile, "utf8").trim()) : 0;
  const ours = (pid: number) => Number.isInteger(pid) && pid > 0 && pid !== process.pid && processAlive(pid) && isOurAnvil(pid, dataDir);
  const pid = ours(recorded) ? recorded : (processIds() ?? []).find(ours);
  if (pid !== undefined) {
    const identity = processIdentity(pid);
    // Alive, not running: a zombie's state shows while a multi-threaded process's other threads still exit (and hold
    // the port), so only its end counts as gone.
    const same = () => processAlive(pid) && processIdentity(pid) === identity;
    const byPidFile = pid === recorded;
    logger.warn("stopping the anvil left running by a previous start", { pid, foundBy: byPidFile ? "pid file" : "command line" });
    // Found by its command line, its directory was removed (a reset of the chain, most likely): SIGKILL, so it writes
    // no dump into the directory made again, which would bring the old chain back.
    process.kill(pid, byPidFile ? "SIGTERM" : "SIGKILL");
    if (!(await waitUntil(() => !same(), 10_000))) {
      if (same()) process.kill(pid, "SIGKILL");
      await waitUntil(() => !same(), 5_000);
    }
  }
  rmSync(pidFile, { force: true });
}

/**
 * Whether something holds `port` on 127.0.0.1. A connection that times out counts as in use: a free loopback port
 * refuses at once, so one that does not answer has a listener that does not accept (stopped, or its queue full) or a
 * firewall dropping its packets, and anvil could not serve there either. Read as free, the start went on and failed
 * later with anvil's own bind error instead of this check's line naming LOCAL_CHAIN_PORT.
 */
async function portInUse(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host: "127.0.0.1", port });
    socket.once("connect", () => (socket.destroy(), resolve(true)));
    socket.once("error", () => resolve(false));
    socket.setTimeout(1_000, () => (socket.destroy(), resolve(true)));
  });
}

/**
 * Past states the service reads: nonces at the settled block, CONFIRMATIONS - 1 below the head (worker/chain.ts),
 * plus a margin for the head moving between reads. Every kept state is a full copy of the chain's state (it grows
 * with each sponsored wallet), so keep no more than that: 8 with the default CONFIRMATIONS=1.
 */
export function historyStatesFor(confirmations: number): number {
  return Math.max(8, confirmations + 4);
}

/** Whether two files hold the same bytes (sizes first: the state files are large). */
function sameFile(a: string, b: string): boolean {
  return statSync(a).size === statSync(b).size && readFileSync(a).equals(readFileSync(b));
}

async function launch(config: Config, logger: Logger): Promise<Anvil> {
  const dir = anvilDir(config.dataDir);
  const options = {
    port: config.localChainPort,
    blockTime: config.localBlockTime,
    dataDir: dir,
    persistState: true,
    chainId: LOCAL_CHAIN_ID,
    historyStates: historyStatesFor(config.confirmations),
    pidFile: pidFileOf(config.dataDir),
    // npm start stops the chain itself, after the web server and the worker.
    ownProcessGroup: true,
    logger,
  };
  try {
    return await startAnvil(options);
  } catch (error) {
    // A state file anvil refuses (written halfway by a crash) must not stop the service: start afresh. Any other
    // failure (the port taken since it was checked, a large dump not loaded within the start timeout) keeps the
    // state for the caller's next attempt: a fresh chain would lose the chain's history, and the relayer nonces
    // the database holds for it would belong to a chain that no longer exists.
    const state = path.join(dir, "state.json");
    if (!(error instanceof AnvilStateRejectedError) || !existsSync(state)) throw error;
    const aside = `${state}.rejected-${Date.now()}`;
    // The state it last started from, unless that is what it refused now (restored from it at this start).
    const good = goodStateFile(state);
    if (existsSync(good) && !sameFile(state, good) && restoreGoodState(state, aside)) {
      logger.warn("anvil refused its saved state; starting from the state it last started from", { movedTo: aside, error });
      pruneRefusedStates(dir, logger);
      try {
        return await startAnvil(options);
      } catch (again) {
        if (!(again instanceof AnvilStateRejectedError)) throw again;
        renameSync(state, `${aside}.good`);
      }
    }
    // Refused too, it would be restored again at every start.
    if (existsSync(good)) renameSync(good, `${aside}.good-refused`);
    if (existsSync(state)) renameSync(state, aside);
    logger.warn("anvil refused its saved state; starting a fresh chain", { movedTo: aside, error });
    pruneRefusedStates(dir, logger);
    return startAnvil(options);
  }
}

/** How many refused states (`state.json.rejected-<time>` with its `.good` and `.good-refused` copies) are kept. */
export const KEPT_REFUSED_STATES = 3;

/**
 * Removes all but the newest KEPT_REFUSED_STATES refused states: each is kept as evidence for the operator, and each
 * is as large as the chain's state, so a chain whose state is refused again and again (a disk that corrupts what it
 * is given) must not fill the disk with them.
 */
export function pruneRefusedStates(dir: string, logger: Logger): void {
  const sets = new Map<number, string[]>();
  for (const name of readdirSync(dir)) {
    const match = /^state\.json\.rejected-(\d+)(?:\.good|\.good-refused)?$/.exec(name);
    if (!match) continue;
    const time = Number(match[1]);
    sets.set(time, [...(sets.get(time) ?? []), name]);
  }
  const old = [...sets.keys()].sort((a, b) => b - a).slice(KEPT_REFUSED_STATES);
  for (const time of old) {
    for (const name of sets.get(time)!) rmSync(path.join(dir, name), { force: true });
    logger.info("removed an old refused state of the chain", { files: sets.get(time), kept: KEPT_REFUSED_STATES });
  }
}

/** Whether the recorded deployment is the one on this chain, built from today's contracts; else why not. */
async function reusable(clients: ChainClients, chainId: number, record: LocalDeploymentRecord | undefined): Promise<true | string> {
  if (!record) return "no deployment recorded";
  if (record.chainId !== chainId) return `recorded chain id ${record.chainId} differs from ${chainId}`;
  if (record.treasuryInitCodeHash !== TREASURY_INIT_CODE_HASH) return "the contracts changed since the recorded deployment";
  const [treasuryCode, registryCode] = await Promise.all([readCodeHash(clients, record.treasuryAddress), readCodeHash(clients, record.registryAddress)]);
  if (treasuryCode === undefined || registryCode === undefined) return "no code at the recorded addresses (the chain was reset)";
  if (treasuryCode !== record.treasuryCodeHash || registryCode !== record.registryCodeHash) return "other code at the recorded addresses";
  return true;
}

export async function ensureLocalChain(options: EnsureLocalChainOptions): Promise<LocalChain> {
  const { config } = options;
  const logger = options.logger.child({ component: "local-chain" });
  const fundWei = options.treasuryFundWei ?? DEFAULT_TREASURY_FUND;
  const dir = anvilDir(config.dataDir);
  // Before the directory is made again: a leftover anvil must not dump the old chain into it.
  await stopStaleAnvil(config.dataDir, logger);
  mkdirSync(dir, { recursive: true });

  if (await portInUse(config.localChainPort)) {
    throw new ConfigError(portTakenMessage("LOCAL_CHAIN_PORT", config.localChainPort, portHolders(config.localChainPort), { also: LOCAL_CHAIN_PORT_ALSO }));
  }

  const anvil = await launch(config, logger);
  const pidFile = pidFileOf(config.dataDir);
  let stopping = false;
  const exited = new Promise<void>((resolve) =>
    anvil.process.once("exit", (code, signal) => {
      if (!stopping) logger.error("anvil exited unexpectedly", { code, signal, log: path.join(dir, "anvil.log") });
      resolve();
    }),
  );
  const stop = async () => {
    stopping = true;
    const clean = await anvil.stop();
    rmSync(pidFile, { force: true });
    return clean;
  };

  try {
    const probe = createChainClients({ rpcUrl: anvil.rpcUrl });
    const chainId = await probe.getChainId();
    const clients = createChainClients({ rpcUrl: anvil.rpcUrl, chainId });
    const relayers = config.relayerPrivateKeys.map(addressOfKey);
    const deployerKey = LOCAL_DEPLOYER_KEY;

    // Relayers from custom keys start empty on a fresh chain: credit them (the chain is ours).
    const balances = await Promise.all(relayers.map((address) => clients.getBalance({ address })));
    const testClient = createTestClient({ mode: "anvil", transport: http(anvil.rpcUrl) });
    for (const [i, address] of relayers.entries()) {
      if (balances[i]! < RELAYER_MIN_BALANCE) {
        await testClient.setBalance({ address, value: RELAYER_CREDIT });
        logger.info("credited a relayer on the local chain", { relayer: address });
      }
    }

    const record = readLocalDeployment(config.dataDir);
    const verdict = await reusable(clients, chainId, record);
    let result: LocalDeploymentRecord;
    let deployed: boolean;
    if (verdict === true && record) {
      const admin = treasuryAdmin(clients, deployerKey, record.treasuryAddress);
      const added = await authoriseRelayers(admin, relayers);
      const amountChanged = await ensureSponsorAmount(admin, config.sponsorAmountWei);
      const balance = await clients.getBalance({ address: record.treasuryAddress });
      if (balance < fundWei / 10n) await fundTreasury(clients, deployerKey, record.treasuryAddress, fundWei - balance);
      result = { ...record, rpcUrl: anvil.rpcUrl };
      deployed = false;
      logger.info("reusing the recorded local deployment", {
        treasury: record.treasuryAddress,
        registry: record.registryAddress,
        relayersAdded: added.length,
        amountChanged,
      });
    } else {
      logger.info("deploying the contracts on the local chain", { reason: verdict });
      const d = await deployContracts({ rpcUrl: anvil.rpcUrl, deployerKey, relayers, sponsorAmountWei: config.sponsorAmountWei, fundWei });
      const [treasuryCodeHash, registryCodeHash] = await Promise.all([readCodeHash(clients, d.treasuryAddress), readCodeHash(clients, d.registryAddress)]);
      result = {
        chainId: d.chainId,
        rpcUrl: anvil.rpcUrl,
        registryAddress: d.registryAddress,
        treasuryAddress: d.treasuryAddress,
        deployer: d.deployer,
        blockNumber: Number(d.blockNumber),
        transactionHash: d.transactionHash,
        registryCodeHash: registryCodeHash!,
        treasuryCodeHash: treasuryCodeHash!,
        treasuryInitCodeHash: TREASURY_INIT_CODE_HASH,
        deployedAt: new Date().toISOString(),
      };
      deployed = true;
      logger.info("contracts deployed on the local chain", {
        treasury: d.treasuryAddress,
        registry: d.registryAddress,
        block: Number(d.blockNumber),
        gasUsed: d.gasUsed,
      });
    }
    writeLocalDeployment(config.dataDir, result);

    return {
      rpcUrl: anvil.rpcUrl,
      chainId,
      registryAddress: result.registryAddress,
      treasuryAddress: result.treasuryAddress,
      deployBlock: result.blockNumber,
      deployed,
      pid: anvil.pid,
      exited,
      stop,
    };
  } catch (error) {
    await stop();
    throw error;
  }
}
