import { parseArgs } from "node:util";
import { BaseError, encodeDeployData, formatEther, parseEther } from "viem";
import { treasuryAbi, treasuryBytecode } from "@/contracts/generated/treasury";
import { createChainClients } from "@/lib/chain/clients";
import { ConfigError, getConfig } from "@/lib/config";
import { redactedUrl, withoutUrl } from "@/lib/redact-url";
import { addressOfKey, deployContracts } from "./deploy-lib";

/**
 * `npm run contracts:deploy [-- --fund <amount>]`: deploys the registry and the treasury to RPC_URL with
 * DEPLOYER_PRIVATE_KEY (who owns the treasury), authorises RELAYER_PRIVATE_KEYS' addresses, optionally funds the
 * treasury with <amount> native tokens (e.g. `--fund 0.5`), and prints the variables to configure.
 * Refuses with one line, before sending anything, when a setting is missing or wrong or the deployer cannot pay.
 */

class Refusal extends Error {}

function refuse(message: string): never {
  throw new Refusal(message);
}

function parseFund(argv: string[]): bigint {
  let values: { fund?: string; help?: boolean };
  try {
    ({ values } = parseArgs({ args: argv, options: { fund: { type: "string" }, help: { type: "boolean", short: "h" } }, strict: true }));
  } catch (error) {
    refuse(`${(error as Error).message} (usage: npm run contracts:deploy -- [--fund <native tokens>])`);
  }
  if (values.help) {
    console.log(
      "usage: npm run contracts:deploy -- [--fund <native tokens>]   (RPC_URL, DEPLOYER_PRIVATE_KEY, RELAYER_PRIVATE_KEYS, CHAIN_ID, SPONSOR_AMOUNT_WEI from the environment)",
    );
    process.exit(0);
  }
  if (values.fund === undefined) return 0n;
  if (!/^\d+(\.\d{1,18})?$/.test(values.fund)) refuse(`--fund must be an amount of native tokens such as 0.5, not "${values.fund}"`);
  return parseEther(values.fund);
}

function describe(error: unknown): string {
  if (error instanceof BaseError) return error.shortMessage;
  return error instanceof Error ? error.message : String(error);
}

async function main(): Promise<void> {
  const fundWei = parseFund(process.argv.slice(2));
  const config = getConfig();
  if (!config.rpcUrl) refuse("RPC_URL is not set: set it to the JSON-RPC endpoint of the network to deploy to");
  if (!config.deployerPrivateKey) refuse("DEPLOYER_PRIVATE_KEY is not set: set it to the key of the account that deploys and owns the contracts");
  if (config.relayerPrivateKeys.length === 0) refuse("RELAYER_PRIVATE_KEYS is not set: set the relayer keys whose addresses the treasury authorises");
  const deployerKey = config.deployerPrivateKey;
  const deployer = addressOfKey(deployerKey);
  const relayers = config.relayerPrivateKeys.map(addressOfKey);

  const batchSize = config.rpcBatchSize;
  const probe = createChainClients({ rpcUrl: config.rpcUrl, retryCount: 1, batchSize });
  let chainId: number;
  try {
    chainId = await probe.getChainId();
  } catch (error) {
    refuse(`RPC_URL ${redactedUrl(config.rpcUrl)} cannot be reached: ${describe(error)}`);
  }
  if (config.chainId !== undefined && config.chainId !== chainId) {
    refuse(`CHAIN_ID is ${config.chainId} but RPC_URL serves chain ${chainId}: refusing to deploy`);
  }
  const clients = createChainClients({ rpcUrl: config.rpcUrl, chainId, batchSize });

  const balance = await clients.getBalance({ address: deployer });
  if (balance === 0n) refuse(`deployer ${deployer} has no native token on chain ${chainId}: fund it first`);
  // What the deployment costs (estimated against the chain, with the real constructor arguments).
  const data = encodeDeployData({ abi: treasuryAbi, bytecode: treasuryBytecode, args: [config.sponsorAmountWei, relayers] });
  const [gas, gasPrice] = await Promise.all([clients.estimateGas({ account: deployer, data, value: fundWei }).catch(() => 2_000_000n), clients.getGasPrice()]);
  const needed = (gas * gasPrice * 12n) / 10n + fundWei;
  if (balance < needed) {
    refuse(
      `deployer ${deployer} has ${formatEther(balance)} on chain ${chainId} but needs about ${formatEther(needed)} (deployment gas${fundWei > 0n ? " + funding" : ""}): fund it first`,
    );
  }

  const result = await deployContracts({ rpcUrl: config.rpcUrl, deployerKey, relayers, sponsorAmountWei: config.sponsorAmountWei, fundWei, batchSize });
  const relayerBalances = await Promise.all(relayers.map((address) => clients.getBalance({ address })));

  console.log(`Deployed on chain ${result.chainId} in block ${result.blockNumber} (transaction ${result.transactionHash}, ${result.gasUsed} gas).`);
  console.log(
    `Owner ${result.deployer}; ${relayers.length} relayer(s) authorised; amount ${config.sponsorAmountWei} wei per sponsorship; treasury funded with ${formatEther(fundWei)} native tokens.`,
  );
  relayers.forEach((relayer, i) => {
    if (relayerBalances[i] === 0n) console.log(`Warning: relayer ${relayer} has no native token to pay for gas.`);
  });
  console.log("\nConfigure the service with:\n");
  console.log(`CHAIN_ID=${result.chainId}`);
  console.log(`REGISTRY_ADDRESS=${result.registryAddress}`);
  console.log(`TREASURY_ADDRESS=${result.treasuryAddress}`);
  if (fundWei === 0n) console.log(`\nThe treasury holds nothing yet: send native tokens to ${result.treasuryAddress} (or redeploy with --fund).`);
}

/**
 * `text` without the path or query of any RPC_URL endpoint (a provider's key sits there; lib/redact-url.ts): what
 * this prints goes to a terminal or a CI log, past lib/log.ts's redaction.
 */
function withoutRpcUrls(text: string): string {
  const urls = (process.env.RPC_URL ?? "").split(",").map((url) => url.trim());
  return urls.filter((url) => url !== "").reduce((out, url) => withoutUrl(out, url), text);
}

main().catch((error: unknown) => {
  if (error instanceof Refusal || error instanceof ConfigError) console.error(withoutRpcUrls(`contracts:deploy: ${error.message}`));
  else console.error(withoutRpcUrls(`contracts:deploy failed: ${describe(error)}`));
  process.exit(1);
});
