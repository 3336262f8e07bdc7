"use client";

import { useEffect, useRef } from "react";
import { focusRing, linkButton } from "../../_components/styles";
import { describeWait, type Refusal } from "../_lib/problems";
import { Countdown } from "./countdown";

export type ShownRefusal = Refusal & { serial: number; openRequestId?: string | null };

/**
 * The API's refusal in plain words; its heading takes the focus so a screen reader reads it at once. The alert says
 * the wait once, in words; the ticking countdown is outside it and hidden from screen readers (an alert is read out
 * whole at every change), which hear "You can try again now." once, politely, when it ends.
 */
export function RefusalPanel({ refusal, onFollow }: { refusal: ShownRefusal; onFollow: (id: string) => void }) {
  const headingRef = useRef<HTMLHeadingElement>(null);
  useEffect(() => headingRef.current?.focus(), []);
  // A rate limit ends at a known time. A pause has no end and a budget refills by the faucet's state: the form's
  // closed-faucet notice (refreshed by these refusals) carries their wait, so this panel does not announce a "now"
  // while the faucet is still closed.
  const wait = refusal.kind === "rate_limited" ? refusal.retryAfterSeconds : undefined;
  return (
    <section aria-labelledby="refusal-title" className="rounded-lg border border-red-300 bg-red-50 p-4 sm:p-6">
      <div role="alert">
        <h2 id="refusal-title" ref={headingRef} tabIndex={-1} className={`text-lg font-semibold text-red-900 ${focusRing}`}>
          {refusal.title}
        </h2>
        <p className="mt-1 text-red-950">{refusal.message}</p>
        {wait !== undefined && <p className="sr-only">{describeWait(wait)}</p>}
        {refusal.kind === "request_open" &&
          (refusal.openRequestId ? (
            <p className="mt-2">
              <a
                className={linkButton}
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
      </div>
      {wait !== undefined && <Countdown seconds={wait} announceEnd />}
    </section>
  );
}
