import type { OutcomeBucket } from "@/db/queries/dashboard";

const WIDTH = 720;
const HEIGHT = 220;
const PAD = { top: 12, right: 12, bottom: 28, left: 40 };

function niceMax(value: number): number {
  if (value <= 4) return 4;
  const magnitude = 10 ** Math.floor(Math.log10(value));
  for (const step of [1, 2, 2.5, 5, 10]) if (step * magnitude >= value) return step * magnitude;
  return 10 * magnitude;
}

function bucketLabel(start: Date, bucketSeconds: number): string {
  const iso = start.toISOString();
  // Hours and minutes for buckets under a day; the date for coarser ones.
  return bucketSeconds < 6 * 3600 ? iso.slice(11, 16) : `${iso.slice(5, 10)} ${iso.slice(11, 13)}h`;
}

/**
 * Completed and failed requests per bucket, drawn as paired bars in SVG on the server (no chart library, no
 * client JavaScript). The same numbers are available as a table for screen readers and keyboard users.
 */
export function OutcomeChart({ buckets, bucketSeconds, title }: { buckets: OutcomeBucket[]; bucketSeconds: number; title: string }) {
  const max = niceMax(Math.max(0, ...buckets.map((b) => Math.max(b.completed, b.failed))));
  const plotW = WIDTH - PAD.left - PAD.right;
  const plotH = HEIGHT - PAD.top - PAD.bottom;
  const slot = plotW / Math.max(1, buckets.length);
  const barW = Math.max(1, Math.min(14, (slot - 2) / 2));
  const y = (v: number) => PAD.top + plotH - (v / max) * plotH;
  const ticks = [0, max / 2, max];
  const labelEvery = Math.max(1, Math.ceil(buckets.length / 6));
  const totals = buckets.reduce((t, b) => ({ completed: t.completed + b.completed, failed: t.failed + b.failed }), { completed: 0, failed: 0 });

  return (
    <figure>
      {/* Below ~560 px the chart keeps a legible size and scrolls sideways instead of shrinking its labels. */}
      <div className="-mx-4 overflow-x-auto px-4 sm:mx-0 sm:px-0" tabIndex={0} role="region" aria-label="Chart">
        <svg viewBox={`0 0 ${WIDTH} ${HEIGHT}`} className="h-auto w-full min-w-[560px]" role="img" aria-labelledby="outcome-chart-title outcome-chart-desc">
          <title id="outcome-chart-title">{title}</title>
          <desc id="outcome-chart-desc">{`${totals.completed} completed and ${totals.failed} failed requests in ${buckets.length} intervals.`}</desc>
          {ticks.map((tick) => (
            <g key={tick}>
              <line x1={PAD.left} x2={WIDTH - PAD.right} y1={y(tick)} y2={y(tick)} stroke="#cbd5e1" strokeWidth={1} />
              <text x={PAD.left - 6} y={y(tick) + 4} textAnchor="end" fontSize={11} fill="#334155">
                {Number.isInteger(tick) ? tick : tick.toFixed(1)}
              </text>
            </g>
          ))}
          {buckets.map((b, i) => {
            const x = PAD.left + i * slot + (slot - 2 * barW) / 2;
            return (
              <g key={b.start.toISOString()}>
                {b.completed > 0 && <rect x={x} y={y(b.completed)} width={barW} height={y(0) - y(b.completed)} fill="#15803d" />}
                {b.failed > 0 && <rect x={x + barW} y={y(b.failed)} width={barW} height={y(0) - y(b.failed)} fill="#b91c1c" />}
                {i % labelEvery === 0 && (
                  <text x={PAD.left + i * slot + slot / 2} y={HEIGHT - 8} textAnchor="middle" fontSize={11} fill="#334155">
                    {bucketLabel(b.start, bucketSeconds)}
                  </text>
                )}
              </g>
            );
          })}
        </svg>
      </div>
      <figcaption className="mt-2 flex flex-wrap items-center gap-4 text-sm text-slate-800">
        <span className="inline-flex items-center gap-1">
          <span aria-hidden className="inline-block size-3 rounded-sm bg-green-700" /> Completed ({totals.completed})
        </span>
        <span className="inline-flex items-center gap-1">
          <span aria-hidden className="inline-block size-3 rounded-sm bg-red-700" /> Failed ({totals.failed})
        </span>
        <span className="text-slate-700">Times in UTC.</span>
      </figcaption>
      <details className="mt-2 text-sm">
        <summary className="cursor-pointer font-medium text-blue-800 underline underline-offset-2">Show the numbers as a table</summary>
        <div className="mt-2 max-h-64 overflow-auto" tabIndex={0} role="region" aria-label="Completed and failed per interval">
          <table className="w-full text-left">
            <thead>
              <tr>
                <th scope="col" className="py-1 pr-4">
                  Interval start (UTC)
                </th>
                <th scope="col" className="py-1 pr-4">
                  Completed
                </th>
                <th scope="col" className="py-1">
                  Failed
                </th>
              </tr>
            </thead>
            <tbody>
              {buckets.map((b) => (
                <tr key={b.start.toISOString()} className="border-t border-slate-200">
                  <td className="py-1 pr-4 tabular-nums">{b.start.toISOString().slice(0, 16).replace("T", " ")}</td>
                  <td className="py-1 pr-4 tabular-nums">{b.completed}</td>
                  <td className="py-1 tabular-nums">{b.failed}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      </details>
    </figure>
  );
}
