/**
 * The map of the sponsorship rules (decisions.md): every rule by name, with the place it runs. Creation's rules
 * run inside PostgreSQL in one round trip (that is what made creation fast), so their one source is SQL; this map is
 * where a reader starts. Each `where` is a path (and, for SQL, the comment that opens the rule's block).
 */
export type SponsorshipRule = { rule: string; decisions: string; where: string };

/** POST /sponsorship/request, in the order of checks (decisions.md, "Order of checks at creation"). */
export const CREATION_RULES: readonly SponsorshipRule[] = [
  { rule: "body validation", decisions: "POST /sponsorship/request", where: "lib/sponsorship/schemas.ts (the route parses the body)" },
  { rule: "pause", decisions: "Pause", where: "db/functions/create_sponsorship_request.sql (-- Pause); set by db/queries/controls.ts" },
  { rule: "administrator IP block", decisions: "Administrator IP blocks", where: "db/functions/client_ip_blocked.sql, asked by create_sponsorship_request" },
  {
    rule: "global budget",
    decisions: "Global budget",
    where: "db/functions/sponsorship_budget.sql (sponsorship_budget_refusal), asked by create_sponsorship_request",
  },
  { rule: "client identity", decisions: "Client identity for limits", where: "lib/sponsorship/client-identity.ts (computed before the call)" },
  {
    rule: "IP block / limit",
    decisions: "Rate limits and blocks",
    where: "db/functions/create_sponsorship_request.sql (-- IP block / limit); window: lib/sponsorship/rate-limits.ts",
  },
  { rule: "wallet registered", decisions: "POST /sponsorship/request", where: "db/functions/create_sponsorship_request.sql (-- Wallet registered)" },
  { rule: "replay", decisions: "Replay", where: "lib/sponsorship/replay.ts -> db/functions/create_sponsorship_request.sql (-- Replay)" },
  {
    rule: "wallet block / limit",
    decisions: "Rate limits and blocks",
    where: "db/functions/create_sponsorship_request.sql (-- Wallet block / limit); blocks: lib/sponsorship/blocks.ts",
  },
  {
    rule: "open request",
    decisions: "One open request per wallet",
    where: "db/functions/create_sponsorship_request.sql (-- One open request per wallet) and the partial unique index (db/schema.ts)",
  },
  {
    rule: "already sponsored",
    decisions: "Already sponsored",
    where:
      "db/functions/create_sponsorship_request.sql (-- Already sponsored); the registry's mirror: worker/registry-index.ts; lib/sponsorship/eligibility.ts",
  },
  {
    rule: "counting",
    decisions: "Every validated request counts",
    where: "db/functions/create_sponsorship_request.sql (hits inserted with the request, in one transaction)",
  },
];

/** The rules that run elsewhere than creation. */
export const OTHER_RULES: readonly SponsorshipRule[] = [
  {
    rule: "registration limit",
    decisions: "POST /wallets/register",
    where: "lib/sponsorship/wallets.ts -> db/functions/register_wallet.sql (-- Registration limit), after (-- Administrator IP blocks)",
  },
  { rule: "review (blocked, sponsored on-chain, payment refused)", decisions: "Pipeline; Wallets that cannot be paid", where: "worker/stages/review.ts" },
  { rule: "relay (pause, treasury, fee ceiling)", decisions: "Pipeline; Pause; Fee ceiling", where: "worker/stages/relay.ts" },
  {
    rule: "confirm, replace, fail after MAX_RELAY_ATTEMPTS",
    decisions: "Pipeline",
    where: "worker/stages/confirm/settle.ts, worker/stages/confirm/replace.ts",
  },
  {
    rule: "IP retention (IP_RETENTION_DAYS): ended requests, sessions and actions lose IP and User-Agent, ended IP blocks go",
    decisions: "Privacy",
    where: "db/queries/ip-retention.ts, run by server.ts on its pruning timer",
  },
  {
    rule: "legal status transitions and the audit trail",
    decisions: "Statuses",
    where: "db/migrations/0001_status-triggers.sql (transition guards), db/functions/sponsorship_requests_audit.sql (audit trail)",
  },
];
