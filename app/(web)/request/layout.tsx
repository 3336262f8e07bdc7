import { headers } from "next/headers";
import type { ReactNode } from "react";
import { Providers } from "@/app/providers";
import { getPublicSettings } from "../_lib/settings";
import { wagmiCookieHeader } from "../_lib/wagmi-cookie";

export default async function RequestLayout({ children }: { children: ReactNode }) {
  // Only wagmi's cookies: a client component's props are written into the HTML (the admin session is HttpOnly).
  const cookie = wagmiCookieHeader((await headers()).get("cookie"));
  return (
    <Providers chainId={getPublicSettings().chainId} cookie={cookie}>
      {children}
    </Providers>
  );
}
