"use client";

import { useActionState, useId } from "react";
import { secondaryButton } from "../../_components/styles";
import { sendTestWebhookAction, type FormState } from "../actions";

const initial: FormState = { error: null, message: null };

/** Sends a `webhook.test` event to every endpoint (audited). */
export function TestWebhookButton({ disabled }: { disabled: boolean }) {
  const [state, action, pending] = useActionState(sendTestWebhookAction, initial);
  const id = useId();
  return (
    <form action={action} className="space-y-2">
      <p id={`${id}-status`} role="status" className={`min-h-5 text-sm font-medium ${state.error ? "text-red-800" : "text-green-800"}`}>
        {state.error ?? state.message}
      </p>
      <button type="submit" className={secondaryButton} disabled={pending || disabled} aria-describedby={`${id}-status`}>
        {pending ? "Sending…" : "Send a test event"}
      </button>
    </form>
  );
}
