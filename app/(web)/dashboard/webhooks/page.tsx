import type { Metadata } from "next";
import { webhooksOverview } from "@/lib/admin/webhooks";
import { currentAdminSession } from "@/lib/admin/request-context";
import { appDb } from "@/lib/http/app-context";
import { redactedUrl } from "@/lib/redact-url";
import { formatDateTime } from "../../_lib/format";
import { SignInForm } from "../_components/sign-in-form";
import { TestWebhookButton } from "../_components/webhook-forms";
import { DataTable, Notice, Section, td } from "../_components/ui";
import { withDatabaseOutageNotice } from "../_components/database-outage";

export const metadata: Metadata = { title: "Webhooks" };

export default withDatabaseOutageNotice(WebhooksPage);

/** Webhooks (decisions.md "Operators are told"; docs/webhooks.md): recent deliveries per endpoint, a test event. */
async function WebhooksPage() {
  const session = await currentAdminSession();
  if (!session) return <SignInForm returnTo="/dashboard/webhooks" />;
  const endpoints = await webhooksOverview(appDb());
  const active = endpoints.filter((e) => e.active);
  // Its origin only, as the logs show it: a path or query may hold the endpoint's token (lib/redact-url.ts). Two
  // endpoints on one origin are told apart by their place in the list.
  const redacted = endpoints.map((e) => redactedUrl(e.url));
  const shownAs = (url: string, i: number) => (redacted.filter((r) => r === redacted[i]).length > 1 ? `${redacted[i]} (endpoint ${i + 1})` : redacted[i]!);

  return (
    <div className="space-y-6">
      <h1 className="text-2xl font-semibold text-slate-900">Webhooks</h1>
      <Section title="Endpoints" id="endpoints">
        {active.length === 0 ? (
          <p className="mb-3 text-sm text-slate-800">
            No endpoint is configured: set WEBHOOK_URLS and WEBHOOK_SECRET (docs/webhooks.md) and restart. Request transitions and alerts are then signed and
            delivered to each endpoint, retried for 24 hours.
          </p>
        ) : (
          <p className="mb-3 text-sm text-slate-800">
            {active.length} endpoint{active.length === 1 ? " receives" : "s receive"} every event, signed with WEBHOOK_SECRET. A test event has the type
            webhook.test.
          </p>
        )}
        <TestWebhookButton disabled={active.length === 0} />
      </Section>
      {endpoints.map((endpoint, i) => (
        // Keyed by place, never by URL: a server component's key travels in the page's RSC payload, token and all.
        <Section key={i} title={shownAs(endpoint.url, i)} id={`endpoint-${i}`}>
          {!endpoint.active && (
            <Notice tone="info">
              No longer in WEBHOOK_URLS: it receives no new events; what is still waiting for it is held, and given up 24 h after the removal unless the
              endpoint is added back.
            </Notice>
          )}
          <p className="mb-3 text-sm text-slate-800">
            {endpoint.pending.toLocaleString("en")} waiting, {endpoint.failed.toLocaleString("en")} given up.
          </p>
          {endpoint.recent.length === 0 ? (
            <p className="text-sm text-slate-800">No delivery yet.</p>
          ) : (
            <DataTable
              label={`Recent deliveries to ${shownAs(endpoint.url, i)}`}
              columns={["Event", "Status", "Attempts", "Next retry", "Last error", "Created"]}
            >
              {endpoint.recent.map((d) => (
                <tr key={d.id}>
                  <th scope="row" className={td}>
                    <span className="font-mono">{d.type}</span>
                    <span className="block font-mono text-xs text-slate-700">{d.eventId}</span>
                  </th>
                  <td className={`${td} ${d.status === "failed" ? "font-semibold text-red-800" : ""}`}>
                    {d.status === "delivered" ? `delivered ${formatDateTime(d.deliveredAt)}` : d.status === "failed" ? "given up" : "waiting"}
                  </td>
                  <td className={td}>{d.attempts}</td>
                  <td className={td}>{d.nextAttemptAt ? formatDateTime(d.nextAttemptAt) : "—"}</td>
                  <td className={td}>{d.lastError ?? "—"}</td>
                  <td className={td}>{formatDateTime(d.createdAt)}</td>
                </tr>
              ))}
            </DataTable>
          )}
        </Section>
      ))}
    </div>
  );
}
