/** An applier's backoff after an attempt that did not succeed. */
import { backoffMs } from "../backoff.js";

export const BACKOFF_BASE_MS = 2_000;
export const BACKOFF_MAX_MS = 5 * 60_000;
/** A Rejected attempt needs somebody to change the configuration: wait at least this long. */
export const BACKOFF_AFTER_REJECTED_MS = 15_000;

/** Delay before the next attempt, after `failures` consecutive non-success outcomes (≥ 1). */
export function backoffDelay(failures: number, rejected: boolean): number {
  const delay = backoffMs({ initialMs: BACKOFF_BASE_MS, maxMs: BACKOFF_MAX_MS }, failures);
  return rejected ? Math.max(delay, BACKOFF_AFTER_REJECTED_MS) : delay;
}
