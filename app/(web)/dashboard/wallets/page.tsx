import type { Metadata } from "next";
import Link from "next/link";
import { currentAdminSession } from "@/lib/admin/request-context";
import { lookUpWallet } from "@/lib/admin/wallets";
import { appDb } from "@/lib/http/app-context";
import { StatusBadge } from "../../_components/status-badge";
import { link } from "../../_components/styles";
import { formatDateTime } from "../../_lib/format";
import { SignInForm } from "../_components/sign-in-form";
import { DataTable, Notice, SearchField, Section, td } from "../_components/ui";
import { WalletBlockForm } from "../_components/wallet-forms";
import { withDatabaseOutageNotice } from "../_components/database-outage";

export const metadata: Metadata = { title: "Wallets" };

export default withDatabaseOutageNotice(WalletsPage);

async function WalletsPage({ searchParams }: { searchParams: Promise<Record<string, string | string[] | undefined>> }) {
  const session = await currentAdminSession();
  if (!session) return <SignInForm returnTo="/dashboard/wallets" />;
  const raw = (await searchParams).address;
  const address = (typeof raw === "string" ? raw : "").trim();
  const view = address ? await lookUpWallet(appDb(), address) : null;
  const invalid = address !== "" && !view;

  return (
    <div className="space-y-6">
      <h1 className="text-2xl font-semibold text-slate-900">Wallets</h1>

      <SearchField
        action="/dashboard/wallets"
        formLabel="Look up a wallet"
        id="wallet-address"
        name="address"
        label="Wallet address"
        value={address}
        placeholder="0x…"
        invalid={invalid}
        hintId="wallet-address-hint"
        button="Look up"
      />
      <p id="wallet-address-hint" className={`-mt-4 text-sm ${invalid ? "font-medium text-red-800" : "text-slate-700"}`}>
        {invalid ? "That is not a wallet address: 0x followed by 40 hex characters." : "Any wallet, registered or not: a wallet can be blocked before it asks."}
      </p>

      {view && (
        <>
          <div className="grid grid-cols-1 gap-6 lg:grid-cols-2">
            <Section title="Wallet" id="wallet-summary">
              <dl className="grid grid-cols-1 gap-x-4 gap-y-2 text-sm sm:grid-cols-[max-content_1fr]">
                <dt className="font-medium text-slate-900">Address</dt>
                <dd className="font-mono break-all">{view.address}</dd>
                <dt className="font-medium text-slate-900">State</dt>
                <dd data-testid="wallet-state" className={`font-semibold ${view.isBlocked ? "text-red-800" : "text-green-800"}`}>
                  {view.isBlocked ? "Blocked" : "Not blocked"}
                </dd>
                {view.activeBlocks.map((b) => (
                  <div key={b.id} className="contents">
                    <dt className="font-medium text-slate-900">{b.kind === "admin" ? "Blocked by an administrator" : "Automatic block"}</dt>
                    <dd>
                      {b.reason}
                      {b.expiresAt ? ` (until ${formatDateTime(b.expiresAt)})` : ""}
                    </dd>
                  </div>
                ))}
                <dt className="font-medium text-slate-900">Registered</dt>
                <dd>{view.wallet ? formatDateTime(view.wallet.firstSeenAt) : "not registered"}</dd>
                {view.wallet && (
                  <>
                    <dt className="font-medium text-slate-900">Last seen</dt>
                    <dd>{formatDateTime(view.wallet.lastSeenAt)}</dd>
                    <dt className="font-medium text-slate-900">Requests</dt>
                    <dd>{view.wallet.sponsorshipCount}</dd>
                  </>
                )}
              </dl>
            </Section>
            <Section title="Block" id="wallet-block">
              <WalletBlockForm address={view.address} adminBlocked={view.activeBlocks.some((b) => b.kind === "admin")} blocked={view.isBlocked} />
            </Section>
          </div>

          <Section title="Block history" id="block-history">
            {view.blockHistory.length === 0 ? (
              <p className="text-sm text-slate-700">This wallet has never been blocked.</p>
            ) : (
              <DataTable label="Block history" columns={["Blocked (UTC)", "Kind", "Reason", "By", "Ended", "Lift reason"]}>
                {view.blockHistory.map((b) => (
                  <tr key={b.id}>
                    <td className={`${td} whitespace-nowrap`}>{formatDateTime(b.createdAt).replace(" UTC", "")}</td>
                    <td className={td}>{b.kind === "admin" ? "administrator" : "automatic"}</td>
                    <td className={td}>{b.reason}</td>
                    <td className={`${td} font-mono`}>{b.createdBy}</td>
                    <td className={`${td} whitespace-nowrap`}>
                      {b.liftedAt
                        ? `lifted ${formatDateTime(b.liftedAt)}`
                        : view.activeBlocks.some((active) => active.id === b.id)
                          ? "active"
                          : `expired ${formatDateTime(b.expiresAt)}`}
                    </td>
                    <td className={td}>{b.liftReason ?? "—"}</td>
                  </tr>
                ))}
              </DataTable>
            )}
          </Section>

          <div className="grid grid-cols-1 gap-6 lg:grid-cols-2">
            <Section title="Requests" id="wallet-requests">
              {view.requests.length === 0 ? (
                <p className="text-sm text-slate-700">No request yet.</p>
              ) : (
                <DataTable label="Requests of this wallet" columns={["Requested (UTC)", "Request", "Status"]}>
                  {view.requests.map((r) => (
                    <tr key={r.id}>
                      <td className={`${td} whitespace-nowrap`}>{formatDateTime(r.requestedAt).replace(" UTC", "")}</td>
                      <td className={`${td} font-mono`}>
                        <Link className={link} href={`/dashboard/requests/${r.id}`} aria-label={`Request ${r.id}`}>
                          {r.id.slice(0, 8)}
                        </Link>
                      </td>
                      <td className={td}>
                        <StatusBadge status={r.status} />
                      </td>
                    </tr>
                  ))}
                </DataTable>
              )}
            </Section>
            <Section title="Administrator actions" id="wallet-actions">
              {view.actions.length === 0 ? (
                <p className="text-sm text-slate-700">None.</p>
              ) : (
                <ul className="space-y-2 text-sm">
                  {view.actions.map((a) => (
                    <li key={a.id}>
                      <span className="tabular-nums text-slate-700">{formatDateTime(a.createdAt)}</span> ·{" "}
                      <span className="font-medium text-slate-900">{a.action.replaceAll("_", " ")}</span>
                      {a.reason ? ` — ${a.reason}` : ""} <span className="text-slate-700">(session {a.sessionId?.slice(0, 8) ?? "—"})</span>
                    </li>
                  ))}
                </ul>
              )}
            </Section>
          </div>
        </>
      )}
      {!address && <Notice>Enter an address to see its state, block it or lift a block, and its history.</Notice>}
    </div>
  );
}
