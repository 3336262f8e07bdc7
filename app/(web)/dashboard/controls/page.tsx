import type { Metadata } from "next";
import { listActiveIpBlocks, readServiceState } from "@/db/queries/controls";
import { budgetOverview } from "@/lib/admin/controls";
import { currentAdminSession } from "@/lib/admin/request-context";
import { appConfig, appDb } from "@/lib/http/app-context";
import { parseCidr } from "@/lib/sponsorship/client-identity";
import { formatDateTime } from "../../_lib/format";
import { SignInForm } from "../_components/sign-in-form";
import { IpBlockForm, IpBlocksPanel, LiftIpBlockButton, PauseForm } from "../_components/control-forms";
import { DataTable, Notice, SearchField, Section, td } from "../_components/ui";
import { withDatabaseOutageNotice } from "../_components/database-outage";

export const metadata: Metadata = { title: "Controls" };

export default withDatabaseOutageNotice(ControlsPage);

/** The operator's brakes (decisions.md, "On the open internet"): the pause, the global budget, IP blocks. */
async function ControlsPage({ searchParams }: { searchParams: Promise<Record<string, string | string[] | undefined>> }) {
  const session = await currentAdminSession();
  if (!session) return <SignInForm returnTo="/dashboard/controls" />;
  const db = appDb();
  const config = appConfig();
  // Only the newest blocks are listed (IP_BLOCKS_SHOWN, 500); an address or prefix finds the blocks that hold it (or lie
  // within it), older ones too, so any block can be lifted.
  const raw = (await searchParams).overlapping;
  const lookup = (typeof raw === "string" ? raw : "").trim();
  const overlapping = lookup === "" ? undefined : parseCidr(lookup);
  const invalid = lookup !== "" && overlapping === undefined;
  const [state, budget, { items: blocks, total }] = await Promise.all([
    readServiceState(db),
    budgetOverview(db, config),
    listActiveIpBlocks(db, { overlapping }),
  ]);

  return (
    <div className="space-y-6">
      <h1 className="text-2xl font-semibold text-slate-900">Controls</h1>
      <div className="grid grid-cols-1 gap-6 lg:grid-cols-2">
        <Section title="Sponsorships" id="pause">
          {state.paused ? (
            <Notice tone="warning">
              Paused since {formatDateTime(state.pausedAt)}: {state.pauseReason}. New requests are refused (503) and no new relay is sent; relays already sent
              are still confirmed.
            </Notice>
          ) : (
            <p className="mb-3 text-sm text-slate-800">Running: requests are created and relayed.</p>
          )}
          <PauseForm paused={state.paused} />
        </Section>
        <Section title="Budget" id="budget">
          {budget.length === 0 ? (
            <p className="text-sm text-slate-800">
              No budget is set (SPONSOR_BUDGET_PER_HOUR and SPONSOR_BUDGET_PER_DAY are 0): only the per-client limits cap what the faucet hands out.
            </p>
          ) : (
            <DataTable label="Budget per window" columns={["Window", "Budget", "Used", "Left"]}>
              {budget.map((b) => (
                <tr key={b.window}>
                  <th scope="row" className={td}>
                    Rolling {b.window}
                  </th>
                  <td className={td}>{b.limit.toLocaleString("en")}</td>
                  <td className={td}>{b.used.toLocaleString("en")}</td>
                  <td className={`${td} ${b.left === 0 ? "font-semibold text-red-800" : ""}`}>
                    {b.left === 0 ? "0 (exhausted)" : b.left.toLocaleString("en")}
                  </td>
                </tr>
              ))}
            </DataTable>
          )}
        </Section>
      </div>
      <Section title="IP blocks" id="ip-blocks" focusableHeading>
        <SearchField
          action="/dashboard/controls#ip-blocks"
          formLabel="Find IP blocks"
          id="ip-blocks-lookup"
          name="overlapping"
          label="Find blocks for an IP or range"
          value={lookup}
          placeholder="198.51.100.7 or 2001:db8::/48"
          invalid={invalid}
          hintId="ip-blocks-lookup-hint"
          button="Find"
          className="mb-1"
        />
        <p id="ip-blocks-lookup-hint" data-testid="ip-blocks-shown" className={`mb-3 text-sm ${invalid ? "font-medium text-red-800" : "text-slate-700"}`}>
          {invalid
            ? "That is not an IPv4 or IPv6 address or prefix."
            : overlapping
              ? `${total.toLocaleString("en")} active ${total === 1 ? "block holds or lies" : "blocks hold or lie"} within ${overlapping}${total > blocks.length ? `; the newest ${blocks.length} are shown` : ""}.`
              : total > blocks.length
                ? `The newest ${blocks.length} of ${total.toLocaleString("en")} active blocks are shown: find an older one by its address or prefix.`
                : `Blocks that hold an address, or lie within a prefix, are found by it (all ${total.toLocaleString("en")} active are shown).`}
        </p>
        <IpBlocksPanel headingId="ip-blocks" count={blocks.length}>
          {blocks.length === 0 ? (
            <p className="mb-3 text-sm text-slate-800">
              {overlapping ? "No active block holds this address or lies within it." : "No address or range is blocked."}
            </p>
          ) : (
            <div className="mb-4">
              <DataTable
                label="Active IP blocks"
                columns={[
                  "Address or prefix",
                  "Reason",
                  "Since",
                  <span key="actions" className="sr-only">
                    Actions
                  </span>,
                ]}
              >
                {blocks.map((b, index) => (
                  <tr key={b.id}>
                    <td className={`${td} font-mono`}>{b.cidr}</td>
                    <td className={td}>{b.reason}</td>
                    <td className={td}>{formatDateTime(b.createdAt)}</td>
                    <td className={td}>
                      <LiftIpBlockButton id={b.id} cidr={b.cidr} index={index} />
                    </td>
                  </tr>
                ))}
              </DataTable>
            </div>
          )}
          <IpBlockForm />
        </IpBlocksPanel>
      </Section>
    </div>
  );
}
