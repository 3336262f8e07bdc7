import type { Metadata } from "next";
import { getPublicSettings } from "../_lib/settings";
import { RequestFlow } from "./_components/request-flow";

export const metadata: Metadata = {
  title: "Request gas sponsorship",
  description: "Get the first gas tokens for a new wallet on the test network.",
};

export default async function RequestPage({ searchParams }: { searchParams: Promise<Record<string, string | string[] | undefined>> }) {
  const { id } = await searchParams;
  const { explorerUrl, walletRpcUrl } = await getPublicSettings();
  return (
    <main id="main" className="mx-auto w-full max-w-2xl px-4 py-8 sm:py-12">
      <h1 className="text-2xl font-semibold tracking-tight text-slate-900 sm:text-3xl">Get gas for a new wallet</h1>
      <p className="mt-2 text-slate-700">
        Paste a wallet address (or connect your browser wallet) and we send it its first gas tokens on the test network. Each wallet can be sponsored once.
      </p>
      <RequestFlow explorerUrl={explorerUrl} walletRpcUrl={walletRpcUrl} initialRequestId={typeof id === "string" && id !== "" ? id : null} />
    </main>
  );
}
