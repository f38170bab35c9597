/**
 * A keyed work queue like client-go's: one pass per key at a time, a key added while its pass runs
 * runs once more afterwards, delayed adds keep the earliest time asked for, and a pass that throws
 * is reported and tried again after RETRY_MS.
 */
import type { Clock } from "../clock.js";

const RETRY_MS = 100;

export class WorkQueue {
  private readonly dirty = new Set<string>();
  private readonly running = new Set<string>();
  private readonly timers = new Map<string, { at: number; handle: unknown }>();
  private readonly waiters: (() => void)[] = [];
  private stopped = false;

  constructor(
    private readonly clock: Clock,
    private readonly handler: (key: string) => Promise<void>,
    private readonly onError: (key: string, e: unknown) => void,
  ) {}

  add(key: string): void {
    if (this.stopped) return;
    if (this.running.has(key)) {
      this.dirty.add(key);
      return;
    }
    if (this.dirty.has(key)) return;
    this.dirty.add(key);
    setImmediate(() => void this.run(key));
  }

  addAfter(key: string, ms: number): void {
    if (this.stopped) return;
    if (ms <= 0) {
      this.add(key);
      return;
    }
    const at = this.clock.now() + ms;
    const existing = this.timers.get(key);
    if (existing && existing.at <= at) return;
    if (existing) this.clock.clearTimeout(existing.handle);
    const handle = this.clock.setTimeout(() => {
      this.timers.delete(key);
      this.add(key);
    }, ms);
    this.timers.set(key, { at, handle });
  }

  private async run(key: string): Promise<void> {
    if (this.running.has(key) || !this.dirty.has(key) || this.stopped) {
      this.settle();
      return;
    }
    this.dirty.delete(key);
    this.running.add(key);
    try {
      await this.handler(key);
    } catch (e) {
      this.onError(key, e);
      this.addAfter(key, RETRY_MS);
    } finally {
      this.running.delete(key);
      if (this.dirty.has(key) && !this.stopped) setImmediate(() => void this.run(key));
      this.settle();
    }
  }

  /** No pass running or waiting to run (delayed adds not counted). */
  get isIdle(): boolean {
    return this.running.size === 0 && (this.dirty.size === 0 || this.stopped);
  }

  idle(): Promise<void> {
    if (this.isIdle) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  private settle(): void {
    if (!this.isIdle) return;
    for (const w of this.waiters.splice(0)) w();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    for (const { handle } of this.timers.values()) this.clock.clearTimeout(handle);
    this.timers.clear();
    await this.idle();
  }
}
