import { useQuery } from "@tanstack/react-query";
import { getSponsorshipRequest, TERMINAL_STATUSES, type SponsorshipRequestView } from "./api";
import { describeProblem, type Refusal } from "./problems";

/** Interface-spec 3.1, rule 4: poll every 3 to 5 seconds, stop at a terminal status. */
export const POLL_INTERVAL_MS = 3000;

/** An answer no later poll can change (400: the id is malformed, 404: no such request): polling stops. */
class FinalRefusal extends Error {
  constructor(readonly refusal: Refusal) {
    super(refusal.title);
  }
}

/** Any other failure (the network, a 5xx): the last answer stays shown and polling goes on. */
class PassingFailure extends Error {}

export type ProgressState = {
  request: SponsorshipRequestView | null;
  problem: Refusal | null;
  connectionLost: boolean;
};

/** Whether a request has reached a status it never leaves (completed, rejected, failed). */
export function isTerminal(request: Pick<SponsorshipRequestView, "status"> | null | undefined): boolean {
  return request !== null && request !== undefined && TERMINAL_STATUSES.includes(request.status);
}

/**
 * GET /sponsorship/:id on react-query: fetched when shown, then every POLL_INTERVAL_MS until a terminal status or a
 * final refusal. A failed poll is not retried apart (`retry: false`): the next poll is the retry, so a lost
 * connection is retried every 3 s for as long as the page is open, and react-query keeps the last good answer.
 */
export function useSponsorshipRequest(id: string): ProgressState {
  const query = useQuery({
    queryKey: ["sponsorship-request", id],
    queryFn: async (): Promise<SponsorshipRequestView> => {
      const result = await getSponsorshipRequest(id);
      if (result.ok) return result.data;
      if (result.problem.status === 400 || result.problem.status === 404) throw new FinalRefusal(describeProblem(result.problem));
      throw new PassingFailure(result.problem.code);
    },
    retry: false,
    refetchInterval: (q) => (q.state.error instanceof FinalRefusal || isTerminal(q.state.data) ? false : POLL_INTERVAL_MS),
    // The interval is the only schedule: no extra fetch on focus or reconnect, none after a terminal status.
    refetchOnWindowFocus: false,
    refetchOnReconnect: false,
  });
  return {
    request: query.data ?? null,
    problem: query.error instanceof FinalRefusal ? query.error.refusal : null,
    connectionLost: query.error instanceof PassingFailure,
  };
}
