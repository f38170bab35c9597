/**
 * The one conflict-retry policy of every process: a write guarded by the resourceVersion just read
 * that answers 409 reads again, recomputes and writes again, a bounded number of times with a
 * short jittered backoff. Past the bound it throws ConflictRetriesExhausted naming the write, so a
 * lost race is an error the caller reports or requeues, never a wedged resource.
 */
import { backoffMs, jittered } from "../backoff.js";
import { isConflict } from "./errors.js";

export interface RetryOptions {
  /** Attempts in all, the first included (default 5). */
  max?: number;
  /** Pause before attempt n (n ≥ 2); default 20 ms × 2^(n-2), jittered. */
  backoffMs?: (attempt: number) => number;
  sleep?: (ms: number) => Promise<void>;
  /** What is written, for the error past the bound (e.g. "status of fluxclaims team/web"). */
  what?: string;
}

export const DEFAULT_CONFLICT_ATTEMPTS = 5;

export class ConflictRetriesExhausted extends Error {
  override name = "ConflictRetriesExhausted";
  constructor(
    readonly what: string,
    readonly attempts: number,
  ) {
    super(
      `${what}: still conflicting after ${attempts} attempts (each re-read the object); another writer keeps changing it`,
    );
  }
}

const defaultSleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
const defaultBackoff = (attempt: number) =>
  jittered(backoffMs({ initialMs: 20, maxMs: Number.POSITIVE_INFINITY }, attempt - 1));

/**
 * Reads, computes, writes; a 409 reads again and recomputes. `mutate` may return undefined to
 * write nothing (the result is then `undefined`); `read` and `mutate` may throw to stop.
 */
export async function retryOnConflict<S, W, R>(
  read: () => Promise<S>,
  mutate: (current: S) => W | undefined,
  write: (current: S, change: W) => Promise<R>,
  opts: RetryOptions = {},
): Promise<R | undefined> {
  const max = opts.max ?? DEFAULT_CONFLICT_ATTEMPTS;
  const sleep = opts.sleep ?? defaultSleep;
  const backoff = opts.backoffMs ?? defaultBackoff;
  for (let attempt = 1; ; attempt++) {
    if (attempt > 1) await sleep(backoff(attempt));
    const current = await read();
    const change = mutate(current);
    if (change === undefined) return undefined;
    try {
      return await write(current, change);
    } catch (err) {
      if (!isConflict(err)) throw err;
      if (attempt >= max) throw new ConflictRetriesExhausted(opts.what ?? "write", max);
    }
  }
}
