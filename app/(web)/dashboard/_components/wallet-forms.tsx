"use client";

import { useActionState, useEffect, useId, useRef, useState } from "react";
import { dangerButton, focusRing, primaryButton, secondaryButton, textInput } from "../../_components/styles";
import { blockWalletAction, unblockWalletAction, type FormState } from "../actions";

const initial: FormState = { error: null, message: null };

/**
 * Block a wallet, or lift its blocks; a reason is required and kept in the audit log. An administrator's block is
 * offered unless one is active: an automatic (rate-limit) block ends by itself and does not stand in for one
 * (lib/sponsorship/blocks.ts blockWallet dedupes only against administrator blocks). Lifting is offered while any
 * block is active (unblockWallet lifts them all): "Unblock wallet" under an administrator's block, "Lift the
 * automatic block" under an automatic one alone. One status line says the outcome of either.
 */
export function WalletBlockForm({ address, adminBlocked, blocked }: { address: string; adminBlocked: boolean; blocked: boolean }) {
  const [blockState, blockAction, blockPending] = useActionState(blockWalletAction, initial);
  const [unblockState, unblockAction, unblockPending] = useActionState(unblockWalletAction, initial);
  const [last, setLast] = useState<"block" | "unblock" | null>(null);
  const pressed = useRef<HTMLElement | null>(null);
  const state = last === "unblock" ? unblockState : blockState;
  const id = useId();
  const headingRef = useRef<HTMLHeadingElement>(null);
  const pending = blockPending || unblockPending;
  // A change re-renders the page: the button pressed may be gone with the block it lifted (an automatic block), and
  // the focus with it (or lost while the button was disabled). Give it back to that button, else to the form's
  // heading, rather than leave it on the page's body.
  useEffect(() => {
    if (last === null || pending || document.activeElement !== document.body) return;
    (pressed.current?.isConnected ? pressed.current : headingRef.current)?.focus();
  }, [last, pending, blockState, unblockState, adminBlocked, blocked]);
  const reasonLabel = adminBlocked ? "Reason for unblocking" : blocked ? "Reason for blocking, or for lifting the automatic block" : "Reason for blocking";
  return (
    <form
      className="space-y-3"
      aria-labelledby={`${id}-title`}
      onSubmit={(event) => {
        // Which change was asked for (a form the browser refused as invalid is not submitted: no change then).
        const submitter = (event.nativeEvent as SubmitEvent).submitter;
        const change = submitter?.dataset.change;
        if (change === "block" || change === "unblock") setLast(change);
        pressed.current = submitter ?? null;
      }}
    >
      <h2 id={`${id}-title`} ref={headingRef} tabIndex={-1} className={`text-lg font-semibold text-slate-900 ${focusRing}`}>
        {adminBlocked ? "Unblock this wallet" : "Block this wallet"}
      </h2>
      <input type="hidden" name="walletAddress" value={address} />
      <div className="space-y-1">
        <label htmlFor={`${id}-reason`} className="block font-medium text-slate-900">
          {reasonLabel}
        </label>
        <textarea id={`${id}-reason`} name="reason" required maxLength={1000} rows={2} aria-describedby={`${id}-status`} className={textInput} />
      </div>
      <p id={`${id}-status`} role="status" className={`min-h-5 text-sm font-medium ${state.error ? "text-red-800" : "text-green-800"}`}>
        {state.error ?? state.message}
      </p>
      <div className="flex flex-wrap gap-3">
        {/* One button whose action follows the state, so a block or unblock keeps the focus on it. */}
        <button
          type="submit"
          formAction={adminBlocked ? unblockAction : blockAction}
          data-change={adminBlocked ? "unblock" : "block"}
          className={adminBlocked ? primaryButton : dangerButton}
          disabled={pending}
        >
          {(adminBlocked ? unblockPending : blockPending) ? "Saving…" : adminBlocked ? "Unblock wallet" : "Block wallet"}
        </button>
        {blocked && !adminBlocked && (
          <button type="submit" formAction={unblockAction} data-change="unblock" className={secondaryButton} disabled={pending}>
            {unblockPending ? "Lifting…" : "Lift the automatic block"}
          </button>
        )}
      </div>
    </form>
  );
}
