/**
 * Argo CD's retry arithmetic (RetryStrategy.NextRetryAt, application_defaults.go): the wait before
 * retry n is duration × factor^n, capped at maxDuration; defaults 5s, ×2, 3m.
 */
import { parseDuration as parseGoDuration } from "../duration.js";
import type { RetryStrategy } from "./types.js";

/** A Go duration ("1m30s", "250ms"); a bare integer is seconds, as Argo CD reads backoff fields. */
export function parseDuration(text: string): number {
  const t = text.trim();
  if (/^-?\d+$/.test(t)) return Number(t) * 1000;
  const ms = parseGoDuration(t);
  if (ms === undefined) throw new Error(`time: invalid duration "${text}"`);
  return ms;
}

export const DEFAULT_RETRY_DURATION_MS = 5_000;
export const DEFAULT_RETRY_FACTOR = 2;
export const DEFAULT_RETRY_MAX_DURATION_MS = 180_000;

export function nextRetryAt(
  retry: RetryStrategy | undefined,
  lastAttemptMs: number,
  retryCount: number,
): number {
  const b = retry?.backoff;
  const duration = b?.duration ? parseDuration(b.duration) : DEFAULT_RETRY_DURATION_MS;
  const factor = b?.factor ?? DEFAULT_RETRY_FACTOR;
  const maxDuration = b?.maxDuration ? parseDuration(b.maxDuration) : DEFAULT_RETRY_MAX_DURATION_MS;
  let wait = duration * factor ** retryCount;
  if (maxDuration > 0) wait = Math.min(wait, maxDuration);
  return lastAttemptMs + wait;
}

/** Whether a failed attempt is retried: retries left, or a negative (unlimited) limit. */
export function hasRetriesLeft(retry: RetryStrategy | undefined, retryCount: number): boolean {
  const limit = retry?.limit ?? 0;
  return limit < 0 || retryCount < limit;
}

/** Go's time.Kitchen ("3:04PM"), in UTC, as the controller's retry message shows the retry time. */
export function kitchen(ms: number): string {
  const d = new Date(ms);
  const h = d.getUTCHours();
  const m = String(d.getUTCMinutes()).padStart(2, "0");
  return `${h % 12 === 0 ? 12 : h % 12}:${m}${h < 12 ? "AM" : "PM"}`;
}
