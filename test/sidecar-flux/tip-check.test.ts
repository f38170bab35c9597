/**
 * The Flux recheck asks the tip the branch worker recorded in Redis (redisTipCheck), with real
 * Redis, the real Git server and fluxsim. The case that matters: the artifact already holds the
 * attempt's commit, so the artifact alone would let it resume, but the branch has moved on.
 */
import { describe, expect, it } from "vitest";
import { artifactRevisionOf, fluxSpecField } from "../../queue/kube/index.js";
import { GIT_REPOSITORY } from "../../sidecar/flux/resources.js";
import { redisTipCheck } from "../../sidecar/tip-check.js";
import { fileWorld } from "../support/file-world.js";
import { type Scene, scene, startWorld } from "./harness.js";

const world = fileWorld(() => startWorld());

/** A scene whose tip check asks the tip its branch worker records in Redis. */
const recordedTipScene = () =>
  scene(world, { checks: { tip: redisTipCheck(world.redis.client, world.redis.prefix) } });

const artifactOf = async (s: Scene) => artifactRevisionOf(await world.kube.get(GIT_REPOSITORY, s.ns, "repo"));

describe.concurrent("the recorded tip decides Stale", () => {
  it("a commit the artifact holds but that is no longer the recorded tip ends Stale, nothing resumed", async () => {
    const s = await recordedTipScene();
    await s.adopt();
    const owner = await world.branchOwner(`${s.url}@main`);
    const old = await s.pushConfig("20");
    await owner.record(old);
    // At the recorded tip it applies (and leaves the artifact holding `old`).
    const first = await s.run(s.attempt(old));
    expect(first.last.phase).toBe("Succeeded");
    expect(await artifactOf(s)).toBe(`main@sha1:${old}`);

    // The worker publishes a newer commit; the source has not fetched it.
    const newer = await s.pushConfig("21");
    await owner.record(newer);
    const applied = world.sim.appliedRevisions(s.ks).length;
    const resumesBefore = (await s.readKs()).metadata.resourceVersion;
    const r = await s.run(s.attempt(old));
    expect(r.phases).toEqual(["Stale"]);
    expect(r.last.reason).toBe("Stale");
    const ks = await s.readKs();
    expect(fluxSpecField(ks, "suspend")).toBe(true);
    expect(ks.metadata.resourceVersion).toBe(resumesBefore); // never written, so never resumed
    expect(world.sim.appliedRevisions(s.ks).length).toBe(applied);
    expect(await s.operation()).toMatchObject({ phase: "Succeeded", commit: old }); // the first one, untouched
    expect(await artifactOf(s)).toBe(`main@sha1:${old}`); // the artifact alone would have said current
    expect(await s.configValue()).toBe("20");
  });

  it("no recorded tip does not block: the attempt runs", async () => {
    const s = await recordedTipScene();
    await s.adopt();
    const commit = await s.pushConfig("30");
    const r = await s.run(s.attempt(commit));
    expect(r.phases).toEqual(["Requested", "Running", "Settling", "Succeeded"]);
    expect(await s.configValue()).toBe("30");
  });
});
