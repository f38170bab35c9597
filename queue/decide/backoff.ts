/** An applier's backoff after an attempt that did not succeed. */

export const BACKOFF_BASE_MS = 2_000;
export const BACKOFF_MAX_MS = 5 * 60_000;
/** A Rejected attempt needs somebody to change the configuration: wait at least this long. */
export const BACKOFF_AFTER_REJECTED_MS = 15_000;

/** Delay before the next attempt, after `failures` consecutive non-success outcomes (≥ 1). */
export function backoffDelay(failures: number, rejected: boolean): number {
  const doubled = BACKOFF_BASE_MS * 2 ** Math.max(0, Math.min(failures - 1, 30));
  const delay = Math.min(doubled, BACKOFF_MAX_MS);
  return rejected ? Math.max(delay, BACKOFF_AFTER_REJECTED_MS) : delay;
}
