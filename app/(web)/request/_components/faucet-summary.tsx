"use client";

import { useQuery } from "@tanstack/react-query";
import { card } from "../../_components/styles";
import { getFaucetStatus, type FaucetStatusView } from "../_lib/api";
import { describeFaucet, formatAmount, formatUsualTime } from "../_lib/faucet-words";

/** GET /faucet is a snapshot at most a few seconds old: every 15 s is fresh enough while it serves. */
const FAUCET_POLL_MS = 15_000;

/**
 * The faucet's status (GET /faucet) on react-query, read when the page opens and polled after: every 15 s while it
 * serves, and exactly when it says to look again (`retryAfterSeconds`, where the form's countdown ends) while it
 * does not. Every component that asks shares the one query. `status` is null until the first answer; `answer`
 * changes with each answer (a countdown keyed on it restarts).
 */
export function useFaucetStatus(): { status: FaucetStatusView | null; answer: number } {
  const query = useQuery({
    queryKey: ["faucet"],
    queryFn: async (): Promise<FaucetStatusView> => {
      const result = await getFaucetStatus();
      if (!result.ok) throw new Error(result.problem.code);
      return result.data;
    },
    retry: false,
    refetchInterval: (q) => {
      const retryAfter = q.state.data?.retryAfterSeconds;
      return typeof retryAfter === "number" ? retryAfter * 1000 : FAUCET_POLL_MS;
    },
    refetchOnWindowFocus: false,
  });
  return { status: query.data ?? null, answer: query.dataUpdatedAt };
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
