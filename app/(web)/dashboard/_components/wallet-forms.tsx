"use client";

import { useActionState, useId } from "react";
import { dangerButton, primaryButton, textInput } from "../../_components/styles";
import { blockWalletAction, unblockWalletAction, type FormState } from "../actions";

const initial: FormState = { error: null, message: null };

/** Block (or, when blocked, unblock) a wallet; a reason is required and kept in the audit log. */
export function WalletBlockForm({ address, blocked }: { address: string; blocked: boolean }) {
  const [state, action, pending] = useActionState(blocked ? unblockWalletAction : blockWalletAction, initial);
  const id = useId();
  const verb = blocked ? "Unblock" : "Block";
  return (
    <form action={action} className="space-y-3" aria-labelledby={`${id}-title`}>
      <h2 id={`${id}-title`} className="text-lg font-semibold text-slate-900">
        {verb} this wallet
      </h2>
      <input type="hidden" name="walletAddress" value={address} />
      <div className="space-y-1">
        <label htmlFor={`${id}-reason`} className="block font-medium text-slate-900">
          Reason for {blocked ? "unblocking" : "blocking"}
        </label>
        <textarea id={`${id}-reason`} name="reason" required maxLength={1000} rows={2} aria-describedby={`${id}-status`} className={textInput} />
      </div>
      <p id={`${id}-status`} role="status" className={`min-h-5 text-sm font-medium ${state.error ? "text-red-800" : "text-green-800"}`}>
        {state.error ?? state.message}
      </p>
      <button type="submit" className={blocked ? primaryButton : dangerButton} disabled={pending}>
        {pending ? "Saving…" : `${verb} wallet`}
      </button>
    </form>
  );
}
