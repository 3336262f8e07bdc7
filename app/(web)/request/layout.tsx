import { headers } from "next/headers";
import type { ReactNode } from "react";
import { Providers } from "@/app/providers";
import { getPublicSettings } from "../_lib/settings";

export default async function RequestLayout({ children }: { children: ReactNode }) {
  const cookie = (await headers()).get("cookie");
  return (
    <Providers chainId={getPublicSettings().chainId} cookie={cookie}>
      {children}
    </Providers>
  );
}
