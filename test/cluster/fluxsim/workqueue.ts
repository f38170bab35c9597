/**
 * The controller-runtime work queue contract: a key is queued at most once, at most one reconcile
 * of a key runs at a time (a key added while it runs is marked dirty and queued again when it
 * ends), delayed adds keep the earliest time asked, and a reconcile that throws is retried with
 * exponential backoff (5 ms doubling, capped).
 */
import type { Clock } from "../clock.js";

export interface Outcome {
  /** Queue the key again after this many milliseconds (controller-runtime RequeueAfter). */
  requeueAfterMs?: number;
  /** Queue the key again at once, rate limited (controller-runtime Requeue: true). */
  requeue?: boolean;
}

export type Reconciler = (key: string) => Promise<Outcome>;

export class WorkQueue {
  readonly #queue: string[] = [];
  readonly #queued = new Set<string>();
  readonly #processing = new Set<string>();
  readonly #dirty = new Set<string>();
  readonly #delayed = new Map<string, { at: number; handle: unknown }>();
  readonly #failures = new Map<string, number>();
  readonly #idleWaiters: (() => void)[] = [];
  #stopped = false;

  constructor(
    private readonly clock: Clock,
    private readonly concurrency: number,
    private readonly reconcile: Reconciler,
    private readonly onError: (key: string, err: unknown) => void,
    private readonly maxBackoffMs: () => number,
  ) {}

  add(key: string): void {
    if (this.#stopped) return;
    if (this.#processing.has(key)) {
      this.#dirty.add(key);
      return;
    }
    if (this.#queued.has(key)) return;
    this.#queued.add(key);
    this.#queue.push(key);
    this.#pump();
  }

  addAfter(key: string, ms: number): void {
    if (this.#stopped) return;
    if (ms <= 0) {
      this.add(key);
      return;
    }
    const at = this.clock.now() + ms;
    const existing = this.#delayed.get(key);
    if (existing && existing.at <= at) return;
    if (existing) this.clock.clearTimeout(existing.handle);
    const handle = this.clock.setTimeout(() => {
      this.#delayed.delete(key);
      this.add(key);
    }, ms);
    this.#delayed.set(key, { at, handle });
  }

  #addRateLimited(key: string): void {
    const n = (this.#failures.get(key) ?? 0) + 1;
    this.#failures.set(key, n);
    this.addAfter(key, Math.min(5 * 2 ** (n - 1), this.maxBackoffMs()));
  }

  #pump(): void {
    while (!this.#stopped && this.#processing.size < this.concurrency && this.#queue.length > 0) {
      const key = this.#queue.shift() as string;
      this.#queued.delete(key);
      this.#processing.add(key);
      void this.#run(key);
    }
  }

  async #run(key: string): Promise<void> {
    let outcome: Outcome = {};
    let failed = false;
    try {
      outcome = await this.reconcile(key);
    } catch (err) {
      failed = true;
      this.onError(key, err);
    }
    this.#processing.delete(key);
    if (failed || outcome.requeue) this.#addRateLimited(key);
    else {
      this.#failures.delete(key);
      if (outcome.requeueAfterMs !== undefined) this.addAfter(key, outcome.requeueAfterMs);
    }
    if (this.#dirty.delete(key)) this.add(key);
    this.#pump();
    this.#notifyIdle();
  }

  isIdle(): boolean {
    return this.#queue.length === 0 && this.#processing.size === 0;
  }

  /** Resolves once nothing is queued or running (delayed keys do not count). */
  idle(): Promise<void> {
    if (this.isIdle()) return Promise.resolve();
    return new Promise((resolve) => this.#idleWaiters.push(resolve));
  }

  #notifyIdle(): void {
    if (!this.isIdle()) return;
    for (const w of this.#idleWaiters.splice(0)) w();
  }

  /** Drops queued and delayed keys and resolves once the reconciles already running have ended. */
  async stop(): Promise<void> {
    this.#stopped = true;
    for (const d of this.#delayed.values()) this.clock.clearTimeout(d.handle);
    this.#delayed.clear();
    this.#queue.length = 0;
    this.#queued.clear();
    this.#dirty.clear();
    await this.idle();
  }
}
