import type { Metadata } from "next";
import Link from "next/link";
import { listAdminActions } from "@/db/queries/admin";
import { readServiceState } from "@/db/queries/controls";
import { requestStatus } from "@/db/schema";
import { loadServiceOverview } from "@/lib/admin/app-overview";
import { OVERVIEW_RANGES, parseOverviewRange, type DashboardOverview } from "@/lib/admin/overview";
import { currentAdminSession } from "@/lib/admin/request-context";
import { ADMIN_SESSION_TTL_MS, SIGNED_OUT_LOCALLY } from "@/lib/admin/session";
import { appDb } from "@/lib/http/app-context";
import { focusRing, link } from "../_components/styles";
import { formatAge, formatCount, formatDateTime, formatDuration, formatEth, shortHex } from "../_lib/format";
import { STATUS_LABELS } from "../_lib/status-labels";
import { AutoRefresh } from "./_components/auto-refresh";
import { OutcomeChart } from "./_components/outcome-chart";
import { SignInForm } from "./_components/sign-in-form";
import { DataTable, Notice, Section, td } from "./_components/ui";
import { withDatabaseOutageNotice } from "./_components/database-outage";

export const metadata: Metadata = { title: "Overview" };

const SIGNED_OUT_LOCALLY_NOTICE = `You are signed out of this browser. The database did not answer, so the session may not have ended on the server: it lapses by itself within ${ADMIN_SESSION_TTL_MS / 3_600_000} hours.`;

export default withDatabaseOutageNotice(OverviewPage);

async function OverviewPage({ searchParams }: { searchParams: Promise<Record<string, string | string[] | undefined>> }) {
  const session = await currentAdminSession();
  const query = await searchParams;
  if (!session) {
    const signedOutLocally = query[SIGNED_OUT_LOCALLY.param] === SIGNED_OUT_LOCALLY.value;
    return <SignInForm returnTo="/dashboard" notice={signedOutLocally ? SIGNED_OUT_LOCALLY_NOTICE : undefined} />;
  }
  const range = parseOverviewRange(query.range);
  const [overview, actions, state] = await Promise.all([
    loadServiceOverview(range),
    listAdminActions(appDb(), { limit: 10, operatorsOnly: true }),
    readServiceState(appDb()),
  ]);

  return (
    <div className="space-y-6">
      <div className="flex flex-wrap items-end justify-between gap-3">
        <div>
          <h1 className="text-2xl font-semibold text-slate-900">Overview</h1>
          <p className="text-sm text-slate-700">As of {formatDateTime(overview.generatedAt)}</p>
        </div>
        <div className="flex flex-col items-start gap-2 sm:items-end">
          <nav aria-label="Time range">
            <ul className="flex gap-1">
              {Object.entries(OVERVIEW_RANGES).map(([key, r]) => (
                <li key={key}>
                  <Link
                    href={key === "24h" ? "/dashboard" : `/dashboard?range=${key}`}
                    aria-current={key === range ? "page" : undefined}
                    className={`inline-flex min-h-11 items-center rounded-md border px-3 text-sm font-medium ${
                      key === range ? "border-slate-900 bg-slate-900 text-white" : "border-slate-400 bg-white text-slate-900 hover:bg-slate-100"
                    } ${focusRing}`}
                  >
                    {r.label}
                  </Link>
                </li>
              ))}
            </ul>
          </nav>
          <AutoRefresh />
        </div>
      </div>

      {state.paused && (
        <Notice tone="warning">
          Sponsorships are paused: {state.pauseReason}.{" "}
          <Link className={link} href="/dashboard/controls">
            Controls
          </Link>
        </Notice>
      )}

      <Section title="Requests by status" id="status-counts">
        <dl className="grid grid-cols-2 gap-3 sm:grid-cols-3 lg:grid-cols-7">
          {requestStatus.enumValues.map((status) => (
            <div key={status} className="rounded-md border border-slate-200 bg-slate-50 p-3">
              <dt className="text-sm text-slate-700">{STATUS_LABELS[status]}</dt>
              <dd className="text-2xl font-semibold text-slate-900 tabular-nums">{formatCount(overview.statusCounts[status])}</dd>
            </div>
          ))}
          <div className="rounded-md border border-slate-200 bg-slate-50 p-3">
            <dt className="text-sm text-slate-700">Wallets</dt>
            <dd className="text-2xl font-semibold text-slate-900 tabular-nums">{formatCount(overview.walletCount)}</dd>
          </div>
        </dl>
      </Section>

      <div className="grid grid-cols-1 gap-6 lg:grid-cols-3">
        <div className="min-w-0 lg:col-span-2">
          <Section title={`Completed and failed, ${OVERVIEW_RANGES[range].label.toLowerCase()}`} id="outcomes">
            <OutcomeChart
              buckets={overview.series.buckets}
              bucketSeconds={overview.series.bucketSeconds}
              title={`Completed and failed requests per ${formatDuration(overview.series.bucketSeconds * 1000)}, ${OVERVIEW_RANGES[range].label.toLowerCase()}`}
            />
          </Section>
        </div>
        <Section title="Time from request to completed" id="latency">
          <dl className="grid grid-cols-2 gap-3">
            <div>
              <dt className="text-sm text-slate-700">Median</dt>
              <dd className="text-2xl font-semibold text-slate-900 tabular-nums">{formatDuration(overview.latency.medianMs)}</dd>
            </div>
            <div>
              <dt className="text-sm text-slate-700">95th percentile</dt>
              <dd className="text-2xl font-semibold text-slate-900 tabular-nums">{formatDuration(overview.latency.p95Ms)}</dd>
            </div>
          </dl>
          <p className="mt-2 text-sm text-slate-700">
            Over {formatCount(overview.latency.count)} request{overview.latency.count === 1 ? "" : "s"} completed in the{" "}
            {OVERVIEW_RANGES[range].label.toLowerCase()}.
          </p>
        </Section>
      </div>

      <div className="grid grid-cols-1 gap-6 lg:grid-cols-2">
        <QueueSection overview={overview} />
        <WorkersSection overview={overview} />
      </div>

      <div className="grid grid-cols-1 gap-6 lg:grid-cols-3">
        <TreasurySection overview={overview} />
        <div className="min-w-0 lg:col-span-2">
          <RelayersSection overview={overview} />
        </div>
      </div>

      <Section title="Recent administrator actions" id="admin-actions">
        {actions.length === 0 ? (
          <p className="text-sm text-slate-700">None yet.</p>
        ) : (
          <DataTable label="Recent administrator actions" columns={["Time", "Action", "Subject", "Reason", "From"]}>
            {actions.map((a) => (
              <tr key={a.id}>
                <td className={`${td} whitespace-nowrap`}>{formatDateTime(a.createdAt)}</td>
                <td className={td}>{a.action.replaceAll("_", " ")}</td>
                <td className={`${td} font-mono`}>
                  {a.subject && /^0x[0-9a-f]{40}$/.test(a.subject) ? (
                    <Link className={link} href={`/dashboard/wallets?address=${a.subject}`} title={a.subject}>
                      {shortHex(a.subject)}
                    </Link>
                  ) : (
                    (a.subject ?? "—")
                  )}
                </td>
                <td className={td}>{a.reason ?? "—"}</td>
                <td className={`${td} font-mono`}>{a.ipAddress ?? "—"}</td>
              </tr>
            ))}
          </DataTable>
        )}
      </Section>
    </div>
  );
}

function QueueSection({ overview }: { overview: DashboardOverview }) {
  const now = overview.generatedAt.getTime();
  return (
    <Section title="Queue depth per stage" id="queue">
      <DataTable label="Queue depth per stage" columns={["Stage", "Waiting", "Ready now", "Oldest"]}>
        {overview.queue.map((q) => (
          <tr key={q.stage}>
            <th scope="row" className={`${td} text-left font-medium`}>
              {STATUS_LABELS[q.stage]}
            </th>
            <td className={`${td} tabular-nums`}>{formatCount(q.depth)}</td>
            <td className={`${td} tabular-nums`}>{formatCount(q.ready)}</td>
            <td className={td}>{q.oldestRequestedAt ? formatAge(now - q.oldestRequestedAt.getTime()) : "—"}</td>
          </tr>
        ))}
      </DataTable>
    </Section>
  );
}

function WorkersSection({ overview }: { overview: DashboardOverview }) {
  const healthy = overview.heartbeats.filter((h) => h.healthy).length;
  return (
    <Section title="Worker heartbeat" id="workers">
      {overview.heartbeats.length === 0 ? (
        <Notice tone="warning">No worker has reported yet: requests will wait in the queue.</Notice>
      ) : (
        <>
          {healthy === 0 && <Notice tone="error">No worker has beaten recently: the pipeline is stopped.</Notice>}
          <DataTable label="Workers" columns={["Worker", "Host / pid", "Last beat", "State"]}>
            {overview.heartbeats.map((h) => (
              <tr key={h.workerId}>
                <td className={`${td} font-mono`} title={h.workerId}>
                  {shortHex(h.workerId, 14, 6)}
                </td>
                <td className={td}>
                  {h.hostname} / {h.pid}
                </td>
                <td className={td}>{formatAge(h.ageMs)}</td>
                <td className={`${td} font-medium ${h.healthy ? "text-green-800" : "text-red-800"}`}>{h.healthy ? "alive" : "stale"}</td>
              </tr>
            ))}
          </DataTable>
        </>
      )}
    </Section>
  );
}

function TreasurySection({ overview }: { overview: DashboardOverview }) {
  const t = overview.treasury;
  return (
    <Section title="Treasury" id="treasury">
      {t.kind === "not_configured" && <Notice tone="warning">No treasury is configured (RPC_URL / TREASURY_ADDRESS).</Notice>}
      {t.kind === "unavailable" && <Notice tone="error">The chain did not answer: {t.error}</Notice>}
      {t.kind === "ok" && (
        <dl className="space-y-2">
          <div>
            <dt className="text-sm text-slate-700">Balance</dt>
            <dd className="text-2xl font-semibold text-slate-900 tabular-nums">{formatEth(t.balance)}</dd>
          </div>
          <div>
            <dt className="text-sm text-slate-700">Sponsorships it still covers</dt>
            <dd className={`text-2xl font-semibold tabular-nums ${t.covers < 10n ? "text-red-800" : "text-slate-900"}`}>{formatCount(t.covers)}</dd>
          </div>
          <div>
            <dt className="text-sm text-slate-700">Amount per sponsorship</dt>
            <dd className="text-slate-900 tabular-nums">{formatEth(t.amount)}</dd>
          </div>
          <div>
            <dt className="text-sm text-slate-700">State</dt>
            <dd className={t.paused ? "font-medium text-red-800" : "text-slate-900"}>{t.paused ? "Paused" : "Active"}</dd>
          </div>
          <div>
            <dt className="text-sm text-slate-700">Address</dt>
            <dd className="font-mono text-sm break-all text-slate-900">{t.address}</dd>
          </div>
        </dl>
      )}
      <ChainEndpoints overview={overview} />
    </Section>
  );
}

/** Each RPC_URL endpoint (by origin: a provider key may sit in its path) and the fee ceiling, as /health sees them. */
function ChainEndpoints({ overview }: { overview: DashboardOverview }) {
  const endpoints = overview.rpcEndpoints ?? [];
  const fees = overview.fees;
  if (endpoints.length === 0 && !fees) return null;
  return (
    <dl className="mt-4 space-y-2 border-t border-slate-200 pt-4">
      <div>
        <dt className="text-sm text-slate-700">RPC endpoints</dt>
        <dd>
          <ul className="space-y-1" aria-label="RPC endpoints">
            {endpoints.map((e, i) => (
              <li key={`${i}-${e.endpoint}`} className="text-sm break-all">
                <span className={e.status === "ok" ? "font-medium text-green-800" : "font-medium text-red-800"}>
                  {e.status === "ok" ? "Up" : e.status === "behind" ? "Behind" : e.status === "other_chain" ? "Other chain" : "Down"}
                </span>{" "}
                <span className="font-mono text-slate-900">{e.endpoint}</span>
                {e.status === "other_chain" ? (
                  <span className="text-slate-700"> (chain {e.chainId}: not read, fix RPC_URL)</span>
                ) : e.status !== "down" ? (
                  <span className="text-slate-700">
                    {" "}
                    block {e.blockNumber}, {e.latencyMs} ms
                  </span>
                ) : (
                  <span className="text-slate-700"> ({e.code ?? "down"})</span>
                )}
              </li>
            ))}
          </ul>
        </dd>
      </div>
      {fees && fees.status !== "not_configured" && (
        <div>
          <dt className="text-sm text-slate-700">Fee ceiling</dt>
          <dd className={fees.status === "ok" ? "text-slate-900" : "font-medium text-red-800"}>
            {fees.ceilingWei ? `${formatGwei(BigInt(fees.ceilingWei))} max fee` : ""}
            {fees.baseFeeWei ? `, base fee ${formatGwei(BigInt(fees.baseFeeWei))}` : ""}
            {fees.status === "degraded" ? ": above the ceiling, relays wait" : fees.status === "down" ? `: ${fees.detail ?? "unknown"}` : ""}
          </dd>
        </div>
      )}
    </dl>
  );
}

function formatGwei(wei: bigint): string {
  const whole = wei / 10n ** 9n;
  const fraction = (wei % 10n ** 9n).toString().padStart(9, "0").replace(/0+$/, "");
  return `${whole}${fraction ? `.${fraction}` : ""} gwei`;
}

function RelayersSection({ overview }: { overview: DashboardOverview }) {
  return (
    <Section title="Relayer accounts" id="relayers">
      {overview.relayersError && <Notice tone="error">Balances and nonces unavailable: {overview.relayersError}</Notice>}
      {overview.relayers.length === 0 ? (
        <p className="text-sm text-slate-700">No relayer account is configured.</p>
      ) : (
        <DataTable label="Relayer accounts" columns={["Account", "Balance", "Nonce (mined / pending)", "Next nonce (service)", "In flight"]}>
          {overview.relayers.map((r) => (
            <tr key={r.address}>
              <td className={`${td} font-mono`} title={r.address}>
                {shortHex(r.address)}
              </td>
              <td className={`${td} tabular-nums whitespace-nowrap`}>{formatEth(r.balance)}</td>
              <td className={`${td} tabular-nums`}>
                {r.chainNonce ?? "—"} / {r.pendingNonce ?? "—"}
              </td>
              <td className={`${td} tabular-nums`}>{r.nextNonce ?? "—"}</td>
              <td className={`${td} tabular-nums`}>{r.inFlight}</td>
            </tr>
          ))}
        </DataTable>
      )}
    </Section>
  );
}
