"use client";

import { useRouter } from "next/navigation";
import { useEffect, useState } from "react";
import { linkButton } from "../../_components/styles";

/** Re-renders the server components every `seconds` (router.refresh: no client fetch of any internal route). */
export function AutoRefresh({ seconds = 10 }: { seconds?: number }) {
  const router = useRouter();
  const [on, setOn] = useState(true);
  useEffect(() => {
    if (!on) return;
    const timer = setInterval(() => router.refresh(), seconds * 1000);
    return () => clearInterval(timer);
  }, [on, router, seconds]);
  return (
    <p className="text-sm text-slate-700">
      {on ? `Refreshes every ${seconds} s.` : "Auto-refresh paused."}{" "}
      <button type="button" className={linkButton} onClick={() => setOn(!on)} aria-pressed={!on}>
        {on ? "Pause" : "Resume"}
      </button>
    </p>
  );
}
