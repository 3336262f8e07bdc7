import type { RequestStatus, SponsorshipRequestView } from "../_lib/api";

type StepState = "done" | "current" | "upcoming" | "failed" | "skipped";
type Step = { key: string; label: string; at: string | null; state: StepState; hint: string };

const ORDER: RequestStatus[] = ["pending", "approved", "relayed", "completed"];

function firstSubmittedAt(request: SponsorshipRequestView): string | null {
  const times = (request.relayTransactions ?? []).map((r) => r.submittedAt).filter((t): t is string => !!t);
  return times.sort()[0] ?? null;
}

/** The four steps of the pipeline (interface-spec 3.1), with a rejection or failure taking the place it happened. */
export function timelineSteps(request: SponsorshipRequestView | null): Step[] {
  const steps: Step[] = [
    { key: "pending", label: "Received", at: request?.requestedAt ?? null, state: "upcoming", hint: "Your request is in the queue." },
    { key: "approved", label: "Approved", at: request?.approvedAt ?? null, state: "upcoming", hint: "The wallet passed the eligibility checks." },
    {
      key: "relayed",
      label: "Sent on-chain",
      at: request ? firstSubmittedAt(request) : null,
      state: "upcoming",
      hint: "The transaction is on its way to the chain.",
    },
    { key: "completed", label: "Completed", at: request?.completedAt ?? null, state: "upcoming", hint: "The tokens have arrived." },
  ];
  if (!request) return steps;
  const status = request.status;
  if (status === "rejected") {
    steps[0]!.state = "done";
    steps[1] = { key: "rejected", label: "Rejected", at: request.rejectedAt, state: "failed", hint: "The wallet will not be sponsored." };
    steps[2]!.state = "skipped";
    steps[3]!.state = "skipped";
    return steps;
  }
  if (status === "failed") {
    steps[0]!.state = "done";
    steps[1]!.state = "done";
    steps[2]!.state = "done";
    steps[3] = { key: "failed", label: "Failed", at: request.failedAt, state: "failed", hint: "The transaction could not be completed." };
    return steps;
  }
  const index = ORDER.indexOf(status);
  steps.forEach((step, i) => {
    step.state = i < index || status === "completed" ? "done" : i === index ? "current" : "upcoming";
  });
  return steps;
}

const STATE_WORDS: Record<StepState, string> = {
  done: "done",
  current: "in progress",
  upcoming: "not yet",
  failed: "stopped here",
  skipped: "skipped",
};

function formatTime(iso: string | null): string {
  if (!iso) return "";
  const d = new Date(iso);
  return d.toLocaleTimeString(undefined, { hour: "2-digit", minute: "2-digit", second: "2-digit" });
}

function Marker({ state }: { state: StepState }) {
  const base = "flex size-7 shrink-0 items-center justify-center rounded-full border-2 text-sm font-bold";
  if (state === "done")
    return (
      <span aria-hidden className={`${base} border-green-700 bg-green-700 text-white`}>
        ✓
      </span>
    );
  if (state === "failed")
    return (
      <span aria-hidden className={`${base} border-red-700 bg-red-700 text-white`}>
        ✕
      </span>
    );
  if (state === "current")
    return (
      <span aria-hidden className={`${base} border-blue-700 bg-white`}>
        <span className="size-3 animate-pulse rounded-full bg-blue-700 motion-reduce:animate-none" />
      </span>
    );
  return <span aria-hidden className={`${base} border-slate-400 bg-white`} />;
}

/**
 * Always four rows of fixed height, whatever the status: polling changes colours and words, never the layout.
 */
export function RequestTimeline({ request }: { request: SponsorshipRequestView | null }) {
  const steps = timelineSteps(request);
  return (
    <ol aria-label="Progress of the request" className="space-y-0">
      {steps.map((step, i) => (
        <li key={i} aria-current={step.state === "current" ? "step" : undefined} className="relative flex min-h-16 gap-3">
          {i < steps.length - 1 && (
            <span
              aria-hidden
              className={`absolute top-7 left-[13px] h-[calc(100%-1.75rem)] w-0.5 ${step.state === "done" ? "bg-green-700" : "bg-slate-300"}`}
            />
          )}
          <Marker state={step.state} />
          <div className="min-w-0 pb-3">
            <p
              className={`leading-7 font-medium ${
                step.state === "failed" ? "text-red-800" : step.state === "upcoming" || step.state === "skipped" ? "text-slate-600" : "text-slate-900"
              }`}
            >
              {step.label}
              {/* Until the first read answers nothing is known: not "not yet" for a request already received. */}
              <span className="sr-only">: {request ? STATE_WORDS[step.state] : "loading"}</span>
            </p>
            <p className="h-5 text-sm text-slate-700 tabular-nums">
              {step.at ? <time dateTime={step.at}>{formatTime(step.at)}</time> : step.state === "current" ? "working on it…" : "\u00a0"}
            </p>
          </div>
        </li>
      ))}
    </ol>
  );
}
