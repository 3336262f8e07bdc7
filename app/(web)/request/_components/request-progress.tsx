"use client";

import { useEffect, useRef } from "react";
import { card, focusRing } from "../../_components/styles";
import { STATUS_LABELS } from "../../_lib/status-labels";
import type { SponsorshipRequestView } from "../_lib/api";
import { describeOutcome } from "../_lib/problems";
import { isTerminal, useSponsorshipRequest } from "../_lib/use-sponsorship-request";
import { AddNetwork } from "./add-network";
import { RequestTimeline } from "./request-timeline";
import { TransactionHash } from "./transaction-hash";

const STATUS_SENTENCES: Record<string, string> = {
  pending: "We received the request and are checking the wallet.",
  approved: "The wallet is eligible. The transaction is being prepared.",
  relayed: "The transaction was sent and is waiting to be mined.",
  completed: "Done: the tokens are in the wallet.",
};

/** The hash to show: the confirmed one, else the newest the node accepted (submitted), else the newest stored. */
function transactionHash(request: SponsorshipRequestView | null): string | null {
  const relays = request?.relayTransactions ?? [];
  const confirmed = relays.find((r) => r.status === "confirmed" && r.transactionHash);
  if (confirmed) return confirmed.transactionHash;
  const newestFirst = [...relays].reverse();
  return (newestFirst.find((r) => r.status === "submitted" && r.transactionHash) ?? newestFirst.find((r) => r.transactionHash))?.transactionHash ?? null;
}

/** One request followed to its end: status in words (a live region), the timeline, wallet, id and transaction. */
export function RequestProgress({
  id,
  explorerUrl,
  walletRpcUrl,
  onWallet,
  focusSerial = 0,
}: {
  id: string;
  explorerUrl: string | null;
  walletRpcUrl: string | null;
  onWallet: (wallet: string) => void;
  /**
   * Each new value above 0 moves the focus to the heading: a request was just sent (its button was disabled
   * meanwhile, and a disabled button loses the focus to the page) or a refusal's link followed. 0 on a page opened
   * with ?id=.
   */
  focusSerial?: number;
}) {
  const { request, problem, connectionLost } = useSponsorshipRequest(id);
  const headingRef = useRef<HTMLHeadingElement>(null);
  useEffect(() => {
    if (focusSerial > 0) headingRef.current?.focus();
  }, [focusSerial]);

  // The form shows the followed request's wallet (a reload with ?id= starts with an empty field).
  const onWalletRef = useRef(onWallet);
  useEffect(() => {
    onWalletRef.current = onWallet;
  });
  const wallet = request?.walletAddress;
  useEffect(() => {
    if (wallet) onWalletRef.current(wallet);
  }, [wallet]);

  if (problem) {
    return (
      <section role="alert" aria-labelledby="progress-problem" className="rounded-lg border border-red-300 bg-red-50 p-4 sm:p-6">
        <h2 id="progress-problem" className="text-lg font-semibold text-red-900">
          {problem.title}
        </h2>
        <p className="mt-1 text-red-950">{problem.message}</p>
      </section>
    );
  }

  const status = request?.status ?? null;
  const terminal = isTerminal(request);
  const outcome = request ? describeOutcome(request) : null;

  return (
    <section aria-labelledby="progress-title" className={card}>
      <div className="flex flex-wrap items-baseline justify-between gap-2">
        <h2 id="progress-title" ref={headingRef} tabIndex={-1} className={`text-lg font-semibold text-slate-900 ${focusRing}`}>
          Your request
        </h2>
        <p className="text-sm text-slate-700" aria-live="polite">
          {status === null ? "Loading…" : terminal ? "Finished" : "Updates every 3 seconds"}
        </p>
      </div>

      <p className="mt-3 text-slate-900" aria-live="polite" data-testid="request-status">
        Status: <strong>{status ? STATUS_LABELS[status] : "…"}</strong>
      </p>
      <p className={`mt-1 min-h-12 ${status === "rejected" || status === "failed" ? "font-medium text-red-800" : "text-slate-700"}`}>
        {outcome ?? (status ? STATUS_SENTENCES[status] : "\u00a0")}
      </p>

      <div className="mt-4">
        <RequestTimeline request={request} />
      </div>

      <dl className="mt-2 grid grid-cols-1 gap-x-4 gap-y-1 text-sm sm:grid-cols-[max-content_1fr]">
        <dt className="font-medium text-slate-900">Wallet</dt>
        <dd className="min-h-5 font-mono break-all text-slate-800">{request?.walletAddress ?? "\u00a0"}</dd>
        <dt className="font-medium text-slate-900">Request ID</dt>
        <dd className="font-mono break-all text-slate-800">{id}</dd>
        <dt className="font-medium text-slate-900">Transaction</dt>
        <TransactionHash hash={transactionHash(request)} explorerUrl={explorerUrl} terminal={terminal} />
      </dl>

      <p className="mt-3 min-h-5 text-sm text-amber-900" aria-live="polite">
        {connectionLost ? "Connection to the service lost; still trying…" : "\u00a0"}
      </p>

      {status === "completed" && <AddNetwork rpcUrl={walletRpcUrl} />}
    </section>
  );
}
