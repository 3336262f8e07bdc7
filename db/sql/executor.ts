import type { Database } from "@/db/client";

/** A transaction opened with `db.transaction(...)`. */
export type Transaction = Parameters<Parameters<Database["transaction"]>[0]>[0];

/** Where a query runs: the pool or an open transaction. */
export type Executor = Database | Transaction;
