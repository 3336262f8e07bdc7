"use client";

import { createContext, use, useActionState, useEffect, useId, useRef, useState, type ReactNode } from "react";
import { useFormStatus } from "react-dom";
import { dangerButton, primaryButton, secondaryButton, textInput } from "../../_components/styles";
import { blockIpAction, pauseAction, resumeAction, unblockIpAction, type FormState } from "../actions";

const initial: FormState = { error: null, message: null };

function Status({ id, state }: { id: string; state: FormState }) {
  return (
    <p id={id} role="status" className={`min-h-5 text-sm font-medium ${state.error ? "text-red-800" : "text-green-800"}`}>
      {state.error ?? state.message}
    </p>
  );
}

/** Pause (a reason is required) or resume sponsorships; both are audited. */
export function PauseForm({ paused }: { paused: boolean }) {
  const [state, action, pending] = useActionState(paused ? resumeAction : pauseAction, initial);
  const id = useId();
  return (
    <form action={action} className="space-y-3">
      <div className="space-y-1">
        <label htmlFor={`${id}-reason`} className="block font-medium text-slate-900">
          {paused ? "Note for the audit log (optional)" : "Reason for pausing (shown on /health)"}
        </label>
        <textarea id={`${id}-reason`} name="reason" required={!paused} maxLength={1000} rows={2} aria-describedby={`${id}-status`} className={textInput} />
      </div>
      <Status id={`${id}-status`} state={state} />
      <button type="submit" className={paused ? primaryButton : dangerButton} disabled={pending}>
        {pending ? "Saving…" : paused ? "Resume sponsorships" : "Pause sponsorships"}
      </button>
    </form>
  );
}

/** The latest change in the IP blocks section: a block (the form's own status says how it went) or a lift. */
type IpBlockChange = { kind: "block" } | { kind: "lift"; cidr: string; index: number; answeredBefore: FormState };

type IpBlocksContextValue = {
  change: IpBlockChange | null;
  setChange: (change: IpBlockChange) => void;
  liftState: FormState;
  liftAction: (formData: FormData) => void;
};

const IpBlocksContext = createContext<IpBlocksContextValue | null>(null);

function useIpBlocks(): IpBlocksContextValue {
  const value = use(IpBlocksContext);
  if (!value) throw new Error("IpBlockForm and LiftIpBlockButton belong inside IpBlocksPanel");
  return value;
}

/**
 * The IP blocks section's shared state. Lifting a block re-renders the page without its row (refresh()), so the
 * row's button and anything beside it are gone when the answer comes: the outcome is said here, in a status line
 * of the section that stays, and the focus moves to the Lift button now in that place (the next row's, else the
 * last one's), or to the section's heading (`headingId`, focusable) when none is left. A lift also clears the
 * block form's "Blocked …", which no longer describes the list.
 */
export function IpBlocksPanel({ headingId, count, children }: { headingId: string; count: number; children: ReactNode }) {
  const [liftState, liftAction, liftPending] = useActionState(unblockIpAction, initial);
  const [change, setChange] = useState<IpBlockChange | null>(null);
  const panelRef = useRef<HTMLDivElement>(null);
  // After the answer and the page's re-render (in whichever order they land), if the focus was lost with the row
  // (or with the button's being disabled while the lift was under way).
  useEffect(() => {
    if (change?.kind !== "lift" || liftPending || document.activeElement !== document.body) return;
    const buttons = panelRef.current?.querySelectorAll<HTMLButtonElement>("button[data-lift-block]") ?? [];
    (buttons[Math.min(change.index, buttons.length - 1)] ?? document.getElementById(headingId))?.focus();
  }, [change, liftState, liftPending, count, headingId]);
  const answer = liftState.error ?? liftState.message;
  // Only an answer to the latest lift (a new state object) is shown with its address; a page posted without
  // JavaScript has no recorded change and shows the answer as it is.
  const said = change === null ? answer : change.kind === "lift" && liftState !== change.answeredBefore && answer ? `${change.cidr}: ${answer}` : null;
  return (
    <IpBlocksContext value={{ change, setChange, liftState, liftAction }}>
      <div ref={panelRef}>
        <p role="status" className={said ? `mb-3 text-sm font-medium ${liftState.error ? "text-red-800" : "text-green-800"}` : ""}>
          {said}
        </p>
        {children}
      </div>
    </IpBlocksContext>
  );
}

/** Block an address or CIDR prefix (IPv4 or IPv6) with a reason. */
export function IpBlockForm() {
  const [state, action, pending] = useActionState(blockIpAction, initial);
  const { change, setChange } = useIpBlocks();
  const id = useId();
  return (
    <form action={action} onSubmit={() => setChange({ kind: "block" })} className="space-y-3">
      <div className="space-y-1">
        <label htmlFor={`${id}-cidr`} className="block font-medium text-slate-900">
          Address or prefix
        </label>
        <input
          id={`${id}-cidr`}
          name="cidr"
          required
          maxLength={64}
          spellCheck={false}
          autoComplete="off"
          placeholder="198.51.100.0/24 or 2001:db8::/48"
          aria-describedby={`${id}-hint ${id}-status`}
          className={`${textInput} font-mono text-sm`}
        />
        <p id={`${id}-hint`} className="text-sm text-slate-700">
          An IPv6 client is limited as its prefix (IPV6_PREFIX_LENGTH), so blocking one of its addresses blocks that prefix.
        </p>
      </div>
      <div className="space-y-1">
        <label htmlFor={`${id}-reason`} className="block font-medium text-slate-900">
          Reason
        </label>
        <textarea id={`${id}-reason`} name="reason" required maxLength={1000} rows={2} className={textInput} />
      </div>
      <Status id={`${id}-status`} state={change?.kind === "lift" ? initial : state} />
      <button type="submit" className={dangerButton} disabled={pending}>
        {pending ? "Saving…" : "Block"}
      </button>
    </form>
  );
}

function LiftButton({ cidr }: { cidr: string }) {
  const { pending } = useFormStatus();
  return (
    <button type="submit" data-lift-block className={secondaryButton} disabled={pending} aria-label={`Lift the block of ${cidr}`}>
      {pending ? "Lifting…" : "Lift"}
    </button>
  );
}

/** Lifts one IP block (the `index`-th row); the outcome is said by IpBlocksPanel, which outlives the row. */
export function LiftIpBlockButton({ id, cidr, index }: { id: string; cidr: string; index: number }) {
  const { liftAction, liftState, setChange } = useIpBlocks();
  return (
    <form action={liftAction} onSubmit={() => setChange({ kind: "lift", cidr, index, answeredBefore: liftState })}>
      <input type="hidden" name="id" value={id} />
      <LiftButton cidr={cidr} />
    </form>
  );
}
