/**
 * The soak inside the suite: a broken assembly (nothing holds the appliers) must break the
 * no-revert invariant, so the soak can see what it looks for, and the same edits held by
 * applygate break none. `npm run soak` plays many seeds.
 */
import { describe, expect, it } from "vitest";
import { FAST_TIMERS } from "../playground/assembly.js";
import { testRedisUrl } from "../redis/isolated.js";
import type { Action } from "../soak/plan.js";
import { playRun } from "../soak/run.js";

/** Saved edits of the Flux app, 1.2 s apart. */
const plan: Action[] = Array.from({ length: 6 }, (_, i) => ({
  kind: "edit",
  app: "flux",
  value: `e${i}`,
  save: true,
  gapMs: i === 0 ? 0 : 1200,
}));

describe("the soak", () => {
  it("sees the reverts of an applier nobody holds", async () => {
    // Flux on its own one-second interval, with builds slower than the edits come: each apply
    // lands the commit fetched before the next edit, over it.
    const r = await playRun({
      seed: 1,
      redisUrl: testRedisUrl(),
      plan,
      unheld: true,
      timers: { ...FAST_TIMERS, fluxInterval: "1s", flux: { perObjectApplyMs: 1, buildMs: 1500 } },
    });
    expect(
      r.violations.map((v) => v.invariant),
      r.timeline.join("\n"),
    ).toContain("no-revert");
  }, 180_000);

  it("finds nothing when applygate holds the applier through the same edits", async () => {
    const r = await playRun({ seed: 1, redisUrl: testRedisUrl(), plan });
    expect(r.violations, r.timeline.join("\n")).toEqual([]);
    expect(r.reverts).toEqual([]);
  }, 180_000);
});
