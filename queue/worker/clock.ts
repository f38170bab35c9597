/**
 * Time as the branch worker sees it. The real clock uses timers; the manual clock lets a test
 * jump through a long outage in milliseconds.
 */
export interface Clock {
  now(): number;
  /**
   * Resolves after `ms`, or early when `signal` aborts, at once when it aborted before the call:
   * the branch worker sleeps after its step on the wake signal the step may already have fired.
   */
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
}

export const systemClock: Clock = {
  now: () => Date.now(),
  sleep: (ms, signal) =>
    new Promise((resolve) => {
      if (signal?.aborted) return resolve();
      const t = setTimeout(done, Math.max(0, ms));
      function done() {
        clearTimeout(t);
        signal?.removeEventListener("abort", done);
        resolve();
      }
      signal?.addEventListener("abort", done, { once: true });
    }),
};

/** A clock that moves only when told to. Sleepers wake when time passes their deadline. */
export class ManualClock implements Clock {
  private sleepers: Array<{ at: number; wake: () => void }> = [];
  constructor(private t = Date.UTC(2026, 0, 1)) {}

  now(): number {
    return this.t;
  }

  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      if (signal?.aborted) return resolve();
      const sleeper = {
        at: this.t + Math.max(0, ms),
        wake: () => {
          signal?.removeEventListener("abort", sleeper.wake);
          this.sleepers = this.sleepers.filter((s) => s !== sleeper);
          resolve();
        },
      };
      signal?.addEventListener("abort", sleeper.wake, { once: true });
      this.sleepers.push(sleeper);
      if (ms <= 0) queueMicrotask(sleeper.wake);
    });
  }

  advance(ms: number): void {
    this.t += ms;
    for (const s of [...this.sleepers]) if (s.at <= this.t) s.wake();
  }

  /** How many sleepers wait: a loop that sleeps has finished its step. */
  waiting(): number {
    return this.sleepers.length;
  }

  /** Earliest deadline a sleeper waits for, if any. */
  nextDeadline(): number | undefined {
    return this.sleepers.reduce<number | undefined>(
      (m, s) => (m === undefined || s.at < m ? s.at : m),
      undefined,
    );
  }
}
