/**
 * The two-edit race, Flux and Argo CD at once: the second API edit lands right after the applier
 * fetched the commit of the first. On their own timers the appliers revert it; held by applygate
 * the later value wins on the cluster and in Git, one commit per save, no apply at all.
 */
import { describe, expect, it } from "vitest";
import { playRace, SECOND } from "../playground/race.js";
import { testRedisUrl } from "../redis/isolated.js";

describe("the two-edit race", () => {
  it("held by applygate: the later edit wins, one commit per save, no extra apply", async () => {
    const runs = await playRace("held", { redisUrl: testRedisUrl() });
    for (const r of runs) {
      expect(r.reverted, `${r.app}: ${JSON.stringify(r.timeline)}`).toBe(false);
      expect(r.cluster).toBe(SECOND);
      expect(r.git).toBe(SECOND);
      expect(r.commits).toBe(r.saves);
      expect(r.applies).toEqual([]);
    }
  });

  it("on the appliers' own timers: an apply of the older commit reverts the later edit", async () => {
    const runs = await playRace("own-timers", { redisUrl: testRedisUrl() });
    for (const r of runs) {
      expect(r.reverted, `${r.app}: ${JSON.stringify(r.timeline)}`).toBe(true);
      expect(r.commits).toBe(r.saves);
    }
    // Appliers on one-second timers wait out their own intervals; a loaded machine stretches them.
  }, 120_000);
});

describe("the two-edit race with the watch plane mirroring the edits", () => {
  it("held by applygate: exactly two commits, no revert, no apply", async () => {
    const runs = await playRace("held", { redisUrl: testRedisUrl(), mirror: true });
    for (const r of runs) {
      expect(r.reverted, `${r.app}: ${JSON.stringify(r.timeline)}`).toBe(false);
      expect(r.cluster).toBe(SECOND);
      expect(r.git).toBe(SECOND);
      expect(r.commits).toBe(2);
      expect(r.applies).toEqual([]);
    }
  }, 120_000);

  it("on the appliers' own timers: the mirror records the revert as a commit of its own", async () => {
    const runs = await playRace("own-timers", { redisUrl: testRedisUrl(), mirror: true });
    for (const r of runs) {
      expect(r.reverted, `${r.app}: ${JSON.stringify(r.timeline)}`).toBe(true);
      expect(r.commits, `${r.app}: ${JSON.stringify(r.timeline)}`).toBeGreaterThan(2);
    }
  }, 120_000);
});
