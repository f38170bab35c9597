/**
 * The sleep contract every clock the branch worker runs on keeps: a wake that came before the
 * sleep (the step it woke for was under way) ends the sleep at once. The worker renews its wake
 * signal per step and sleeps on it after the step, so a clock that waits out an aborted signal
 * loses the wake-up until the next deadline: a whole idle poll.
 */
import { describe, expect, it } from "vitest";
import { type Clock, ManualClock, systemClock } from "../../queue/worker/clock.js";
import { OffsetClock } from "../scenarios/offset-clock.js";

const clocks: Array<[string, () => Clock]> = [
  ["the system clock", () => systemClock],
  ["the manual clock", () => new ManualClock()],
  ["the offset clock", () => new OffsetClock()],
];

/** Whether the sleep ended before the test gave up on it (a real 2 s timer; never reached when kept). */
async function ended(sleep: Promise<void>): Promise<boolean> {
  let give: NodeJS.Timeout | undefined;
  const gaveUp = new Promise<false>((r) => {
    give = setTimeout(() => r(false), 2_000);
  });
  const result = await Promise.race([sleep.then(() => true as const), gaveUp]);
  clearTimeout(give);
  return result;
}

describe.each(clocks)("%s", (_name, make) => {
  it("ends a sleep at once when its signal was aborted before it began", async () => {
    const ctl = new AbortController();
    ctl.abort();
    expect(await ended(make().sleep(600_000, ctl.signal))).toBe(true);
  });

  it("ends a sleep when its signal aborts during it", async () => {
    const ctl = new AbortController();
    const sleep = make().sleep(600_000, ctl.signal);
    ctl.abort();
    expect(await ended(sleep)).toBe(true);
  });
});
