/**
 * Wakes the waiters of an object on every watch event about it: the followers of the Flux and
 * Argo CD appliers wait on these instead of polling while their watch runs.
 */
export class Wakeups {
  private readonly waiters = new Map<string, Set<(byEvent: boolean) => void>>();

  notify(key: string): void {
    const set = this.waiters.get(key);
    if (!set) return;
    for (const w of [...set]) w(true);
  }

  /**
   * Arms a wait for the next event about `key`, `ms`, or abort, whichever comes first. Armed
   * before the read it follows, so an event landing between the read and the wait is not missed.
   * The wait answers true when an event woke it (false: the time ran out, an abort, a cancel).
   */
  arm(key: string, ms: number, signal?: AbortSignal): { wait: Promise<boolean>; cancel: () => void } {
    let cancel = () => {};
    const wait = new Promise<boolean>((resolve) => {
      const set = this.waiters.get(key) ?? new Set();
      this.waiters.set(key, set);
      const done = (byEvent = false) => {
        clearTimeout(timer);
        set.delete(done);
        if (set.size === 0 && this.waiters.get(key) === set) this.waiters.delete(key);
        signal?.removeEventListener("abort", onAbort);
        resolve(byEvent);
      };
      const onAbort = () => done(false);
      set.add(done);
      const timer = setTimeout(onAbort, ms);
      signal?.addEventListener("abort", onAbort, { once: true });
      cancel = onAbort;
    });
    return { wait, cancel };
  }
}
