/**
 * A sidecar stopped between taking an attempt and resuming the Kustomization (here: while the
 * GitRepository fetches the commit) leaves nothing on the claim for a restart to recover. The
 * executor must say so with a terminal report, or the worker would wait for the attempt forever.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { KObject } from "../../queue/kube/index.js";
import { GIT_REPOSITORY, REQUESTED_AT } from "../../sidecar/flux/resources.js";
import { configMap, DEFAULT_TEST_KNOBS, scene, startWorld, until, type World } from "./harness.js";

let world: World;
beforeAll(async () => {
  // A slow source fetch: the executor waits on it before it records anything.
  world = await startWorld({ ...DEFAULT_TEST_KNOBS, fetchLatencyMs: 1_500 });
});
afterAll(async () => {
  await world?.stop();
});

describe("a stop before the apply started", () => {
  it("is reported RequestFailed (SidecarStopping), records nothing and resumes nothing", async () => {
    const s = await scene(world);
    await s.adopt();
    const commit = await s.push({ "apps/cm.yaml": configMap("app-config", "2") });
    const before = world.sim.appliedRevisions(s.ks).length;
    const stamped = async () =>
      (await world.kube.get<KObject>(GIT_REPOSITORY, s.source.namespace, s.source.name))?.metadata
        .annotations?.[REQUESTED_AT];
    const was = await stamped();
    const stop = new AbortController();
    const run = s.run(s.attempt(commit), stop.signal);
    await until(
      async () => (await stamped()) !== was,
      "the executor to ask the GitRepository for the commit",
    );
    stop.abort();
    const r = await run;
    expect(r.phases).toEqual(["RequestFailed"]);
    expect(r.last).toMatchObject({ reason: "SidecarStopping" });
    const status = (await s.readClaim()).status as { operation?: unknown } | undefined;
    expect(status?.operation).toBeUndefined();
    expect((await s.readKs()).spec?.suspend).toBe(true);
    expect(world.sim.appliedRevisions(s.ks).slice(before)).toEqual([]);
  });
});
