"use client";

import { useChains, useConnection, useSwitchChain } from "wagmi";
import { secondaryButton } from "../../_components/styles";
import { useFaucetStatus } from "./faucet-summary";

function explain(error: Error | null): string | null {
  if (!error) return null;
  if (error.name === "UserRejectedRequestError" || /rejected/i.test(error.message)) return "The wallet did not add the network.";
  return "The wallet could not add the network. You can add it by hand with the details above.";
}

/**
 * "Add <network> to your wallet", for a connected browser wallet: wagmi's switchChain asks the wallet to switch
 * (wallet_switchEthereumChain) and, when it does not know the chain (error 4902), to add it
 * (wallet_addEthereumChain) with the name and symbol of GET /faucet, the wallet RPC URL of the server's settings
 * (PUBLIC_RPC_URL, or the local chain's) and the explorer. Without such a URL nothing is offered.
 */
export function AddNetwork({ rpcUrl }: { rpcUrl: string | null }) {
  const connection = useConnection();
  const [chain] = useChains();
  const switchChain = useSwitchChain();
  const { status: faucet } = useFaucetStatus();
  // The chain wagmi was given must be the one the faucet serves (GET /faucet asks the RPC): never offer another.
  if (connection.status !== "connected" || !rpcUrl || !faucet || !chain || faucet.chainId !== chain.id) return null;
  const name = faucet.networkName;
  const onChain = connection.chainId === chain.id;
  const message = switchChain.isPending ? "Confirm in your wallet…" : onChain ? `Your wallet is on ${name}.` : explain(switchChain.error);
  return (
    <div className="mt-4 flex flex-col gap-1">
      {!onChain && (
        <div>
          <button
            type="button"
            className={secondaryButton}
            disabled={switchChain.isPending}
            onClick={() =>
              switchChain.mutate({
                chainId: chain.id,
                addEthereumChainParameter: {
                  chainName: name,
                  nativeCurrency: { name: faucet.nativeSymbol, symbol: faucet.nativeSymbol, decimals: 18 },
                  rpcUrls: [rpcUrl],
                  blockExplorerUrls: faucet.explorerUrl ? [faucet.explorerUrl] : undefined,
                },
              })
            }
          >
            Add {name} to your wallet
          </button>
        </div>
      )}
      <p role="status" className="min-h-5 text-sm text-slate-700">
        {message}
      </p>
    </div>
  );
}
