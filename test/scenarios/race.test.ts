/**
 * The two-edit race, Flux, Argo CD and the webhook applier at once: the second API edit lands
 * right after the applier fetched the commit of the first. On their own timers (the deployer on
 * its own trigger: every push, as a CI pipeline) the appliers revert it; held by applygate the
 * later value wins on the cluster and in Git, one commit per save, no apply at all.
 */
import { describe, expect, it } from "vitest";
import { DEPLOYER_FIELD_MANAGER } from "../playground/deployer.js";
import { playRace, RACE_APPS, type RaceOutcome, SECOND } from "../playground/race.js";
import { testRedisUrl } from "../redis/isolated.js";
import { keptLogger } from "./harness.js";

/** The field manager each applier writes with: the one whose write reverts "green" on its own timers. */
const MANAGERS = {
  flux: "kustomize-controller",
  argocd: "argocd-controller",
  webhook: DEPLOYER_FIELD_MANAGER,
};

const each = (runs: RaceOutcome[]) => {
  // Every applier raced, the webhook applier's deployer included.
  expect(runs.map((r) => r.app)).toEqual([...RACE_APPS]);
  return runs;
};
const timeline = (r: RaceOutcome) => `${r.app}: ${JSON.stringify(r.timeline)}`;

describe("the two-edit race", () => {
  it("held by applygate: the later edit wins, one commit per save, no extra apply", async () => {
    const runs = await playRace("held", { redisUrl: testRedisUrl() });
    for (const r of each(runs)) {
      expect(r.reverted, timeline(r)).toBe(false);
      expect(r.cluster).toBe(SECOND);
      expect(r.git).toBe(SECOND);
      expect(r.commits).toBe(r.saves);
      expect(r.applies, timeline(r)).toEqual([]);
    }
  }, 180_000);

  it("on the appliers' own timers: an apply of the older commit reverts the later edit", async () => {
    const runs = await playRace("own-timers", { redisUrl: testRedisUrl() });
    for (const r of each(runs)) {
      expect(r.reverted, timeline(r)).toBe(true);
      expect(r.revertedBy, timeline(r)).toContain(MANAGERS[r.app]);
      expect(r.commits).toBe(r.saves);
      // "green" came back only with a later apply, of a commit holding the second edit.
      expect(r.cluster, timeline(r)).toBe(SECOND);
      expect(r.applies.length, timeline(r)).toBeGreaterThanOrEqual(2);
    }
    // Appliers on one-second timers wait out their own intervals; a loaded machine stretches them.
  }, 180_000);
});

describe("the two-edit race with the watch plane mirroring the edits", () => {
  it("held by applygate: exactly two commits, no revert, no apply", async () => {
    // The assembly's debug logs are kept and printed if the case fails.
    const runs = await playRace("held", { log: keptLogger(), redisUrl: testRedisUrl(), mirror: true });
    for (const r of each(runs)) {
      expect(r.reverted, timeline(r)).toBe(false);
      expect(r.cluster).toBe(SECOND);
      expect(r.git).toBe(SECOND);
      expect(r.commits, timeline(r)).toBe(2);
      expect(r.applies, timeline(r)).toEqual([]);
    }
  }, 180_000);

  it("on the appliers' own timers: the mirror records the revert as a commit of its own", async () => {
    const runs = await playRace("own-timers", { log: keptLogger(), redisUrl: testRedisUrl(), mirror: true });
    for (const r of each(runs)) {
      expect(r.reverted, timeline(r)).toBe(true);
      expect(r.revertedBy, timeline(r)).toContain(MANAGERS[r.app]);
      expect(r.commits, timeline(r)).toBeGreaterThan(2);
    }
  }, 180_000);
});
