import type { Metadata } from "next";
import Link from "next/link";
import { listRequests } from "@/db/queries/dashboard";
import { requestStatus } from "@/db/schema";
import { currentAdminSession } from "@/lib/admin/request-context";
import { parseRequestFilters, REQUEST_TIME_RANGES, requestListHref } from "@/lib/admin/request-filters";
import { appDb } from "@/lib/http/app-context";
import { StatusBadge } from "../../_components/status-badge";
import { link, primaryButton, secondaryButton, textInput } from "../../_components/styles";
import { formatDateTime, shortHex } from "../../_lib/format";
import { SignInForm } from "../_components/sign-in-form";
import { DataTable, Notice, td } from "../_components/ui";
import { withDatabaseOutageNotice } from "../_components/database-outage";

export const metadata: Metadata = { title: "Requests" };

const PAGE_SIZE = 25;

export default withDatabaseOutageNotice(RequestsPage);

async function RequestsPage({ searchParams }: { searchParams: Promise<Record<string, string | string[] | undefined>> }) {
  const session = await currentAdminSession();
  if (!session) return <SignInForm returnTo="/dashboard/requests" />;
  const filters = parseRequestFilters(await searchParams);
  const page = await listRequests(appDb(), { ...filters, limit: PAGE_SIZE });
  const { query } = filters;
  const invalidSearch = filters.search?.kind === "invalid";

  return (
    <div className="space-y-4">
      <h1 className="text-2xl font-semibold text-slate-900">Requests</h1>

      <form
        method="get"
        action="/dashboard/requests"
        role="search"
        aria-label="Filter requests"
        className="grid gap-3 sm:grid-cols-[1fr_1fr_2fr_auto] sm:items-end"
      >
        <div className="space-y-1">
          <label htmlFor="filter-status" className="block text-sm font-medium text-slate-900">
            Status
          </label>
          <select id="filter-status" name="status" defaultValue={query.status} className={textInput}>
            <option value="">Any status</option>
            {requestStatus.enumValues.map((s) => (
              <option key={s} value={s}>
                {s}
              </option>
            ))}
          </select>
        </div>
        <div className="space-y-1">
          <label htmlFor="filter-range" className="block text-sm font-medium text-slate-900">
            Time range
          </label>
          <select id="filter-range" name="range" defaultValue={query.range} className={textInput}>
            {Object.entries(REQUEST_TIME_RANGES).map(([key, r]) => (
              <option key={key} value={key}>
                {r.label}
              </option>
            ))}
          </select>
        </div>
        <div className="space-y-1">
          <label htmlFor="filter-q" className="block text-sm font-medium text-slate-900">
            Search
          </label>
          <input
            id="filter-q"
            name="q"
            type="search"
            defaultValue={query.q}
            placeholder="Wallet address, request ID or transaction hash"
            aria-describedby="filter-q-hint"
            aria-invalid={invalidSearch ? true : undefined}
            className={`${textInput} font-mono text-sm`}
            spellCheck={false}
            autoComplete="off"
          />
        </div>
        <div className="flex gap-2">
          <button type="submit" className={primaryButton}>
            Apply
          </button>
          <Link href="/dashboard/requests" className={secondaryButton}>
            Reset
          </Link>
        </div>
        <p id="filter-q-hint" className={`text-sm sm:col-span-4 ${invalidSearch ? "font-medium text-red-800" : "text-slate-700"}`}>
          {invalidSearch
            ? "Search for a full wallet address (0x + 40 hex), a request ID (UUID) or a transaction hash (0x + 64 hex)."
            : "Exact match, any letter case."}
        </p>
      </form>

      {page.rows.length === 0 ? (
        <Notice>No request matches these filters.</Notice>
      ) : (
        <DataTable
          label="Sponsorship requests"
          caption="Sponsorship requests, newest first"
          columns={["Requested (UTC)", "Request", "Wallet", "Status", "Transaction", "Attempts"]}
        >
          {page.rows.map((r) => (
            <tr key={r.id}>
              <td className={`${td} whitespace-nowrap tabular-nums`}>{formatDateTime(r.requestedAt).replace(" UTC", "")}</td>
              <td className={`${td} font-mono`}>
                <Link className={link} href={`/dashboard/requests/${r.id}`} aria-label={`Request ${r.id}`}>
                  {r.id.slice(0, 8)}
                </Link>
              </td>
              <td className={`${td} font-mono`}>
                <Link className={link} href={`/dashboard/wallets?address=${r.walletAddress}`} title={r.walletAddress}>
                  {shortHex(r.walletAddress)}
                </Link>
              </td>
              <td className={td}>
                <StatusBadge status={r.status} />
              </td>
              <td className={`${td} font-mono`} title={r.transactionHash ?? undefined}>
                {shortHex(r.transactionHash)}
              </td>
              <td className={`${td} tabular-nums`}>{r.relayAttempts}</td>
            </tr>
          ))}
        </DataTable>
      )}

      <nav aria-label="Pages" className="flex gap-3">
        {page.newerCursor ? (
          <Link className={secondaryButton} href={requestListHref(query, { before: page.newerCursor })} rel="prev">
            ← Newer
          </Link>
        ) : (
          <span className={`${secondaryButton} opacity-50`} aria-disabled="true">
            ← Newer
          </span>
        )}
        {page.olderCursor ? (
          <Link className={secondaryButton} href={requestListHref(query, { after: page.olderCursor })} rel="next">
            Older →
          </Link>
        ) : (
          <span className={`${secondaryButton} opacity-50`} aria-disabled="true">
            Older →
          </span>
        )}
      </nav>
    </div>
  );
}
