import { BaseError, HttpRequestError, RpcRequestError, TimeoutError } from "viem";

/**
 * Which of several RPC_URL endpoints a read asks, in which order (decisions.md "Several RPC endpoints": reads fail
 * over to the next when one does not answer). Each endpoint has a circuit breaker:
 * - an endpoint that was not reached (refused, reset, an HTTP 5xx or 429, no answer within the timeout) is not asked
 *   by reads for a cool-off, COOL_OFF_MS doubling with each failure in a row up to MAX_COOL_OFF_MS; reads go to the
 *   others meanwhile. Only while every endpoint is cooling off are they asked, in the order their cool-offs end.
 *   Without it, an endpoint that accepts connections and never answers cost every read its whole timeout before the
 *   next endpoint was asked;
 * - after the cool-off it is asked again ("re-probed"): by the next read that gets to it (`reprobe: "reads"`, the
 *   web server), or only by a survey (`reprobe: "survey"`, the worker: `surveyTargets`, once per maintenance check),
 *   so that no read of the worker waits on an endpoint that may still be silent. Any answer closes the breaker;
 * - an endpoint whose head is more than LAGGING_BLOCKS behind the best head a survey has seen (`noteHeads`), and one
 *   the best head had already passed LAGGING_MS before (HeadTimeline), is not asked by reads until it catches up: a
 *   node that stopped importing blocks answers every call, with the chain as it was (receipts null, nonces unused),
 *   and asked first it blinded the worker;
 * - once the chain id is known (`useChain`: the worker's, read at start-up), an endpoint is asked by reads and its
 *   head counts only after it answered that chain id (`noteChainId`: at start-up, by every survey, and with each read
 *   that decides a nonce: worker/chain.ts); one that answers another is left aside (`otherChain`) until it answers
 *   this one again: decisions.md "Several RPC endpoints" lists endpoints of one chain, and a mainnet URL beside a
 *   testnet's, silent at start-up, would otherwise have served reads and, with its higher head, left the right
 *   endpoints behind; an endpoint that changes networks later (a provider's URL moved to another chain, a node
 *   restarted on another genesis) would have had its nonces move the relayers' next nonce on, and its "nonce used"
 *   taken for a dropped transaction.
 * A single endpoint is always asked, but while it answers another chain id: there is nothing to fail over to, and
 * reads then fail as in an outage (NoEndpointOfChainError).
 */

/** Blocks an endpoint may be behind the best head seen before reads leave it aside (docs/deployment.md). */
export const LAGGING_BLOCKS = 3n;
/**
 * And how long before the best head must have passed an endpoint's head for reads to leave it aside
 * (docs/deployment.md). Blocks alone measured time in the chain's block interval: 36 s on a 12-s chain, but 750 ms on
 * a chain of 0.25-s blocks, where a healthy node a propagation late flapped between behind and caught up (a log line
 * each, and reads moving). 3 s is LAGGING_BLOCKS blocks of the local chain (1 s, LOCAL_BLOCK_TIME), so on chains of
 * 1 s or more per block the blocks decide as before, and several times the ordinary propagation of a block between
 * nodes (well under a second); it stays short against RELAY_TIMEOUT_MS (60 s), which a stale endpoint asked first had
 * every relay wait out before a replacement.
 */
export const LAGGING_MS = 3_000;
/**
 * How long an endpoint's answer of the chain's id vouches for its next read (EndpointBreaker.chainIdFresh): a read
 * whose nonces decide asks the chain id with them unless the maintenance check that just ran (surveys come first in
 * it) had it answered this recently. About a check's own span: an idle worker's check would otherwise ask it twice.
 */
export const CHAIN_ID_FRESH_MS = 1_000;
/** How long the best head seen is kept while no endpoint answers near it (EndpointBreaker.noteHeads). */
export const BEST_HEAD_KEPT_MS = 60_000;
/** The first cool-off of an endpoint that was not reached; it doubles with each failure in a row. */
export const COOL_OFF_MS = 10_000;
/** The longest cool-off: an endpoint back in service is used again within this (plus one survey) at the latest. */
export const MAX_COOL_OFF_MS = 60_000;

/** A survey gave up waiting for this endpoint: another one answered SURVEY_GRACE_MS before (endpointNotReached). */
export class EndpointSilentError extends Error {
  override name = "EndpointSilentError";
}

/**
 * No endpoint is known to serve the chain now: each answers another chain id. Counted as not reached (the worker waits
 * as in an outage, and its stages consume no attempt) until a survey finds one serving it again.
 */
export class NoEndpointOfChainError extends Error {
  override name = "NoEndpointOfChainError";
}

/**
 * An endpoint answered, but not with what the JSON-RPC method returns (a `null` head, a balance that is no hex
 * number: a broken proxy or gateway). Counted as not reached (endpointNotReached): reads fail over to the next
 * endpoint, and with one endpoint the worker waits as in an outage instead of failing its stages on the answer.
 */
export class MalformedAnswerError extends Error {
  override name = "MalformedAnswerError";
}

/** The text of a viem error worth keeping: the node's own words when it gave some. */
export function rpcErrorMessage(error: unknown): string {
  if (error instanceof BaseError) {
    const rpc = error.walk((e) => e instanceof RpcRequestError);
    if (rpc instanceof RpcRequestError) return rpc.details || rpc.shortMessage;
    return error.details || error.shortMessage;
  }
  return error instanceof Error ? error.message : String(error);
}

/** True when the error means "the endpoint was not reached / did not answer", not "the node said no". */
export function endpointNotReached(error: unknown): boolean {
  const notReached = (e: unknown) => e instanceof EndpointSilentError || e instanceof MalformedAnswerError || e instanceof NoEndpointOfChainError;
  if (notReached(error)) return true;
  // viem wraps what a transport threw (UnknownRpcError, CallExecutionError of a contract read): its cause says.
  if (error instanceof BaseError && error.walk(notReached) !== null) return true;
  if (!(error instanceof BaseError)) {
    return error instanceof Error && /fetch failed|ECONNREFUSED|ECONNRESET|ETIMEDOUT|socket hang up|aborted/i.test(error.message);
  }
  if (error.walk((e) => e instanceof TimeoutError) instanceof TimeoutError) return true;
  const http = error.walk((e) => e instanceof HttpRequestError);
  if (http instanceof HttpRequestError) return http.status === undefined || http.status >= 500 || http.status === 429;
  const rpc = error.walk((e) => e instanceof RpcRequestError);
  if (rpc instanceof RpcRequestError) return rpc.status !== undefined && (rpc.status >= 500 || rpc.status === 429);
  return false;
}

/** One RPC endpoint as this process last found it (the worker's heartbeat shows it: `chain.endpoints`). */
export type EndpointState = {
  url: string;
  /** The last call to it reached it. */
  reachable: boolean;
  downSince: Date | undefined;
  lastError: string | undefined;
  /**
   * Cool-offs in a row (0: the last call reached it). A failure of a call sent while it cools off (a broadcast, a
   * call that was already on its way) is the same episode and does not lengthen it.
   */
  failures: number;
  /** performance.now() until which reads leave it aside (0: none). */
  coolingOffUntilMs: number;
  /** performance.now() until which a re-probe sent after its cool-off is awaited (others leave it aside meanwhile). */
  probingUntilMs: number;
  /** Its head at the last survey that it answered (worker), undefined before. */
  head: bigint | undefined;
  /**
   * More than LAGGING_BLOCKS behind the best head seen, at a head the best head had passed LAGGING_MS before: reads
   * leave it aside until it catches up.
   */
  behind: boolean;
  /** The chain id it answered last (undefined until it has: silent at start-up, not reached since). */
  chainId: number | undefined;
  /** performance.now() of that answer (0: none). */
  chainIdAtMs: number;
  /**
   * Its last chain id answered is not the service's (`useChain`): reads and broadcasts leave it aside and its head is
   * ignored until it answers the service's again (surveys ask it its chain id alone).
   */
  otherChain: boolean;
};

export type EndpointChange =
  | { kind: "cooling_off"; coolOffMs: number; error: string }
  | { kind: "answers_again"; downForMs: number }
  | { kind: "behind"; head: bigint; bestHead: bigint }
  | { kind: "caught_up"; head: bigint; bestHead: bigint }
  | { kind: "other_chain"; chainId: number; expectedChainId: number }
  | { kind: "serves_chain"; chainId: number };

export type EndpointBreakerOptions = {
  /** Who asks an endpoint again once its cool-off has ended: the next read that gets to it, or only a survey. */
  reprobe: "reads" | "survey";
  /** Told of each change of an endpoint's state (index from 0), once per change. */
  onChange?: (index: number, endpoint: EndpointState, change: EndpointChange) => void;
  /** How long a re-probing read keeps other reads away from it: the transport's timeout. Default 10,000 ms. */
  probeMs?: number;
};

/**
 * The best head over time, to tell how long ago the chain passed a head: the heads a survey showed rising, each with
 * when it was first and last seen, kept back to the newest one first seen at least LAGGING_MS ago. No extra call: the
 * surveys' own heads. A block interval estimated from the best head's rise would need care where this needs none: 5
 * blocks mined in one instant (anvil_mine, a burst after a stall) read as a 0.2-s chain for a while, a stalled chain
 * has no interval, the first survey none yet, and irregular blocks only an average; here the question is asked
 * directly, of each head.
 */
export class HeadTimeline {
  private seen: { head: bigint; atMs: number; lastMs: number }[] = [];

  /** The best head at `now`. One below the last seen (a reorg deeper than LAGGING_BLOCKS, a reset chain) starts over. */
  note(best: bigint, now: number): void {
    let last = this.seen.at(-1);
    if (last !== undefined && best < last.head) {
      this.seen = [];
      last = undefined;
    }
    if (last?.head === best) last.lastMs = now;
    else this.seen.push({ head: best, atMs: now, lastMs: now });
    this.forget(now);
  }

  /**
   * True when `head` is more than LAGGING_BLOCKS below `best` and the chain passed it (the block after it appeared)
   * LAGGING_MS or more before `now`. When that was is known to the surveys' precision: between the last survey that
   * still saw the best head at or below `head` and the first that saw it above, where it is taken to have passed in
   * proportion to the blocks between the two. So an idle worker's surveys 30 s apart judge a head the chain passed
   * early in the gap behind at once, as blocks alone did, and a healthy endpoint of a fast chain a block or two late
   * still is not. A head below the oldest one kept was passed before anything kept was seen: LAGGING_MS ago or more,
   * or before the first survey, when LAGGING_BLOCKS alone decides, as it did for every head before.
   */
  isBehind(head: bigint, best: bigint, now: number): boolean {
    if (head + LAGGING_BLOCKS >= best) return false;
    this.forget(now);
    const k = this.seen.findIndex((e) => e.head > head);
    if (k <= 0) return true;
    const before = this.seen[k - 1]!;
    const after = this.seen[k]!;
    const share = Number(head + 1n - before.head) / Number(after.head - before.head);
    const passedAt = before.lastMs + share * (after.atMs - before.lastMs);
    return now - passedAt >= LAGGING_MS;
  }

  /** Keeps the newest head first seen at least LAGGING_MS ago (the best head as of then) and every newer one. */
  private forget(now: number): void {
    while (this.seen.length >= 2 && this.seen[1]!.atMs <= now - LAGGING_MS) this.seen.shift();
  }
}

export function coolOffAfter(failures: number): number {
  return Math.min(MAX_COOL_OFF_MS, COOL_OFF_MS * 2 ** Math.max(0, Math.min(failures - 1, 10)));
}

export class EndpointBreaker {
  readonly endpoints: EndpointState[];
  /** The highest head a survey has seen: what "behind" is measured from. */
  bestHead: bigint | undefined;
  /** The chain the endpoints must serve (`useChain`); undefined: not checked (the web server's reads). */
  chainId: number | undefined;
  /** When the best head rose to what (what "behind by LAGGING_MS" is measured on). */
  private readonly timeline = new HeadTimeline();
  /** performance.now() when an endpoint last answered a head within LAGGING_BLOCKS of bestHead. */
  private bestHeadSeenMs = 0;
  private readonly downSinceMs: number[];

  constructor(
    urls: readonly string[],
    private readonly options: EndpointBreakerOptions,
  ) {
    this.endpoints = urls.map((url) => ({
      url,
      reachable: true,
      downSince: undefined,
      lastError: undefined,
      failures: 0,
      coolingOffUntilMs: 0,
      probingUntilMs: 0,
      head: undefined,
      behind: false,
      chainId: undefined,
      chainIdAtMs: 0,
      otherChain: false,
    }));
    this.downSinceMs = urls.map(() => 0);
  }

  indexOf(url: string): number {
    return this.endpoints.findIndex((e) => e.url === url);
  }

  /**
   * The chain every endpoint must serve (the worker's, once start-up has read it): from now on an endpoint is asked by
   * reads, and its head counts, only once it has answered this chain id (`noteChainId`).
   */
  useChain(chainId: number): void {
    this.chainId = chainId;
    this.endpoints.forEach((e, i) => {
      if (e.chainId !== undefined) this.noteChainId(i, e.chainId);
    });
  }

  /**
   * Endpoint `index` answered eth_chainId `chainId`. Another chain than `useChain`'s leaves it aside (told once per
   * change, `other_chain`): reads and broadcasts no longer ask it, its head is forgotten, and surveys ask it only its
   * chain id, until it answers the service's again (`serves_chain`).
   */
  noteChainId(index: number, chainId: number, now = performance.now()): void {
    const e = this.endpoints[index];
    if (!e) return;
    e.chainId = chainId;
    e.chainIdAtMs = now;
    if (this.chainId === undefined) return;
    const other = chainId !== this.chainId;
    if (other === e.otherChain) return;
    e.otherChain = other;
    e.head = undefined;
    e.behind = false;
    this.options.onChange?.(index, e, other ? { kind: "other_chain", chainId, expectedChainId: this.chainId } : { kind: "serves_chain", chainId });
  }

  /**
   * Whether endpoint `index` answered the chain's id (always true while no chain is set; with one endpoint, unless its
   * last answer was another chain's id: before it has answered any, start-up's read was its own).
   */
  servesChain(index: number): boolean {
    const e = this.endpoints[index];
    if (!e) return false;
    if (this.chainId === undefined) return true;
    return this.endpoints.length === 1 ? !e.otherChain : e.chainId === this.chainId;
  }

  /** Whether endpoint `index` answered the chain's own id less than CHAIN_ID_FRESH_MS ago. */
  chainIdFresh(index: number, now = performance.now()): boolean {
    const e = this.endpoints[index];
    return e !== undefined && this.chainId !== undefined && e.chainId === this.chainId && now - e.chainIdAtMs < CHAIN_ID_FRESH_MS;
  }

  /**
   * By endpoint index, whether reads may ask it and its answer to a broadcast decides: those that answered the chain
   * id; none of another chain, nor one not known yet. While none has answered it yet (a WorkerChain built without
   * start-up's readChainId), those of an unknown chain id: there is nothing surer.
   */
  askable(): boolean[] {
    const serving = this.endpoints.map((_, i) => this.servesChain(i));
    if (serving.some(Boolean)) return serving;
    return this.endpoints.map((e) => !e.otherChain);
  }

  /**
   * Endpoints reads leave out for now because their chain id is not known yet (silent at start-up, not yet reached by
   * a survey): the failover asks one its chain id when every other failed (lib/chain/clients.ts), so an endpoint that
   * came up after start-up still serves reads when the others are down, once it has shown it serves this chain.
   */
  unverified(): number[] {
    const readable = this.askable();
    return this.endpoints.flatMap((e, i) => (!readable[i] && !e.otherChain && e.chainId === undefined ? [i] : []));
  }

  /**
   * The endpoints a read asks, in order: those neither cooling off nor behind, in the configured order (with
   * `reprobe: "reads"`, one whose cool-off has ended among them); then those cooling off, the one whose cool-off ends
   * first first. An endpoint behind is left out while any other is there; one whose chain id is not known yet or is
   * another chain's (`useChain`), always.
   */
  readOrder(now = performance.now()): number[] {
    if (this.endpoints.length === 1) return this.endpoints[0]!.otherChain ? [] : [0];
    const usable: number[] = [];
    const resting: number[] = [];
    const behind: number[] = [];
    const readable = this.askable();
    this.endpoints.forEach((e, i) => {
      if (!readable[i]) return;
      if (e.behind) behind.push(i);
      else if (e.failures === 0 || (this.options.reprobe === "reads" && this.dueForProbe(e, now))) usable.push(i);
      else resting.push(i);
    });
    // Those cooling off after the others, the one whose cool-off ends first first: a read asks them only when every
    // other failed, and still fails over rather than failing (decisions.md: reads fail over to the next).
    resting.sort((a, b) => this.endpoints[a]!.coolingOffUntilMs - this.endpoints[b]!.coolingOffUntilMs);
    if (usable.length > 0 || resting.length > 0) return [...usable, ...resting];
    // Every endpoint behind the best head seen (its endpoint gone since): the freshest first.
    return behind.sort((a, b) => Number((this.endpoints[b]!.head ?? 0n) - (this.endpoints[a]!.head ?? 0n)));
  }

  /**
   * The endpoints a survey asks: every one not cooling off (behind ones included: a survey is how they are seen to
   * catch up, and those of another chain: how they are seen to serve this one again), and those whose cool-off has
   * ended (their re-probe); all of them when every one is cooling off.
   */
  surveyTargets(now = performance.now()): number[] {
    const candidates = this.endpoints.map((_, i) => i);
    const due = candidates.filter((i) => this.endpoints[i]!.failures === 0 || this.dueForProbe(this.endpoints[i]!, now));
    return due.length > 0 ? due : candidates;
  }

  private dueForProbe(e: EndpointState, now: number): boolean {
    return now >= e.coolingOffUntilMs && now >= e.probingUntilMs;
  }

  /** A call is about to be sent to endpoint `index`: a re-probe keeps other reads away until it is answered. */
  asking(index: number, now = performance.now()): void {
    const e = this.endpoints[index];
    if (e && e.failures > 0 && this.dueForProbe(e, now)) e.probingUntilMs = now + (this.options.probeMs ?? 10_000);
  }

  /** The outcome of a call to endpoint `index`: an error that says it was not reached, or anything else (it was). */
  noteAnswer(index: number, error?: unknown, now = performance.now()): void {
    const e = this.endpoints[index];
    if (!e) return;
    if (error !== undefined && endpointNotReached(error)) {
      e.lastError = rpcErrorMessage(error).slice(0, 300);
      e.probingUntilMs = 0;
      if (e.failures > 0 && now < e.coolingOffUntilMs) return;
      e.failures++;
      const coolOffMs = coolOffAfter(e.failures);
      e.coolingOffUntilMs = now + coolOffMs;
      if (e.reachable) {
        e.reachable = false;
        e.downSince = new Date();
        this.downSinceMs[index] = now;
        if (this.endpoints.length > 1) this.options.onChange?.(index, e, { kind: "cooling_off", coolOffMs, error: e.lastError });
      }
      return;
    }
    const wasDown = !e.reachable;
    e.failures = 0;
    e.coolingOffUntilMs = 0;
    e.probingUntilMs = 0;
    if (wasDown) {
      e.reachable = true;
      e.downSince = undefined;
      if (this.endpoints.length > 1) this.options.onChange?.(index, e, { kind: "answers_again", downForMs: Math.round(now - this.downSinceMs[index]!) });
    }
  }

  /**
   * The heads a survey read (by endpoint index): each endpoint more than LAGGING_BLOCKS behind the best head seen, at
   * a head the best head had passed LAGGING_MS before (HeadTimeline.isBehind), is behind until a survey finds it out
   * of that again. Heads of endpoints that have not answered the chain id (`servesChain`) are ignored: an endpoint of
   * another chain with a higher head would have left the right ones behind. The best head only rises while some
   * endpoint shows it, so an endpoint left alone with an old view while the current one is down stays aside for a
   * while; it falls when every endpoint of the chain answered below it (the chain itself went back: a reorg deeper
   * than LAGGING_BLOCKS, a reset test chain), or when no endpoint has come near it for BEST_HEAD_KEPT_MS (its endpoint
   * gone for good, or a head no other shows).
   */
  noteHeads(answered: ReadonlyMap<number, bigint>, now = performance.now()): void {
    const heads = new Map([...answered].filter(([index]) => this.servesChain(index)));
    if (heads.size === 0) return;
    const highest = [...heads.values()].reduce((a, b) => (b > a ? b : a));
    if (this.bestHead === undefined || highest >= this.bestHead) {
      this.bestHead = highest;
      this.bestHeadSeenMs = now;
    } else if (highest + LAGGING_BLOCKS >= this.bestHead) {
      this.bestHeadSeenMs = now;
    } else if (heads.size === this.endpoints.filter((_, i) => this.servesChain(i)).length || now - this.bestHeadSeenMs > BEST_HEAD_KEPT_MS) {
      // Every endpoint below it, or none near it for a minute (the one that showed it gone, or that head was never
      // the chain's): the endpoints left are not held behind a head nobody shows any more.
      this.bestHead = highest;
      this.bestHeadSeenMs = now;
    }
    const best = this.bestHead;
    this.timeline.note(best, now);
    for (const [index, head] of heads) {
      const e = this.endpoints[index];
      if (!e) continue;
      e.head = head;
      const behind = this.timeline.isBehind(head, best, now);
      if (behind === e.behind) continue;
      e.behind = behind;
      this.options.onChange?.(index, e, { kind: behind ? "behind" : "caught_up", head, bestHead: best });
    }
  }
}
