/**
 * A controller's work queue, keyed by object, as client-go's rate-limited workqueue: a key added
 * while queued is queued once; a key added while it is being handled is handled again right after
 * (never twice at once); different keys are handled concurrently up to `concurrency`. The handler
 * may ask to be called again after a delay (the sooner of two asks wins); a handler that throws is
 * retried after a per-key backoff that doubles with each consecutive failure, forgotten on success.
 */
import { backoffMs } from "../backoff.js";

export interface WorkQueueOptions<K> {
  /** Handles one key; resolves to a delay to handle it again after, or undefined. */
  handle: (key: K) => Promise<number | undefined>;
  /** Keys handled at once (default 4). */
  concurrency?: number;
  /** Retry delay after the n-th consecutive failure of a key (default 100 ms doubling to 5 min). */
  backoffMs?: (failures: number) => number;
  /** Told of every failure (the retry is already scheduled). */
  onError?: (key: K, err: unknown, retryInMs: number) => void;
}

export const defaultWorkQueueBackoff = (n: number) => backoffMs({ initialMs: 100, maxMs: 300_000 }, n);

export class WorkQueue<K> {
  private readonly queue: K[] = [];
  private readonly queued = new Set<K>();
  private readonly active = new Set<K>();
  /** Added again while active: queued once it is done. */
  private readonly dirty = new Set<K>();
  private readonly later = new Map<K, { due: number; timer: NodeJS.Timeout }>();
  private readonly failures = new Map<K, number>();
  private readonly idleWaiters: (() => void)[] = [];
  private stopped = false;
  private readonly concurrency: number;
  /** Keys handled so far (for tests and metrics). */
  handled = 0;

  constructor(private readonly o: WorkQueueOptions<K>) {
    this.concurrency = o.concurrency ?? 4;
  }

  /** Queues the key now. */
  add(key: K): void {
    if (this.stopped) return;
    const pending = this.later.get(key);
    if (pending) {
      clearTimeout(pending.timer);
      this.later.delete(key);
    }
    if (this.active.has(key)) {
      this.dirty.add(key);
      return;
    }
    if (this.queued.has(key)) return;
    this.queued.add(key);
    this.queue.push(key);
    this.pump();
  }

  /** Queues the key after `ms`; a key already due sooner keeps the sooner time. */
  addAfter(key: K, ms: number): void {
    if (this.stopped) return;
    if (ms <= 0) {
      this.add(key);
      return;
    }
    const due = Date.now() + ms;
    const pending = this.later.get(key);
    if (pending) {
      if (pending.due <= due) return;
      clearTimeout(pending.timer);
    }
    const timer = setTimeout(() => {
      this.later.delete(key);
      this.add(key);
    }, ms);
    timer.unref?.();
    this.later.set(key, { due, timer });
  }

  /** Consecutive failures of the key so far. */
  failuresOf(key: K): number {
    return this.failures.get(key) ?? 0;
  }

  /** Queued, waiting or being handled now: nothing delayed. */
  isIdle(): boolean {
    return this.queue.length === 0 && this.active.size === 0;
  }

  /** Resolves when nothing is queued or being handled (delayed keys do not count). */
  whenIdle(): Promise<void> {
    if (this.isIdle()) return Promise.resolve();
    return new Promise((r) => this.idleWaiters.push(r));
  }

  /** No new work; resolves once the keys being handled are done. */
  async stop(): Promise<void> {
    this.stopped = true;
    for (const p of this.later.values()) clearTimeout(p.timer);
    this.later.clear();
    this.queue.length = 0;
    this.queued.clear();
    await this.whenIdle();
  }

  private pump(): void {
    while (!this.stopped && this.active.size < this.concurrency && this.queue.length > 0) {
      const key = this.queue.shift()!;
      this.queued.delete(key);
      this.active.add(key);
      void this.run(key);
    }
    if (this.isIdle()) for (const w of this.idleWaiters.splice(0)) w();
  }

  private async run(key: K): Promise<void> {
    let after: number | undefined;
    try {
      after = await this.o.handle(key);
      this.failures.delete(key);
    } catch (err) {
      const n = (this.failures.get(key) ?? 0) + 1;
      this.failures.set(key, n);
      after = (this.o.backoffMs ?? defaultWorkQueueBackoff)(n);
      this.o.onError?.(key, err, after);
    }
    this.active.delete(key);
    this.handled++;
    if (this.dirty.delete(key)) this.add(key);
    else if (after !== undefined) this.addAfter(key, after);
    this.pump();
  }
}
