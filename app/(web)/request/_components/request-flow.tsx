"use client";

import { useEffect, useId, useRef, useState, type FormEvent } from "react";
import { card, focusRing, link, primaryButton, secondaryButton, textInput } from "../../_components/styles";
import {
  createSponsorshipRequest,
  getSponsorshipRequest,
  getWalletHistory,
  OPEN_STATUSES,
  registerWallet,
  TERMINAL_STATUSES,
  type ApiProblem,
  type SponsorshipRequestView,
} from "../_lib/api";
import { STATUS_LABELS } from "../../_lib/status-labels";
import { checkAddress, describeOutcome, describeProblem, formatCountdown, type Refusal } from "../_lib/problems";
import { describeFaucet } from "../_lib/faucet-words";
import { ConnectWallet } from "./connect-wallet";
import { FaucetSummary, useFaucetStatus } from "./faucet-summary";
import { RequestTimeline } from "./request-timeline";

/** Interface-spec 3.1, rule 4: poll every 3 to 5 seconds, stop at a terminal status. */
export const POLL_INTERVAL_MS = 3000;

type ShownRefusal = Refusal & { serial: number; openRequestId?: string | null };

const STATUS_SENTENCES: Record<string, string> = {
  pending: "We received the request and are checking the wallet.",
  approved: "The wallet is eligible. The transaction is being prepared.",
  relayed: "The transaction was sent and is waiting to be mined.",
  completed: "Done: the tokens are in the wallet.",
};

function setRequestIdInUrl(id: string | null) {
  const url = new URL(window.location.href);
  if (id) url.searchParams.set("id", id);
  else url.searchParams.delete("id");
  window.history.replaceState(window.history.state, "", url);
}

export function RequestFlow({ explorerUrl, initialRequestId }: { explorerUrl: string | null; initialRequestId: string | null }) {
  const inputId = useId();
  const hintId = `${inputId}-hint`;
  const inputRef = useRef<HTMLInputElement>(null);
  const [address, setAddress] = useState("");
  const [showIncomplete, setShowIncomplete] = useState(false);
  const [submitting, setSubmitting] = useState(false);
  const [refusal, setRefusal] = useState<ShownRefusal | null>(null);
  const [trackedId, setTrackedId] = useState<string | null>(initialRequestId);
  const serial = useRef(0);
  const { status: faucet, answer: faucetAnswer } = useFaucetStatus();
  const faucetWords = faucet ? describeFaucet(faucet) : null;
  /** The faucet does not serve requests now (paused, out of budget, empty, network unreachable): the form waits. */
  const closed = faucetWords !== null && !faucetWords.serving;

  const check = checkAddress(address);
  const fieldError = check.message && (!check.partial || showIncomplete) ? check.message : null;
  const hint = fieldError ?? (check.valid ? "Looks like a valid address." : (check.message ?? "0x followed by 40 characters 0–9 and a–f."));

  function track(id: string | null) {
    setTrackedId(id);
    setRequestIdInUrl(id);
  }

  async function refuse(problem: ApiProblem, wallet: string) {
    const described = describeProblem(problem);
    const shown: ShownRefusal = { ...described, serial: ++serial.current };
    if (described.kind === "request_open") {
      // Find the open request so the user can follow it (GET /wallets/:address/history, newest first).
      const history = await getWalletHistory(wallet);
      shown.openRequestId = history.ok ? (history.data.requests.find((r) => OPEN_STATUSES.includes(r.status))?.id ?? null) : null;
    }
    setRefusal(shown);
  }

  async function onSubmit(event: FormEvent<HTMLFormElement>) {
    event.preventDefault();
    if (submitting || closed) return;
    const wallet = address.trim();
    if (!checkAddress(wallet).valid) {
      // Nothing is sent for an address that cannot be right.
      setShowIncomplete(true);
      inputRef.current?.focus();
      return;
    }
    setSubmitting(true);
    setRefusal(null);
    try {
      const registered = await registerWallet(wallet);
      if (!registered.ok) return await refuse(registered.problem, wallet);
      const created = await createSponsorshipRequest(wallet);
      if (!created.ok) return await refuse(created.problem, wallet);
      track(created.data.id);
    } finally {
      setSubmitting(false);
    }
  }

  function startOver() {
    track(null);
    setRefusal(null);
    setAddress("");
    setShowIncomplete(false);
    inputRef.current?.focus();
  }

  return (
    <div className="mt-8 space-y-6">
      <FaucetSummary status={faucet} />
      <form onSubmit={onSubmit} noValidate className={`${card} space-y-4`} aria-label="Sponsorship request">
        <div className="space-y-2">
          <label htmlFor={inputId} className="block font-medium text-slate-900">
            Wallet address
          </label>
          <input
            ref={inputRef}
            id={inputId}
            name="walletAddress"
            type="text"
            inputMode="text"
            autoComplete="off"
            autoCapitalize="off"
            autoCorrect="off"
            spellCheck={false}
            placeholder="0x…"
            maxLength={64}
            value={address}
            onChange={(e) => {
              setAddress(e.target.value);
              setShowIncomplete(false);
            }}
            aria-invalid={fieldError ? true : undefined}
            aria-describedby={hintId}
            className={`${textInput} font-mono text-sm sm:text-base`}
          />
          <p id={hintId} aria-live="polite" className={`min-h-5 text-sm ${fieldError ? "font-medium text-red-800" : "text-slate-700"}`}>
            {hint}
          </p>
        </div>
        <ConnectWallet
          disabled={submitting}
          onAddress={(a) => {
            setAddress(a);
            setShowIncomplete(false);
          }}
        />
        <div className="flex flex-wrap gap-3">
          <button
            type="submit"
            className={primaryButton}
            disabled={submitting || closed}
            aria-disabled={submitting || closed}
            aria-describedby={closed ? "faucet-closed" : undefined}
          >
            {submitting ? "Sending…" : "Request gas"}
          </button>
          {(trackedId || refusal) && (
            <button type="button" className={secondaryButton} onClick={startOver}>
              Start over
            </button>
          )}
        </div>
        {closed && faucetWords && faucet && (
          <div id="faucet-closed" role="status" className="rounded-md border border-amber-300 bg-amber-50 p-3 text-amber-950">
            <p className="font-medium">{faucetWords.sentence}</p>
            {faucet.retryAfterSeconds !== null && <Countdown key={faucetAnswer} seconds={faucet.retryAfterSeconds} />}
          </div>
        )}
      </form>

      {refusal && <RefusalPanel key={refusal.serial} refusal={refusal} onFollow={(id) => {
            setRefusal(null);
            track(id);
          }} />}

      {trackedId && (
        <RequestProgress
          key={trackedId}
          id={trackedId}
          explorerUrl={explorerUrl}
          onWallet={(wallet) => setAddress((current) => (current === "" ? wallet : current))}
        />
      )}
    </div>
  );
}

function RefusalPanel({ refusal, onFollow }: { refusal: ShownRefusal; onFollow: (id: string) => void }) {
  const headingRef = useRef<HTMLHeadingElement>(null);
  useEffect(() => headingRef.current?.focus(), []);
  return (
    <section role="alert" aria-labelledby="refusal-title" className="rounded-lg border border-red-300 bg-red-50 p-4 sm:p-6">
      <h2 id="refusal-title" ref={headingRef} tabIndex={-1} className={`text-lg font-semibold text-red-900 ${focusRing}`}>
        {refusal.title}
      </h2>
      <p className="mt-1 text-red-950">{refusal.message}</p>
      {(refusal.kind === "rate_limited" || refusal.kind === "budget_exhausted" || refusal.kind === "sponsorships_paused") &&
        refusal.retryAfterSeconds !== undefined && <Countdown seconds={refusal.retryAfterSeconds} />}
      {refusal.kind === "request_open" &&
        (refusal.openRequestId ? (
          <p className="mt-2">
            <a
              className={link}
              href={`/request?id=${refusal.openRequestId}`}
              onClick={(e) => {
                e.preventDefault();
                onFollow(refusal.openRequestId!);
              }}
            >
              Follow the open request
            </a>
          </p>
        ) : (
          <p className="mt-2 text-red-950">Its progress is shown on the page where it was submitted.</p>
        ))}
    </section>
  );
}

/** A live countdown from Retry-After. */
function Countdown({ seconds }: { seconds: number }) {
  const [remaining, setRemaining] = useState(seconds);
  useEffect(() => {
    const deadline = Date.now() + seconds * 1000;
    const timer = setInterval(() => {
      const left = Math.max(0, Math.ceil((deadline - Date.now()) / 1000));
      setRemaining(left);
      if (left === 0) clearInterval(timer);
    }, 250);
    return () => clearInterval(timer);
  }, [seconds]);
  return (
    <p className="mt-2 font-medium text-red-950">
      {remaining > 0 ? (
        <>
          You can try again in{" "}
          <span className="tabular-nums" data-testid="retry-countdown" aria-label={`${remaining} seconds`}>
            {formatCountdown(remaining)}
          </span>
          .
        </>
      ) : (
        "You can try again now."
      )}
    </p>
  );
}

type ProgressState = {
  request: SponsorshipRequestView | null;
  problem: Refusal | null;
  connectionLost: boolean;
};

/** Polls GET /sponsorship/:id every 3 s until a terminal status; survives network errors by retrying. */
function useSponsorshipRequest(id: string, onWallet: (wallet: string) => void): ProgressState {
  const [state, setState] = useState<ProgressState>({ request: null, problem: null, connectionLost: false });
  const onWalletRef = useRef(onWallet);
  useEffect(() => {
    onWalletRef.current = onWallet;
  });
  useEffect(() => {
    let cancelled = false;
    let timer: ReturnType<typeof setTimeout> | undefined;
    let reportedWallet = false;
    const tick = async () => {
      const result = await getSponsorshipRequest(id);
      if (cancelled) return;
      if (result.ok) {
        setState({ request: result.data, problem: null, connectionLost: false });
        if (!reportedWallet) {
          reportedWallet = true;
          onWalletRef.current(result.data.walletAddress);
        }
        if (TERMINAL_STATUSES.includes(result.data.status)) return;
      } else if (result.problem.status === 400 || result.problem.status === 404) {
        setState({ request: null, problem: describeProblem(result.problem), connectionLost: false });
        return;
      } else {
        setState((s) => ({ ...s, connectionLost: true }));
      }
      timer = setTimeout(tick, POLL_INTERVAL_MS);
    };
    void tick();
    return () => {
      cancelled = true;
      if (timer) clearTimeout(timer);
    };
  }, [id]);
  return state;
}

/** The hash to show: the confirmed one, else the newest the node accepted (submitted), else the newest stored. */
function transactionHash(request: SponsorshipRequestView | null): string | null {
  const relays = request?.relayTransactions ?? [];
  const confirmed = relays.find((r) => r.status === "confirmed" && r.transactionHash);
  if (confirmed) return confirmed.transactionHash;
  const newestFirst = [...relays].reverse();
  return (newestFirst.find((r) => r.status === "submitted" && r.transactionHash) ?? newestFirst.find((r) => r.transactionHash))?.transactionHash ?? null;
}

const HASH_PLACEHOLDER = "0x" + "0".repeat(64);

function RequestProgress({ id, explorerUrl, onWallet }: { id: string; explorerUrl: string | null; onWallet: (wallet: string) => void }) {
  const { request, problem, connectionLost } = useSponsorshipRequest(id, onWallet);

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
  const terminal = status !== null && TERMINAL_STATUSES.includes(status);
  const outcome = request ? describeOutcome(request) : null;
  const hash = transactionHash(request);

  return (
    <section aria-labelledby="progress-title" className={card}>
      <div className="flex flex-wrap items-baseline justify-between gap-2">
        <h2 id="progress-title" className="text-lg font-semibold text-slate-900">
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
        <dd className="relative font-mono break-all text-slate-800" data-testid="transaction-hash">
          {/* The placeholder has the hash's length, so the row's height does not change when the hash arrives. */}
          <span aria-hidden className="invisible">
            {HASH_PLACEHOLDER}
          </span>
          <span className="absolute inset-0">
            {hash ? (
              explorerUrl ? (
                <a className={link} href={`${explorerUrl}/tx/${hash}`} target="_blank" rel="noreferrer">
                  {hash}
                  <span className="sr-only"> (opens the block explorer)</span>
                </a>
              ) : (
                hash
              )
            ) : (
              <span className="font-sans text-slate-700">{terminal ? "none" : "not sent yet"}</span>
            )}
          </span>
        </dd>
      </dl>

      <p className="mt-3 min-h-5 text-sm text-amber-900" aria-live="polite">
        {connectionLost ? "Connection to the service lost; still trying…" : "\u00a0"}
      </p>
    </section>
  );
}
