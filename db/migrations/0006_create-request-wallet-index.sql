-- This migration once restated migration 0004's create_sponsorship_request whole, to read the wallet's requests
-- once through the wallet's index (the replay, open-request and completed-request checks). The function's one
-- current source is db/functions/create_sponsorship_request.sql, which db/migrate.ts applies after every migration,
-- so this file no longer repeats it: a database migrated from scratch ends with the same function either way, and
-- one that applied the old text keeps it only until the functions are applied at the same start-up.
SELECT 1;
