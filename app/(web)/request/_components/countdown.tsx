"use client";

import { useEffect, useState } from "react";
import { formatCountdown } from "../_lib/problems";

/** A live countdown from Retry-After. */
export function Countdown({ seconds }: { seconds: number }) {
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
