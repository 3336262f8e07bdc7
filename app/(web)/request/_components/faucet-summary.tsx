"use client";

import { useQuery } from "@tanstack/react-query";
import { card } from "../../_components/styles";
import { getFaucetStatus, type FaucetStatusView } from "../_lib/api";
import { describeFaucet, formatAmount, formatUsualTime } from "../_lib/faucet-words";

/** GET /faucet is a snapshot at most a few seconds old: every 15 s is fresh enough while it serves. */
const FAUCET_POLL_MS = 15_000;

/** The one react-query key of GET /faucet: a refusal that shows the status changed asks again through it. */
export const FAUCET_QUERY_KEY = ["faucet"] as const;

/**
 * The faucet's status (GET /faucet) on react-query, read when the page opens and polled after: every 15 s while it
 * serves or cannot be read, and exactly when it says to look again (`retryAfterSeconds`, where the form's countdown
 * ends) while it does not serve, and again whenever the tab comes back into view. Every component that asks shares
 * the one query. `status` is null until the first answer; `answer` changes with each answer (a countdown keyed on it
 * restarts); `unavailable` is true while the latest read failed (`status` is then the last answer that came, if any,
 * and no longer to be trusted).
 */
export function useFaucetStatus(): { status: FaucetStatusView | null; answer: number; unavailable: boolean } {
  const query = useQuery({
    queryKey: FAUCET_QUERY_KEY,
    queryFn: async (): Promise<FaucetStatusView> => {
      const result = await getFaucetStatus();
      if (!result.ok) throw new Error(result.problem.code);
      return result.data;
    },
    retry: false,
    refetchInterval: (q) => {
      if (q.state.status === "error") return FAUCET_POLL_MS;
      const data = q.state.data;
      // low_funds serves and has a retry time too (decisions.md): polled like operating.
      const retryAfter = data && !describeFaucet(data).serving ? data.retryAfterSeconds : null;
      return typeof retryAfter === "number" ? retryAfter * 1000 : FAUCET_POLL_MS;
    },
    // A hidden tab's timed read is skipped (react-query), so a closed faucet's next look could come a whole
    // `retryAfterSeconds` late (a day budget: a day) while the countdown says "try again now": coming back asks again.
    refetchOnWindowFocus: true,
  });
  return { status: query.data ?? null, answer: query.dataUpdatedAt, unavailable: query.isError };
}

/**
 * What the faucet gives, on which network, whether it is serving, and how long it usually takes. While GET /faucet
 * fails the state says so ("Status unavailable") instead of an old answer or a wait that never ends.
 */
export function FaucetSummary({ status, unavailable }: { status: FaucetStatusView | null; unavailable: boolean }) {
  const words = status ? describeFaucet(status) : null;
  const usual = status ? formatUsualTime(status.medianSecondsToComplete) : null;
  const unknown = unavailable ? "unavailable" : "…";
  return (
    <section aria-labelledby="faucet-title" className={`${card} text-sm`}>
      <h2 id="faucet-title" className="sr-only">
        The faucet
      </h2>
      <dl className="grid grid-cols-1 gap-x-4 gap-y-1 sm:grid-cols-[max-content_1fr]">
        <dt className="font-medium text-slate-900">Network</dt>
        <dd className="min-h-5 text-slate-800" data-testid="faucet-network">
          {status ? `${status.networkName} (chain id ${status.chainId})` : unknown}
        </dd>
        <dt className="font-medium text-slate-900">Each wallet receives</dt>
        <dd className="min-h-5 text-slate-800" data-testid="faucet-amount">
          {status ? formatAmount(status.amountWei, status.nativeSymbol) : unknown}
        </dd>
        <dt className="font-medium text-slate-900">Faucet</dt>
        <dd className="min-h-5 text-slate-800" data-testid="faucet-state" aria-live="polite">
          {unavailable ? "Status unavailable" : words ? <strong>{words.label}</strong> : "…"}
        </dd>
        <dt className="font-medium text-slate-900">Usually takes</dt>
        <dd className="min-h-5 text-slate-800">{status ? (usual ?? "no request completed in the last hour") : unknown}</dd>
      </dl>
    </section>
  );
}
