"use client";

import { useEffect, useState } from "react";
import { formatCountdown } from "../_lib/problems";

/**
 * A countdown from Retry-After, for the eyes only: it is hidden from assistive technology and must sit outside any
 * live region, or a screen reader would read it (and, in an alert, the whole alert) out again every second. Say the
 * wait once in words inside the live region instead (`describeWait`). With `announceEnd` its end is announced
 * politely, once: "You can try again now." (its own status region, there and empty from the start, as live regions
 * must be before they change). With `recheck` the time is when the page looks again, not when a try can succeed (a
 * pause has no end): "Checking again in 0:42."
 */
export function Countdown({ seconds, announceEnd = false, recheck = false }: { seconds: number; announceEnd?: boolean; recheck?: boolean }) {
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
    <>
      <p aria-hidden="true" className="mt-2 font-medium text-red-950">
        {remaining > 0 ? (
          <>
            {recheck ? "Checking again in" : "You can try again in"}{" "}
            <span className="tabular-nums" data-testid="retry-countdown">
              {formatCountdown(remaining)}
            </span>
            .
          </>
        ) : recheck ? (
          "Checking again…"
        ) : (
          "You can try again now."
        )}
      </p>
      {announceEnd && (
        <p role="status" className="sr-only">
          {remaining > 0 ? "" : "You can try again now."}
        </p>
      )}
    </>
  );
}
