"use client";

import { useActionState, useId } from "react";
import { primaryButton, textInput } from "../../_components/styles";
import { signInAction, type FormState } from "../actions";

const initial: FormState = { error: null, message: null };

/** The only thing the dashboard shows without a session; `notice`, when given, is said above the form. */
export function SignInForm({ returnTo, notice }: { returnTo: string; notice?: string }) {
  const [state, action, pending] = useActionState(signInAction, initial);
  const id = useId();
  return (
    <section aria-labelledby={`${id}-title`} className="mx-auto mt-8 max-w-md rounded-lg border border-slate-300 bg-white p-6 shadow-sm">
      <h1 id={`${id}-title`} className="text-xl font-semibold text-slate-900">
        Administrator sign-in
      </h1>
      {notice && <p className="mt-2 rounded-md border border-amber-400 bg-amber-50 px-3 py-2 text-sm text-amber-950">{notice}</p>}
      <p className="mt-1 text-sm text-slate-700">
        Enter the administrator token (<code className="font-mono">ADMIN_TOKEN</code>). Local development prints it when the service starts.
      </p>
      <form action={action} className="mt-4 space-y-3">
        <input type="hidden" name="returnTo" value={returnTo} />
        <div className="space-y-1">
          <label htmlFor={`${id}-token`} className="block font-medium text-slate-900">
            Administrator token
          </label>
          <input
            id={`${id}-token`}
            name="token"
            type="password"
            autoComplete="current-password"
            required
            aria-invalid={state.error ? true : undefined}
            aria-describedby={`${id}-error`}
            className={`${textInput} font-mono`}
          />
        </div>
        <p id={`${id}-error`} role="alert" className="min-h-5 text-sm font-medium text-red-800">
          {state.error}
        </p>
        <button type="submit" className={primaryButton} disabled={pending}>
          {pending ? "Signing in…" : "Sign in"}
        </button>
      </form>
    </section>
  );
}
