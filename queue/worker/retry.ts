/**
 * The one retry schedule of a branch's publication: 10 s, doubling, at most 5 min. A failed
 * publication keeps every pending write; the next attempt is due at `nextAt`.
 */
import { backoffMs, jittered } from "../backoff.js";

export const RETRY_INITIAL_MS = 10_000;
export const RETRY_MAX_MS = 300_000;

export interface RetryState {
  /** When the first failed attempt of this outage happened (stable across retries). */
  since: number;
  failures: number;
  nextAt: number;
  lastCause: string;
}

export function retryDelay(failures: number, initial = RETRY_INITIAL_MS, max = RETRY_MAX_MS): number {
  return backoffMs({ initialMs: initial, maxMs: max }, failures);
}

/** The state after one more failed attempt at `now`. */
export function afterFailure(prev: RetryState | undefined, now: number, cause: string): RetryState {
  const failures = (prev?.failures ?? 0) + 1;
  return { since: prev?.since ?? now, failures, nextAt: now + retryDelay(failures), lastCause: cause };
}

/** Jittered backoff between contention retries inside one push cycle (siblings start together). */
export function contentionBackoff(attempt: number, random: () => number = Math.random): number {
  return Math.round(jittered(backoffMs({ initialMs: 50, maxMs: 2_000 }, attempt + 1), random));
}
