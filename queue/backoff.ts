/**
 * The one exponential backoff of every process: `initialMs` after the first failure, doubling with
 * each failure after it, never past `maxMs`. The publication retry, an applier's backoff, the
 * conflict retry, the informers' relists, the work queue's retries and the sidecar's report sends
 * are this function with their own numbers.
 */
export interface Backoff {
  /** The delay after the first failure. */
  initialMs: number;
  /** The longest delay (Infinity: none). */
  maxMs: number;
}

/** The delay after the `failures`-th consecutive failure (counted from 1; less counts as 1). */
export function backoffMs(b: Backoff, failures: number): number {
  // Past 2^52 nothing is added (and 2 ** n stays finite).
  const doublings = Math.max(0, Math.min(Math.floor(failures) - 1, 52));
  return Math.min(b.maxMs, b.initialMs * 2 ** doublings);
}

/** Spread over [ms/2, 3ms/2): siblings that failed together do not retry together. */
export function jittered(ms: number, random: () => number = Math.random): number {
  return ms / 2 + random() * ms;
}
