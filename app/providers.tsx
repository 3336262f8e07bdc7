"use client";

import { QueryClient, QueryClientProvider } from "@tanstack/react-query";
import { useState, type ReactNode } from "react";
import { cookieToInitialState, WagmiProvider } from "wagmi";
import { createWagmiConfig } from "./(web)/_lib/wagmi";

/**
 * wagmi + react-query for pages that talk to a browser wallet. The server passes the request's Cookie header:
 * the initial state comes from the same cookie storage wagmi writes, so the server-rendered HTML and the first
 * client render agree.
 */
export function Providers({ children, chainId, cookie }: { children: ReactNode; chainId: number; cookie: string | null }) {
  const [config] = useState(() => createWagmiConfig(chainId));
  const [queryClient] = useState(() => new QueryClient());
  const initialState = cookieToInitialState(config, cookie);
  return (
    <WagmiProvider config={config} initialState={initialState}>
      <QueryClientProvider client={queryClient}>{children}</QueryClientProvider>
    </WagmiProvider>
  );
}
