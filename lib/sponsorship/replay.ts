/**
 * Replay (decisions.md, POST /sponsorship/request: "Replay"): the same wallet from the same client identity within
 * REPLAY_WINDOW_MS of a request that was created answers `200` with that request again, and counts nothing (no
 * rate-limit hit, no budget). Checked after "wallet registered" and before the wallet's block/limit.
 *
 * Where it runs: inside PostgreSQL, in `create_sponsorship_request` (db/functions/create_sponsorship_request.sql,
 * the block commented "Replay"), under the wallet's advisory lock, so two concurrent identical requests create one
 * request and replay it to the other. This file gives the window's start; create-request.ts passes it in.
 */
export function replayWindowStart(now: Date, replayWindowMs: number): Date {
  return new Date(now.getTime() - replayWindowMs);
}
