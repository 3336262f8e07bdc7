"use client";

import { useActionState, useId } from "react";
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

/** Block an address or CIDR prefix (IPv4 or IPv6) with a reason. */
export function IpBlockForm() {
  const [state, action, pending] = useActionState(blockIpAction, initial);
  const id = useId();
  return (
    <form action={action} className="space-y-3">
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
      <Status id={`${id}-status`} state={state} />
      <button type="submit" className={dangerButton} disabled={pending}>
        {pending ? "Saving…" : "Block"}
      </button>
    </form>
  );
}

/** Lifts one IP block. */
export function LiftIpBlockButton({ id, cidr }: { id: string; cidr: string }) {
  const [state, action, pending] = useActionState(unblockIpAction, initial);
  return (
    <form action={action} className="flex flex-col gap-1">
      <input type="hidden" name="id" value={id} />
      <button type="submit" className={secondaryButton} disabled={pending} aria-label={`Lift the block of ${cidr}`}>
        {pending ? "Lifting…" : "Lift"}
      </button>
      {(state.error ?? state.message) && (
        <span role="status" className={`text-sm ${state.error ? "text-red-800" : "text-green-800"}`}>
          {state.error ?? state.message}
        </span>
      )}
    </form>
  );
}
