"use client";

import { useEffect, useState } from "react";
import { card } from "../../_components/styles";
import { getFaucetStatus, type FaucetStatusView } from "../_lib/api";
import { describeFaucet, formatAmount, formatUsualTime } from "../_lib/faucet-words";

/** GET /faucet is a snapshot at most a few seconds old: every 15 s is fresh enough while it serves. */
const FAUCET_POLL_MS = 15_000;

/** The faucet's status, read when the page opens and polled after (null until the first answer); `answer` counts the answers. */
export function useFaucetStatus(): { status: FaucetStatusView | null; answer: number } {
  const [state, setState] = useState<{ status: FaucetStatusView | null; answer: number }>({ status: null, answer: 0 });
  useEffect(() => {
    let cancelled = false;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const tick = async () => {
      const result = await getFaucetStatus();
      if (cancelled) return;
      let wait = FAUCET_POLL_MS;
      if (result.ok) {
        const status = result.data;
        setState((s) => ({ status, answer: s.answer + 1 }));
        // Not serving: look again exactly when the faucet says to (the countdown the form shows ends then).
        if (result.data.retryAfterSeconds !== null) wait = result.data.retryAfterSeconds * 1000;
      }
      timer = setTimeout(tick, wait);
    };
    void tick();
    return () => {
      cancelled = true;
      if (timer) clearTimeout(timer);
    };
  }, []);
  return state;
}

/** What the faucet gives, on which network, whether it is serving, and how long it usually takes. */
export function FaucetSummary({ status }: { status: FaucetStatusView | null }) {
  const words = status ? describeFaucet(status) : null;
  const usual = status ? formatUsualTime(status.medianSecondsToComplete) : null;
  return (
    <section aria-labelledby="faucet-title" className={`${card} text-sm`}>
      <h2 id="faucet-title" className="sr-only">
        The faucet
      </h2>
      <dl className="grid grid-cols-1 gap-x-4 gap-y-1 sm:grid-cols-[max-content_1fr]">
        <dt className="font-medium text-slate-900">Network</dt>
        <dd className="min-h-5 text-slate-800" data-testid="faucet-network">
          {status ? `${status.networkName} (chain id ${status.chainId})` : "…"}
        </dd>
        <dt className="font-medium text-slate-900">Each wallet receives</dt>
        <dd className="min-h-5 text-slate-800" data-testid="faucet-amount">
          {status ? formatAmount(status.amountWei, status.nativeSymbol) : "…"}
        </dd>
        <dt className="font-medium text-slate-900">Faucet</dt>
        <dd className="min-h-5 text-slate-800" data-testid="faucet-state" aria-live="polite">
          {words ? <strong>{words.label}</strong> : "…"}
        </dd>
        <dt className="font-medium text-slate-900">Usually takes</dt>
        <dd className="min-h-5 text-slate-800">{status ? (usual ?? "no request completed in the last hour") : "…"}</dd>
      </dl>
    </section>
  );
}
