/**
 * The Flux recheck asks the tip the branch worker recorded in Redis (redisTipCheck), with real
 * Redis, the real Git server and fluxsim. The case that matters: the artifact already holds the
 * attempt's commit, so the artifact alone would let it resume, but the branch has moved on.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BranchLease } from "../../queue/worker/lease.js";
import { recordTip } from "../../queue/worker/tip-record.js";
import { GIT_REPOSITORY, type GitRepository } from "../../sidecar/flux/resources.js";
import { redisTipCheck } from "../../sidecar/tip-check.js";
import { type IsolatedRedis, isolatedRedis } from "../redis/isolated.js";
import { configMap, type Scene, scene, startWorld, type World } from "./harness.js";

let world: World;
let redis: IsolatedRedis;
beforeAll(async () => {
  world = await startWorld();
  redis = await isolatedRedis("tipcheck");
});
afterAll(async () => {
  await world?.stop();
  await redis?.cleanup();
});

/** Records `tip` for the scene's branch as its owner would: under a lease, fenced. */
async function recordAsOwner(s: Scene, tip: string) {
  const key = `${s.url}@main`;
  const lease = new BranchLease(redis.client, redis.prefix, key, "worker", 10_000);
  if (!(await lease.acquire())) throw new Error("lease is held");
  await recordTip(redis.client, redis.prefix, key, lease.token as string, tip);
}

const artifactOf = async (s: Scene) =>
  (await world.kube.get<GitRepository>(GIT_REPOSITORY, s.ns, "repo"))?.status?.artifact?.revision;
const opOf = async (s: Scene) =>
  ((await s.readClaim()).status as { operation?: Record<string, string> } | undefined)?.operation;

describe.concurrent("the recorded tip decides Stale", () => {
  it("a commit the artifact holds but that is no longer the recorded tip ends Stale, nothing resumed", async () => {
    const s = await scene(world, { checks: { tip: redisTipCheck(redis.client, redis.prefix) } });
    await s.adopt();
    const old = await s.push({ "apps/cm.yaml": configMap("app-config", "20") });
    await recordAsOwner(s, old);
    // At the recorded tip it applies (and leaves the artifact holding `old`).
    const first = await s.run(s.attempt(old));
    expect(first.last.phase).toBe("Succeeded");
    expect(await artifactOf(s)).toBe(`main@sha1:${old}`);

    // The worker publishes a newer commit; the source has not fetched it.
    const newer = await s.push({ "apps/cm.yaml": configMap("app-config", "21") });
    await recordAsOwner(s, newer);
    const applied = world.sim.appliedRevisions(s.ks).length;
    const resumesBefore = (await s.readKs()).metadata.resourceVersion;
    const r = await s.run(s.attempt(old));
    expect(r.phases).toEqual(["Stale"]);
    expect(r.last.reason).toBe("Stale");
    const ks = await s.readKs();
    expect(ks.spec?.suspend).toBe(true);
    expect(ks.metadata.resourceVersion).toBe(resumesBefore); // never written, so never resumed
    expect(world.sim.appliedRevisions(s.ks).length).toBe(applied);
    expect(await opOf(s)).toMatchObject({ phase: "Succeeded", commit: old }); // the first one, untouched
    expect(await artifactOf(s)).toBe(`main@sha1:${old}`); // the artifact alone would have said current
    expect(await s.configValue()).toBe("20");
  });

  it("no recorded tip does not block: the attempt runs", async () => {
    const s = await scene(world, { checks: { tip: redisTipCheck(redis.client, redis.prefix) } });
    await s.adopt();
    const commit = await s.push({ "apps/cm.yaml": configMap("app-config", "30") });
    const r = await s.run(s.attempt(commit));
    expect(r.phases).toEqual(["Requested", "Running", "Settling", "Succeeded"]);
    expect(await s.configValue()).toBe("30");
  });
});
