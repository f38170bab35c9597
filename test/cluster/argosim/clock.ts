/** Time as the simulators see it: injectable, so tests can move the wall clock or the timers. */
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

export const sleepOn =
  (clock: Clock) =>
  (ms: number): Promise<void> =>
    new Promise((resolve) => {
      clock.setTimeout(resolve, ms);
    });
