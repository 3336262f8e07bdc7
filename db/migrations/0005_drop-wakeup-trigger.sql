-- Wake-ups move out of the creation transaction (db/queries/wakeup.ts): a NOTIFY inside a transaction takes a
-- database-wide lock until its commit is flushed, so the per-row trigger of 0003 serialised every concurrent
-- creation's commit. The API now sends a coalesced NOTIFY on 'sponsorship_wakeup' after the commit.
DROP TRIGGER IF EXISTS sponsorship_requests_notify_wakeup ON sponsorship_requests;
--> statement-breakpoint
DROP FUNCTION IF EXISTS sponsorship_requests_notify_wakeup();
