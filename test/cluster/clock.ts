/**
 * Time as the simulators see it: timestamps and every timer go through an injectable clock, so
 * tests can move the wall clock or the timers.
 */
export interface Clock {
  now(): number;
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

export const realClock: Clock = {
  now: () => Date.now(),
  setTimeout: (fn, ms) => setTimeout(fn, ms),
  clearTimeout: (h) => clearTimeout(h as NodeJS.Timeout),
};

/** Waits on the clock; resolves at once for 0 ms so an unset knob costs no turn of the timer loop. */
export function sleep(clock: Clock, ms: number): Promise<void> {
  if (ms <= 0) return Promise.resolve();
  return new Promise((resolve) => clock.setTimeout(resolve, ms));
}

/** metav1.Time on the wire: RFC 3339 in whole seconds, UTC. */
export function wireTime(ms: number): string {
  return new Date(Math.floor(ms / 1000) * 1000).toISOString().replace(".000Z", "Z");
}
