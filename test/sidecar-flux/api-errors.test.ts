/**
 * A transient API server error (a 500) meets the Flux executor. Before the resume nothing has
 * started: the attempt ends RequestFailed with a reason naming the failed call, nothing recorded
 * or resumed, and the branch worker's next attempt (after its 2 s backoff) applies. After the
 * resume the apply runs whatever the API server answers, so an error is never its end: the
 * executor follows on and reports the end it observes, once.
 */
import { describe, expect, it } from "vitest";
import { claimStatusOf, fluxSpecField } from "../../queue/kube/index.js";
import type { FluxClient } from "../../sidecar/flux/client.js";
import { fileWorld } from "../support/file-world.js";
import { adopted, type Scene, startWorld } from "./harness.js";

const world = fileWorld(() => startWorld());

const srcPath = (s: Scene) =>
  `/apis/source.toolkit.fluxcd.io/v1/namespaces/${s.source.namespace}/gitrepositories/${s.source.name}`;
const ksPath = (s: Scene) => `/apis/kustomize.toolkit.fluxcd.io/v1/namespaces/${s.ns}/kustomizations/apps`;
/** The next `n` writes to the claim's status fail with a 500. */
const statusFault = (n: number) => (s: Scene) =>
  world.api.faults.failNext(n, {
    method: "PATCH",
    pathPrefix: `/apis/applygate.dev/v1alpha1/namespaces/${s.ns}/fluxclaims/claim/status`,
    status: 500,
  });

/** The one end of an apply that ran whatever the API server answered. */
const ends = (phases: string[]) => phases.filter((p) => ["Succeeded", "Failed", "RequestFailed"].includes(p));

/**
 * An adopted scene applies a new commit of app-config `value`: `fault` is injected as `after` is
 * reported (before the executor goes on). Answers the phases reported.
 */
async function applyWithFault(
  value: string,
  after: string,
  fault: (s: Scene) => void,
  prepare?: (s: Scene) => Promise<void>,
) {
  const s = await adopted(world);
  await prepare?.(s);
  const commit = await s.pushConfig(value);
  const { phases } = await s.run(s.attempt(commit), undefined, (phase) => {
    if (phase === after) fault(s);
  });
  return { s, commit, phases };
}

describe.concurrent("a 500 from the API server", () => {
  it("on the GitRepository's stamp: RequestFailed (SourceRequestFailed), nothing started; the next attempt applies", async () => {
    const s = await adopted(world);
    const commit = await s.pushConfig("s1");
    const before = await s.fetchRequested();
    world.api.faults.failNext(1, { method: "PATCH", pathPrefix: srcPath(s), status: 500 });
    const first = await s.run(s.attempt(commit));
    expect(first.phases).toEqual(["RequestFailed"]);
    expect(first.reports[0]?.extra).toMatchObject({
      reason: "SourceRequestFailed",
      message: expect.stringContaining("500"),
    });
    expect(await s.fetchRequested()).toBe(before);
    expect((await s.readClaim()).status).not.toHaveProperty("operation");
    expect(fluxSpecField(await s.readKs(), "suspend")).toBe(true);
    expect(await s.configValue()).toBe("1");
    // The worker's retry is a new attempt of the same commit, taken like the first.
    const second = await s.run(s.attempt(commit));
    expect(second.last.phase).toBe("Succeeded");
    expect(await s.configValue()).toBe("s1");
  });

  it("on reads while following the resumed apply: followed on, Succeeded once", async () => {
    const { s, phases } = await applyWithFault(
      "f1",
      "Running",
      (s) => world.api.faults.failNext(2, { method: "GET", pathPrefix: ksPath(s), status: 500 }),
      // Following reads the watch's cache while the watch runs; without it every read asks the API
      // server, which is where a read can fail.
      (s) => (s.kind.executor as unknown as { d: { client: FluxClient } }).d.client.stop(),
    );
    expect(world.api.faults.pending(ksPath(s))).toBe(0);
    expect(ends(phases)).toEqual(["Succeeded"]);
    expect(phases.at(-1)).toBe("Succeeded");
    expect(await s.configValue()).toBe("f1");
    expect(fluxSpecField(await s.readKs(), "suspend")).toBe(true);
  });

  it("on the claim's status write that records Running: the apply followed on from the record, Succeeded once", async () => {
    // After Requested, the claim's next status write is the one that records Running.
    const { s, phases } = await applyWithFault("r1", "Requested", statusFault(1));
    expect(ends(phases)).toEqual(["Succeeded"]);
    expect(phases).toContain("Running");
    expect(await s.configValue()).toBe("r1");
    expect(fluxSpecField(await s.readKs(), "suspend")).toBe(true);
  });

  it("on the claim's status write that records the end: written again, Succeeded once, recorded", async () => {
    // After Settling (T2 recorded and written), the claim's next status write completes it.
    const { s, commit, phases } = await applyWithFault("e1", "Settling", statusFault(2));
    expect(ends(phases)).toEqual(["Succeeded"]);
    const status = claimStatusOf(await s.readClaim());
    expect(status?.operation?.phase).toBe("Succeeded");
    expect(status?.lastAppliedCommit).toBe(commit);
  });

  it("on the claim's status write that records Settling: written again, the suspend recorded, Succeeded once", async () => {
    const { s, commit, phases } = await applyWithFault("c1", "Running", statusFault(1));
    expect(ends(phases)).toEqual(["Succeeded"]);
    expect(await s.configValue()).toBe("c1");
    const ks = await s.readKs();
    expect(fluxSpecField(ks, "suspend")).toBe(true);
    // The claim records the operation's end, and its suspend token was recorded before the suspend.
    const status = claimStatusOf(await s.readClaim());
    expect(status?.operation?.phase).toBe("Succeeded");
    expect(status?.operation?.suspendToken).toBeDefined();
    expect(status?.lastAppliedCommit).toBe(commit);
  });
});
