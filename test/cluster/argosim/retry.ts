/**
 * Argo CD's retry arithmetic (RetryStrategy.NextRetryAt, application_defaults.go): the wait before
 * retry n is duration × factor^n, capped at maxDuration; defaults 5s, ×2, 3m.
 */
import type { RetryStrategy } from "./types.js";

const unitMs: Record<string, number> = {
  ns: 1e-6,
  us: 1e-3,
  µs: 1e-3,
  ms: 1,
  s: 1000,
  m: 60_000,
  h: 3_600_000,
};

/** A Go duration ("1m30s", "250ms"); a bare integer is seconds, as Argo CD reads backoff fields. */
export function parseDuration(text: string): number {
  const t = text.trim();
  if (/^-?\d+$/.test(t)) return Number(t) * 1000;
  const re = /(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)/gy;
  let total = 0;
  let matched = 0;
  for (let m = re.exec(t); m; m = re.exec(t)) {
    total += Number(m[1]) * (unitMs[m[2] as string] ?? 0);
    matched = re.lastIndex;
  }
  if (matched === 0 || matched !== t.length) throw new Error(`time: invalid duration "${text}"`);
  return total;
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
