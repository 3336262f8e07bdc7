const STYLES: Record<string, string> = {
  pending: "bg-slate-100 text-slate-800 ring-slate-400",
  approved: "bg-sky-50 text-sky-900 ring-sky-400",
  relayed: "bg-indigo-50 text-indigo-900 ring-indigo-400",
  completed: "bg-green-50 text-green-900 ring-green-600",
  rejected: "bg-amber-50 text-amber-900 ring-amber-500",
  failed: "bg-red-50 text-red-900 ring-red-500",
  queued: "bg-slate-100 text-slate-800 ring-slate-400",
  submitted: "bg-indigo-50 text-indigo-900 ring-indigo-400",
  confirmed: "bg-green-50 text-green-900 ring-green-600",
};

/** A status as a coloured pill; the word itself carries the meaning (colour is only a reinforcement). */
export function StatusBadge({ status }: { status: string }) {
  return (
    <span className={`inline-flex items-center rounded-full px-2 py-0.5 text-sm font-medium ring-1 ring-inset ${STYLES[status] ?? STYLES.pending}`}>
      {status}
    </span>
  );
}
