/**
 * The domain's clock. Rate-limit windows, blocks and the replay window are measured against it, so tests can move
 * time instead of sleeping (an automatic block of 15 minutes is checked by advancing this clock).
 */
let current: () => Date = () => new Date();

export function now(): Date {
  return current();
}

/** Tests only: replace the clock (`undefined` restores the real one). */
export function setClockForTests(clock: (() => Date) | undefined): void {
  current = clock ?? (() => new Date());
}
