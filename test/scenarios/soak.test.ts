/**
 * The soak inside the suite. Broken assemblies first: nothing holding the appliers must break
 * no-revert, and a flush that skips publication must break nothing-lost, so the soak can see
 * what it looks for; the same edits held by applygate break none. Then a fixed set of seeds
 * whose plans together draw every fault action (SIGKILL of each process, a Redis restart, Git
 * outage, stall and lost reply, API 409/500/410, refusals, edits of another key). `npm run soak`
 * plays many more.
 */
import { describe, expect, it } from "vitest";
import { FAST_TIMERS } from "../playground/assembly.js";
import { testRedisUrl } from "../redis/isolated.js";
import { type Action, planRun } from "../soak/plan.js";
import { playRun } from "../soak/run.js";
import { SEED_ACTIONS, SEED_SET } from "../soak/seed-set.js";

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

  it("sees the writes lost by a flush that skips publication", async () => {
    // Saved edits of Flux's app, then a foreign push that makes an apply due: its flush answers
    // "published" without pushing them, so they never reach Git.
    const r = await playRun({
      seed: 1,
      redisUrl: testRedisUrl(),
      plan: [
        { kind: "edit", app: "flux", value: "e0", save: true, gapMs: 0 },
        { kind: "edit", app: "flux", value: "e1", save: true, gapMs: 300 },
        { kind: "push", app: "argocd", value: "p2", note: false, gapMs: 300 },
      ],
      flushSkipsPublication: true,
      timers: FAST_TIMERS,
      quiesceTimeoutMs: 15_000,
    });
    expect(
      r.violations.map((v) => v.invariant),
      r.timeline.join("\n"),
    ).toContain("nothing-lost");
  }, 180_000);

  it("finds nothing when applygate holds the applier through the same edits", async () => {
    const r = await playRun({ seed: 1, redisUrl: testRedisUrl(), plan });
    expect(r.violations, r.timeline.join("\n")).toEqual([]);
    expect(r.reverts).toEqual([]);
  }, 180_000);

  it("stops a run that does not finish at its bound and reports what it was doing", async () => {
    // An action that never comes in time stands for one that never ends (seed 5213: a sidecar
    // stop that hung): the run is judged at its bound, with its actions and its kept logs.
    const t0 = Date.now();
    const r = await playRun({
      seed: 1,
      redisUrl: testRedisUrl(),
      plan: [
        { kind: "edit", app: "flux", value: "e0", save: true, gapMs: 0 },
        { kind: "edit", app: "flux", value: "e1", save: true, gapMs: 3_600_000 },
      ],
      timers: FAST_TIMERS,
      runTimeoutMs: 30_000,
    });
    expect(r.violations.map((v) => v.invariant)).toEqual(["finished"]);
    expect(r.violations[0]?.detail).toMatch(
      /did not finish in 0\.5 minute\(s\); it was waiting \d+ ms before action 2 of 2/,
    );
    expect(r.actions).toHaveLength(2);
    expect(r.timeline.join("\n")).toContain("edit flux = e0");
    expect(r.logs.length).toBeGreaterThan(0);
    expect(Date.now() - t0).toBeLessThan(100_000);
  }, 180_000);

  it("seed 5126: a note reported while a late apply's revert is on the cluster keeps the edit in Git", async () => {
    // The seed's first four actions (edit e0, push p1, edit e2, a note of the same object) with
    // their timing made certain: e2 once Argo CD applies p1, so the apply runs over it (the
    // residue the design accepts), and the note while p1 is on the cluster, before the Repair
    // puts e2 back. The note's write carries the cluster's object, greeting p1 included; its base
    // alone says the note is all it changed.
    const plan = planRun(5126, { actions: 8 }).slice(0, 4);
    expect(plan.map((x) => x.kind)).toEqual(["edit", "push", "edit", "note"]);
    const [e0, p1, e2, n3] = plan as [Action, Action, Action, Action];
    if (e2.kind !== "edit" || n3.kind !== "note") throw new Error("seed 5126's plan changed");
    const scripted: Action[] = [
      e0,
      p1,
      { ...e2, gapMs: 0, whileApplying: true },
      { ...n3, gapMs: 0, whileReverted: true },
    ];
    const r = await playRun({ seed: 5126, redisUrl: testRedisUrl(), plan: scripted });
    expect(r.violations, [...r.timeline, ...r.logs.slice(-200)].join("\n")).toEqual([]);
  }, 240_000);

  describe.each(SEED_SET)("seed %i", (seed) => {
    it("breaks no invariant", async () => {
      const r = await playRun({ seed, redisUrl: testRedisUrl(), actions: SEED_ACTIONS });
      expect(r.violations, [...r.timeline, ...r.logs.slice(-200)].join("\n")).toEqual([]);
    }, 240_000);
  });
});
