/** What a probe answers while its condition does not hold yet. */
export type NotYet = undefined | null | false;

/** Asks once whether the condition holds; any other answer is the value waited for. */
export type Probe<T> = () => T | NotYet | Promise<T | NotYet>;

export interface Patience {
  /** How long to keep asking before failing. */
  timeoutMs: number;
  /** The pause between two asks. */
  everyMs: number;
  /**
   * Count a probe that throws as "not yet" (what it reads may not exist yet) and name its last
   * error on timeout. Without it the first throw fails the wait at once, so a probe may assert.
   */
  retryErrors?: boolean;
}

/** Polls `probe` until it answers a value and returns it; fails naming `what` once time is up. */
export async function until<T>(probe: Probe<T>, what: string, patience: Patience): Promise<T> {
  const deadline = Date.now() + patience.timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await probe();
      if (v !== undefined && v !== null && v !== false) return v;
    } catch (err) {
      if (!patience.retryErrors) throw err;
      last = err;
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}${last ? `: ${last}` : ""}`);
    await new Promise((r) => setTimeout(r, patience.everyMs));
  }
}

/** An `until` with a suite's patience; a call may still give its own timeout and pause. */
export function untilWith(patience: Patience) {
  return <T>(
    probe: Probe<T>,
    what: string,
    timeoutMs = patience.timeoutMs,
    everyMs = patience.everyMs,
  ): Promise<T> => until(probe, what, { ...patience, timeoutMs, everyMs });
}
