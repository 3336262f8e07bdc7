import { defineChain } from "viem";
import { cookieStorage, createConfig, createStorage, custom, injected, type Config } from "wagmi";
import { WAGMI_STORAGE_KEY } from "./wagmi-cookie";

/**
 * wagmi for the /request page: one injected connector (the browser's wallet), cookie storage so the server
 * render already knows a connected wallet (no flash, no hydration mismatch), `ssr: true`.
 *
 * The page only asks the wallet for its address. It never reads the chain through wagmi, so no RPC address is
 * shipped to browsers (RPC_URL may carry a provider key): the transport refuses every call.
 */

export function createWagmiConfig(chainId: number): Config {
  const chain = defineChain({
    id: chainId,
    name: chainId === 31337 ? "Local chain" : `Chain ${chainId}`,
    nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 },
    rpcUrls: { default: { http: [] } },
  });
  return createConfig({
    chains: [chain],
    connectors: [injected()],
    ssr: true,
    storage: createStorage({ storage: cookieStorage, key: WAGMI_STORAGE_KEY }),
    transports: {
      [chain.id]: custom({
        async request() {
          throw new Error("this page does not read the chain");
        },
      }),
    },
  });
}
