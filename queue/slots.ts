/**
 * A counting bound: at most `size` holders at once, the others waiting in arrival order. A worker
 * replica bounds its branches' first reads of the remote with it (`--baseline-concurrency`), so
 * taking a thousand branches does not stampede the Git host; every Kube client bounds its requests
 * in flight with it (kube/request-turns.ts).
 */
export class Slots {
  private held = 0;
  private readonly waiting: Array<() => void> = [];

  constructor(readonly size: number) {
    if (!Number.isInteger(size) || size < 1) throw new Error(`a bound of ${size} slots is no bound`);
  }

  /** Holders now and callers waiting (for tests and metrics). */
  get usage(): { held: number; waiting: number } {
    return { held: this.held, waiting: this.waiting.length };
  }

  /**
   * Resolves with the slot's release once one is free. Rejects with the signal's reason when it
   * aborts first (the worker stopping); a slot is then not held.
   */
  acquire(signal?: AbortSignal): Promise<() => void> {
    if (signal?.aborted) return Promise.reject(signal.reason);
    let released = false;
    const release = () => {
      if (released) return;
      released = true;
      const next = this.waiting.shift();
      if (next) next();
      else this.held--;
    };
    if (this.held < this.size) {
      this.held++;
      return Promise.resolve(release);
    }
    return new Promise((resolve, reject) => {
      const grant = () => {
        signal?.removeEventListener("abort", onAbort);
        resolve(release);
      };
      const onAbort = () => {
        const i = this.waiting.indexOf(grant);
        if (i >= 0) this.waiting.splice(i, 1);
        reject(signal?.reason);
      };
      signal?.addEventListener("abort", onAbort, { once: true });
      this.waiting.push(grant);
    });
  }
}
