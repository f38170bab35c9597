import { afterEach, describe, expect, it, vi } from "vitest";
import { Unreachable, untilAnswered } from "./startup-check.js";
import { ManualClock } from "./worker/clock.js";

const refused = () =>
  Promise.reject(Object.assign(new Error("connect ECONNREFUSED"), { code: "ECONNREFUSED" }));

describe("untilAnswered", () => {
  afterEach(() => {
    vi.restoreAllMocks();
  });

  it("asks until the wait ran out, its last pause cut to end at the deadline, then names the answer", async () => {
    const clock = new ManualClock(0);
    const asked: Array<{ at: number; timeoutMs: number }> = [];
    let outcome: unknown;
    const done = untilAnswered(
      (answer) => `cannot reach it: ${answer}`,
      (timeoutMs) => {
        asked.push({ at: clock.now(), timeoutMs });
        return refused();
      },
      3_000,
      clock,
    ).catch((err) => {
      outcome = err;
    });
    let gaveUpAt: number | undefined;
    while (gaveUpAt === undefined) {
      await new Promise((r) => setImmediate(r));
      if (outcome !== undefined) gaveUpAt = clock.now();
      else clock.advance((clock.nextDeadline() ?? clock.now()) - clock.now());
    }
    await done;
    // Backing off 250, 500, 1000 ms; the 2 s pause after the fourth ask is cut to the 1.25 s left.
    expect(asked).toEqual([
      { at: 0, timeoutMs: 3_000 },
      { at: 250, timeoutMs: 2_750 },
      { at: 750, timeoutMs: 2_250 },
      { at: 1_750, timeoutMs: 1_250 },
      { at: 3_000, timeoutMs: 1_000 },
    ]);
    expect(gaveUpAt).toBe(3_000);
    expect(outcome).toBeInstanceOf(Unreachable);
    expect((outcome as Error).message).toBe("cannot reach it: connection refused (ECONNREFUSED)");
  });

  it("a step of the wall clock neither ends the wait early nor stretches it", async () => {
    const started = performance.now();
    let probes = 0;
    const wall = Date.now();
    const gaveUp = untilAnswered(
      () => "cannot reach it",
      () => {
        // After the first ask the wall clock jumps an hour ahead (a VM restored from a snapshot).
        if (probes++ === 0) vi.spyOn(Date, "now").mockReturnValue(wall + 3_600_000);
        return refused();
      },
      600,
    );
    await expect(gaveUp).rejects.toBeInstanceOf(Unreachable);
    const waited = performance.now() - started;
    expect(waited).toBeGreaterThanOrEqual(600);
    expect(probes).toBeGreaterThan(1);
  });

  it("with no wait asks once", async () => {
    let probes = 0;
    await expect(
      untilAnswered(
        () => "cannot reach it",
        () => {
          probes++;
          return refused();
        },
        0,
      ),
    ).rejects.toBeInstanceOf(Unreachable);
    expect(probes).toBe(1);
  });
});
