import type { Metadata } from "next";
import Link from "next/link";
import { getRequestDetail } from "@/db/queries/dashboard";
import { currentAdminSession } from "@/lib/admin/request-context";
import { appDb } from "@/lib/http/app-context";
import { StatusBadge } from "../../../_components/status-badge";
import { link } from "../../../_components/styles";
import { formatDateTime, formatDuration, formatGwei } from "../../../_lib/format";
import { publicExplorerUrl } from "../../../_lib/settings";
import { SignInForm } from "../../_components/sign-in-form";
import { DataTable, Notice, Section, td } from "../../_components/ui";
import { withDatabaseOutageNotice } from "../../_components/database-outage";

export const metadata: Metadata = { title: "Request" };

export default withDatabaseOutageNotice(RequestDetailPage);

async function RequestDetailPage({ params }: { params: Promise<{ id: string }> }) {
  const { id } = await params;
  const session = await currentAdminSession();
  if (!session) return <SignInForm returnTo={/^[0-9a-fA-F-]{36}$/.test(id) ? `/dashboard/requests/${id}` : "/dashboard/requests"} />;
  const detail = await getRequestDetail(appDb(), id);
  if (!detail) {
    return (
      <div className="space-y-4">
        <h1 className="text-2xl font-semibold text-slate-900">Request not found</h1>
        <Notice>No sponsorship request has the id {id}.</Notice>
        <Link className={link} href="/dashboard/requests">
          Back to the requests
        </Link>
      </div>
    );
  }
  const { request, wallet, events, relays } = detail;
  const explorerUrl = publicExplorerUrl();
  const milestones = [
    ["Requested", request.requestedAt],
    ["Approved", request.approvedAt],
    ["Rejected", request.rejectedAt],
    ["Relayed", request.relayedAt],
    ["Completed", request.completedAt],
    ["Failed", request.failedAt],
  ] as const;

  return (
    <div className="space-y-6">
      <div>
        <p className="text-sm">
          <Link className={link} href="/dashboard/requests">
            ← Requests
          </Link>
        </p>
        <h1 className="mt-2 flex flex-wrap items-center gap-3 text-2xl font-semibold text-slate-900">
          Request <span className="font-mono text-lg break-all">{request.id}</span> <StatusBadge status={request.status} />
        </h1>
      </div>

      <div className="grid grid-cols-1 gap-6 lg:grid-cols-2">
        <Section title="Summary" id="summary">
          <dl className="grid grid-cols-1 gap-x-4 gap-y-2 text-sm sm:grid-cols-[max-content_1fr]">
            <dt className="font-medium text-slate-900">Wallet</dt>
            <dd className="font-mono break-all">
              <Link className={link} href={`/dashboard/wallets?address=${request.walletAddress}`}>
                {request.walletAddress}
              </Link>
            </dd>
            <dt className="font-medium text-slate-900">Wallet requests</dt>
            <dd>{wallet?.sponsorshipCount ?? "—"}</dd>
            <dt className="font-medium text-slate-900">Eligibility</dt>
            <dd>{request.eligibilityReason ?? "not reviewed yet"}</dd>
            {request.failureReason && (
              <>
                <dt className="font-medium text-slate-900">Failure</dt>
                <dd className="text-red-800">{request.failureReason}</dd>
              </>
            )}
            <dt className="font-medium text-slate-900">Client IP</dt>
            {/* Null once the request ended longer ago than IP_RETENTION_DAYS (db/queries/ip-retention.ts). */}
            <dd className={request.ipAddress === null ? undefined : "font-mono"}>{request.ipAddress ?? "removed after the IP retention period"}</dd>
            <dt className="font-medium text-slate-900">User agent</dt>
            <dd className="break-all">{request.userAgent ?? "—"}</dd>
            {request.completedAt && (
              <>
                <dt className="font-medium text-slate-900">Request to completed</dt>
                <dd>{formatDuration(request.completedAt.getTime() - request.requestedAt.getTime())}</dd>
              </>
            )}
          </dl>
        </Section>

        <Section title="Timeline" id="timeline">
          <ol className="space-y-2 text-sm">
            {milestones
              .filter(([, at]) => at)
              .map(([label, at]) => (
                <li key={label} className="flex flex-wrap gap-x-3">
                  <span className="w-24 font-medium text-slate-900">{label}</span>
                  <time dateTime={at!.toISOString()} className="tabular-nums text-slate-800">
                    {formatDateTime(at)}
                  </time>
                  <span className="text-slate-700">+{formatDuration(at!.getTime() - request.requestedAt.getTime())}</span>
                </li>
              ))}
          </ol>
        </Section>
      </div>

      <Section title="Audit trail" id="audit">
        <DataTable label="Audit trail" columns={["Time (UTC)", "Change", "By", "Reason"]}>
          {events.map((e) => (
            <tr key={e.id}>
              <td className={`${td} whitespace-nowrap tabular-nums`}>{formatDateTime(e.createdAt).replace(" UTC", "")}</td>
              <td className={td}>
                {e.fromStatus ? `${e.fromStatus} → ` : "created as "}
                {e.toStatus}
              </td>
              <td className={`${td} font-mono`}>{e.actor}</td>
              <td className={td}>{e.reason ?? "—"}</td>
            </tr>
          ))}
        </DataTable>
      </Section>

      <Section title={`Relay attempts (${relays.length})`} id="relays">
        {relays.length === 0 ? (
          <p className="text-sm text-slate-700">No relay transaction yet.</p>
        ) : (
          <DataTable
            label="Relay attempts"
            columns={["#", "Status", "Transaction hash", "Relayer / nonce", "Submitted", "Confirmed / failed", "Block / gas", "Failure"]}
          >
            {relays.map((r) => (
              <tr key={r.id}>
                <td className={`${td} tabular-nums`}>{r.relayAttempt}</td>
                <td className={td}>
                  <StatusBadge status={r.status} />
                </td>
                <td className={`${td} font-mono break-all`}>
                  {r.transactionHash ? (
                    explorerUrl ? (
                      <a className={link} href={`${explorerUrl}/tx/${r.transactionHash}`} target="_blank" rel="noreferrer">
                        {r.transactionHash}
                      </a>
                    ) : (
                      r.transactionHash
                    )
                  ) : (
                    "—"
                  )}
                </td>
                <td className={`${td} font-mono`}>
                  <span className="break-all">{r.relayerAddress ?? "—"}</span> / {r.nonce ?? "—"}
                </td>
                <td className={`${td} whitespace-nowrap`}>{formatDateTime(r.submittedAt)}</td>
                <td className={`${td} whitespace-nowrap`}>{formatDateTime(r.confirmedAt ?? r.failedAt)}</td>
                <td className={`${td} tabular-nums`}>
                  {r.blockNumber ?? "—"} / {r.gasUsed?.toString() ?? "—"}
                  {r.maxFeePerGas !== null && <span className="block text-slate-700">max fee {formatGwei(r.maxFeePerGas)}</span>}
                </td>
                <td className={`${td} text-red-800`}>{r.failureReason ?? ""}</td>
              </tr>
            ))}
          </DataTable>
        )}
      </Section>
    </div>
  );
}
