import { headers } from "next/headers";
import type { ReactNode } from "react";
import { isDatabaseOutage, isDatabaseOverloaded } from "@/db/unavailable";
import { REQUEST_ID_HEADER } from "@/lib/http/request-id";
import { UNAVAILABLE_RETRY_AFTER_SECONDS } from "@/lib/http/route";
import { createLogger } from "@/lib/log";
import { card } from "../../_components/styles";
import { AutoRefresh } from "./auto-refresh";

/**
 * The dashboard's pages during a database outage. The JSON API answers one with `503 unavailable` and Retry-After
 * (decisions.md, "Wire format": "While PostgreSQL cannot be reached, every endpoint that needs it answers 503 ...
 * (never a 500)"); a page cannot:
 * Next 16 lets a server component choose its status only through notFound(), forbidden(), unauthorized() and
 * redirect() ("The HTTP contract" in Next's streaming guide), so the page answers 200 with this notice in the
 * dashboard's frame, and re-renders itself until the database answers again. docs/ui.md says so.
 */

const logger = createLogger({ component: "dashboard" });

/**
 * A database too busy to answer in time (statements cancelled by their timeout) is told apart from one that cannot
 * be reached, and re-read less often: the page's own reads are what it is too busy for.
 */
const BUSY_REFRESH_SECONDS = 30;

export function DatabaseOutageNotice({ busy = false }: { busy?: boolean }) {
  return (
    <section aria-labelledby="database-outage-title" className={`${card} max-w-2xl space-y-3`}>
      <h1 id="database-outage-title" className="text-2xl font-semibold text-slate-900">
        {busy ? "The database is too busy to answer" : "The database is not reachable"}
      </h1>
      <p role="status" className="text-slate-800">
        {busy
          ? `The database is too busy to answer this page in time; it will be tried again in ${BUSY_REFRESH_SECONDS} seconds.`
          : "The database is not reachable right now; this page will work again by itself when it is back. Try again in a few seconds."}
      </p>
      <AutoRefresh seconds={busy ? BUSY_REFRESH_SECONDS : UNAVAILABLE_RETRY_AFTER_SECONDS} />
    </section>
  );
}

/**
 * A dashboard page that renders DatabaseOutageNotice instead of failing when its reads meet a database outage
 * (isDatabaseOutage, the API's own definition). Any other error is rethrown: a bug still surfaces as an error.
 * Only the page's own reads are covered: its children must be plain components over what it read.
 */
export function withDatabaseOutageNotice<Props>(page: (props: Props) => Promise<ReactNode>): (props: Props) => Promise<ReactNode> {
  return async function PageOrOutageNotice(props: Props): Promise<ReactNode> {
    try {
      return await page(props);
    } catch (error) {
      if (!isDatabaseOutage(error)) throw error;
      const requestId = (await headers()).get(REQUEST_ID_HEADER);
      logger.warn("page rendered during a database outage: notice shown", { requestId, error });
      return <DatabaseOutageNotice busy={isDatabaseOverloaded(error)} />;
    }
  };
}
