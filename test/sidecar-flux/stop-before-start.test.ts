/**
 * A sidecar stopped between taking an attempt and resuming the Kustomization (here: while the
 * GitRepository fetches the commit) leaves nothing on the claim for a restart to recover. The
 * executor must say so with a terminal report, or the worker would wait for the attempt forever.
 */
import { describe, expect, it } from "vitest";
import { fluxSpecField } from "../../queue/kube/index.js";
import { fileWorld } from "../support/file-world.js";
import { adopted, DEFAULT_TEST_KNOBS, startWorld, until } from "./harness.js";

// A slow source fetch: the executor waits on it before it records anything.
const world = fileWorld(() => startWorld({ ...DEFAULT_TEST_KNOBS, fetchLatencyMs: 1_500 }));

describe("a stop before the apply started", () => {
  it("is reported RequestFailed (SidecarStopping), records nothing and resumes nothing", async () => {
    const s = await adopted(world);
    const commit = await s.pushConfig("2");
    const before = world.sim.appliedRevisions(s.ks).length;
    const was = await s.fetchRequested();
    const stop = new AbortController();
    const run = s.run(s.attempt(commit), stop.signal);
    await until(
      async () => (await s.fetchRequested()) !== was,
      "the executor to ask the GitRepository for the commit",
    );
    stop.abort();
    const r = await run;
    expect(r.phases).toEqual(["RequestFailed"]);
    expect(r.last).toMatchObject({ reason: "SidecarStopping" });
    expect(await s.operation()).toBeUndefined();
    expect(fluxSpecField(await s.readKs(), "suspend")).toBe(true);
    expect(world.sim.appliedRevisions(s.ks).slice(before)).toEqual([]);
  });
});
