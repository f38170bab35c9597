/**
 * The wall clock plus an offset a scenario moves forward: the branch worker runs on real time,
 * except that the scenario can jump over its retry schedule (10 s first, doubling) instead of
 * waiting it out. Sleepers wake at once when a jump passes their deadline.
 */
import { type Clock, systemClock } from "../../queue/worker/clock.js";

export class OffsetClock implements Clock {
  private offset = 0;
  private readonly jumped = new Set<() => void>();

  now(): number {
    return Date.now() + this.offset;
  }

  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    // A wake that came before the sleep ends it at once: an abort listener added to an aborted
    // signal never runs, and the sleeper would lie through a whole idle poll.
    if (signal?.aborted) return Promise.resolve();
    const at = this.now() + Math.max(0, ms);
    const ctl = new AbortController();
    const onAbort = () => ctl.abort();
    signal?.addEventListener("abort", onAbort, { once: true });
    const check = () => {
      if (this.now() >= at) ctl.abort();
    };
    this.jumped.add(check);
    return systemClock.sleep(ms, ctl.signal).finally(() => {
      this.jumped.delete(check);
      signal?.removeEventListener("abort", onAbort);
    });
  }

  /** Moves time forward by `ms`. */
  advance(ms: number): void {
    this.offset += ms;
    for (const check of [...this.jumped]) check();
  }
}
