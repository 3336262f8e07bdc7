"use client";

import { useQueryClient } from "@tanstack/react-query";
import { useId, useRef, useState, type FormEvent } from "react";
import { card, primaryButton, secondaryButton, textInput } from "../../_components/styles";
import { createSponsorshipRequest, getWalletHistory, OPEN_STATUSES, registerWallet, type ApiProblem } from "../_lib/api";
import { describeFaucet } from "../_lib/faucet-words";
import { checkAddress, describeProblem, describeRecheck, describeWait } from "../_lib/problems";
import { ConnectWallet } from "./connect-wallet";
import { Countdown } from "./countdown";
import { FAUCET_QUERY_KEY, FaucetSummary, useFaucetStatus } from "./faucet-summary";
import { RefusalPanel, type ShownRefusal } from "./refusal-panel";
import { RequestProgress } from "./request-progress";

function setRequestIdInUrl(id: string | null) {
  const url = new URL(window.location.href);
  if (id) url.searchParams.set("id", id);
  else url.searchParams.delete("id");
  window.history.replaceState(window.history.state, "", url);
}

/**
 * /request's form: an address (pasted or from the browser's wallet) is registered and a sponsorship requested through
 * the public API; a refusal is explained, an accepted request followed (its id in the URL, so a reload resumes it).
 */
export function RequestFlow({
  explorerUrl,
  walletRpcUrl,
  initialRequestId,
}: {
  explorerUrl: string | null;
  walletRpcUrl: string | null;
  initialRequestId: string | null;
}) {
  const inputId = useId();
  const hintId = `${inputId}-hint`;
  const inputRef = useRef<HTMLInputElement>(null);
  const [address, setAddress] = useState("");
  const [showIncomplete, setShowIncomplete] = useState(false);
  const [submitting, setSubmitting] = useState(false);
  const [refusal, setRefusal] = useState<ShownRefusal | null>(null);
  const [trackedId, setTrackedId] = useState<string | null>(initialRequestId);
  const serial = useRef(0);
  /**
   * Counts the sends (and refusal links followed) whose progress takes the focus; 0 for a page opened with ?id=. A
   * counter, not a flag: a send that answers the request already shown (a replay) mounts nothing new.
   */
  const [focusSerial, setFocusSerial] = useState(0);
  const queryClient = useQueryClient();
  const { status: faucet, answer: faucetAnswer, unavailable: faucetUnavailable } = useFaucetStatus();
  const faucetWords = faucet ? describeFaucet(faucet) : null;
  /**
   * The faucet does not serve requests now (paused, out of budget, empty, network unreachable): the form waits. Only
   * on a current answer: while GET /faucet fails an old "paused" does not hold the form (the API's answer decides).
   */
  const closed = !faucetUnavailable && faucetWords !== null && !faucetWords.serving;
  // Only the budget's refusal ends at a known time (its window frees a slot); a pause, an empty treasury or an
  // unreachable chain has none, and its retry time is only when the page looks again.
  const closedUntilKnown = faucet?.state === "budget_exhausted";

  const check = checkAddress(address);
  const fieldError = check.message && (!check.partial || showIncomplete) ? check.message : null;
  const hint = fieldError ?? (check.valid ? "Looks like a valid address." : (check.message ?? "0x followed by 40 characters 0–9 and a–f."));
  /**
   * What a screen reader is told as it happens: an error, or that the address is complete. The hint itself is read
   * with the field (aria-describedby); as a live region its "Keep typing: 7 of 42 characters." spoke at every key.
   */
  const spoken = fieldError ?? (check.valid ? "Looks like a valid address." : "");

  function track(id: string | null) {
    setTrackedId(id);
    setRequestIdInUrl(id);
  }

  async function refuse(problem: ApiProblem, wallet: string) {
    const described = describeProblem(problem);
    const shown: ShownRefusal = { ...described, serial: ++serial.current };
    if (described.kind === "sponsorships_paused" || described.kind === "budget_exhausted") {
      // The faucet's status changed since it was last read (it polls every 15 s): read it now, so the summary and
      // the form agree with the refusal.
      void queryClient.invalidateQueries({ queryKey: FAUCET_QUERY_KEY });
    }
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
      setFocusSerial((n) => n + 1);
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
      <FaucetSummary status={faucet} unavailable={faucetUnavailable} />
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
          <p id={hintId} className={`min-h-5 text-sm ${fieldError ? "font-medium text-red-800" : "text-slate-700"}`}>
            {hint}
          </p>
          <p aria-live="polite" className="sr-only" data-testid="address-announcement">
            {spoken}
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
        {/* The reason and the wait in words are the live region, there (empty) from the start so that its filling is
            announced when the faucet closes mid-visit; the countdown beside it is for the eyes only. */}
        <div className={closed && faucetWords && faucet ? "rounded-md border border-amber-300 bg-amber-50 p-3 text-amber-950" : undefined}>
          <div id="faucet-closed" role="status">
            {closed && faucetWords && faucet && (
              <>
                <p className="font-medium">{faucetWords.sentence}</p>
                {faucet.retryAfterSeconds !== null && (
                  <p className="sr-only">{closedUntilKnown ? describeWait(faucet.retryAfterSeconds) : describeRecheck(faucet.retryAfterSeconds)}</p>
                )}
              </>
            )}
          </div>
          {closed && faucet && faucet.retryAfterSeconds !== null && (
            <Countdown key={faucetAnswer} seconds={faucet.retryAfterSeconds} recheck={!closedUntilKnown} />
          )}
        </div>
      </form>

      {refusal && (
        <RefusalPanel
          key={refusal.serial}
          refusal={refusal}
          onFollow={(id) => {
            setRefusal(null);
            setFocusSerial((n) => n + 1);
            track(id);
          }}
        />
      )}

      {trackedId && (
        <RequestProgress
          key={trackedId}
          id={trackedId}
          explorerUrl={explorerUrl}
          walletRpcUrl={walletRpcUrl}
          onWallet={(wallet) => setAddress((current) => (current === "" ? wallet : current))}
          focusSerial={focusSerial}
        />
      )}
    </div>
  );
}
