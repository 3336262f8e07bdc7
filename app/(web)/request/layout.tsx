import { headers } from "next/headers";
import type { ReactNode } from "react";
import { Providers } from "@/app/providers";
import { LOCAL_CHAIN_ID } from "@/lib/config";
import { link } from "../_components/styles";
import { getPublicSettings } from "../_lib/settings";
import { wagmiCookieHeader } from "../_lib/wagmi-cookie";

export default async function RequestLayout({ children }: { children: ReactNode }) {
  // Only wagmi's cookies: a client component's props are written into the HTML (the admin session is HttpOnly).
  const cookie = wagmiCookieHeader((await headers()).get("cookie"));
  return (
    // With no chain known the page offers no "Add network" (its walletRpcUrl is null): the id is only a placeholder.
    <Providers chainId={(await getPublicSettings()).chainId ?? LOCAL_CHAIN_ID} cookie={cookie}>
      {children}
      <footer className="mx-auto w-full max-w-2xl px-4 pb-8 text-sm text-slate-700">
        For programs: the {/* /docs is a route handler (an HTML document), not a page: a full navigation, not <Link>. */}
        {/* eslint-disable-next-line @next/next/no-html-link-for-pages */}
        <a className={link} href="/docs">
          API reference
        </a>{" "}
        (OpenAPI document at{" "}
        <a className={link} href="/openapi.json">
          /openapi.json
        </a>
        ).
      </footer>
    </Providers>
  );
}
