-- IP_RETENTION_DAYS (db/queries/ip-retention.ts): the rows that still hold an IP address or a User-Agent, oldest first,
-- so a retention pass reads the rows it changes and not the history already cleared. Built in the migration's
-- transaction (drizzle's migrator runs them in one, so not CONCURRENTLY): writes to each table wait while its index is
-- built, once, when the release's `npm run db:migrate` runs.
CREATE INDEX "admin_actions_personal_data_idx" ON "admin_actions" USING btree ("created_at") WHERE "admin_actions"."ip_address" IS NOT NULL OR "admin_actions"."details" ? 'userAgent';--> statement-breakpoint
CREATE INDEX "sponsorship_requests_personal_data_idx" ON "sponsorship_requests" USING btree ("requested_at") WHERE "sponsorship_requests"."ip_address" IS NOT NULL OR "sponsorship_requests"."user_agent" IS NOT NULL OR "sponsorship_requests"."client_key" IS NOT NULL;