-- IP_RETENTION_DAYS: a request that ended longer ago than the retention loses its IP address (with its client key and
-- User-Agent), so the column may be NULL. Only the constraint goes: no rewrite, the lock is held for an instant.
ALTER TABLE "sponsorship_requests" ALTER COLUMN "ip_address" DROP NOT NULL;
