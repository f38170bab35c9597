/**
 * A transient API server error (a 500) meets the Flux executor. Before the resume nothing has
 * started: the attempt ends RequestFailed with a reason naming the failed call, nothing recorded
 * or resumed, and the branch worker's next attempt (after its 2 s backoff) applies. After the
 * resume the apply runs whatever the API server answers, so an error is never its end: the
 * executor follows on and reports the end it observes, once.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { KObject } from "../../queue/kube/index.js";
import type { ReportFn } from "../../sidecar/applier-kind.js";
import type { FluxClient } from "../../sidecar/flux/client.js";
import { GIT_REPOSITORY, REQUESTED_AT } from "../../sidecar/flux/resources.js";
import { configMap, type Scene, scene, startWorld, type World } from "./harness.js";

let world: World;
beforeAll(async () => {
  world = await startWorld();
});
afterAll(async () => {
  await world?.stop();
});

const srcPath = (s: Scene) =>
  `/apis/source.toolkit.fluxcd.io/v1/namespaces/${s.source.namespace}/gitrepositories/${s.source.name}`;
const ksPath = (s: Scene) => `/apis/kustomize.toolkit.fluxcd.io/v1/namespaces/${s.ns}/kustomizations/apps`;
const claimStatusPath = (s: Scene) =>
  `/apis/applygate.dev/v1alpha1/namespaces/${s.ns}/fluxclaims/claim/status`;

/** Runs one attempt, calling `on` as each phase is reported (before the executor goes on). */
async function runWith(s: Scene, commit: string, on: (phase: string) => void = () => {}) {
  const reports: { phase: string; reason?: string; message?: string }[] = [];
  const report: ReportFn = async (phase, extra = {}) => {
    reports.push({ phase, ...(extra.reason ? { reason: extra.reason } : {}), message: extra.message });
    on(phase);
  };
  await s.kind.executor.execute(s.attempt(commit), report, new AbortController().signal);
  return reports;
}

describe.concurrent("a 500 from the API server", () => {
  it("on the GitRepository's stamp: RequestFailed (SourceRequestFailed), nothing started; the next attempt applies", async () => {
    const s = await scene(world);
    await s.adopt();
    const commit = await s.push({ "apps/cm.yaml": configMap("app-config", "s1") });
    const stamp = async () =>
      (await world.kube.get<KObject>(GIT_REPOSITORY, s.source.namespace, s.source.name))?.metadata
        .annotations?.[REQUESTED_AT];
    const before = await stamp();
    world.api.faults.failNext(1, { method: "PATCH", pathPrefix: srcPath(s), status: 500 });
    const first = await runWith(s, commit);
    expect(first.map((r) => r.phase)).toEqual(["RequestFailed"]);
    expect(first[0]).toMatchObject({
      reason: "SourceRequestFailed",
      message: expect.stringContaining("500"),
    });
    expect(await stamp()).toBe(before);
    expect((await s.readClaim()).status).not.toHaveProperty("operation");
    expect((await s.readKs()).spec?.suspend).toBe(true);
    expect(await s.configValue()).toBe("1");
    // The worker's retry is a new attempt of the same commit, taken like the first.
    const second = await runWith(s, commit);
    expect(second.at(-1)?.phase).toBe("Succeeded");
    expect(await s.configValue()).toBe("s1");
  });

  it("on reads while following the resumed apply: followed on, Succeeded once", async () => {
    const s = await scene(world);
    await s.adopt();
    // Following reads the watch's cache while the watch runs; without it every read asks the API
    // server, which is where a read can fail.
    await (s.kind.executor as unknown as { d: { client: FluxClient } }).d.client.stop();
    const commit = await s.push({ "apps/cm.yaml": configMap("app-config", "f1") });
    const reports = await runWith(s, commit, (phase) => {
      if (phase === "Running")
        world.api.faults.failNext(2, { method: "GET", pathPrefix: ksPath(s), status: 500 });
    });
    expect(world.api.faults.pending(ksPath(s))).toBe(0);
    const phases = reports.map((r) => r.phase);
    expect(phases.filter((p) => ["Succeeded", "Failed", "RequestFailed"].includes(p))).toEqual(["Succeeded"]);
    expect(phases.at(-1)).toBe("Succeeded");
    expect(await s.configValue()).toBe("f1");
    expect((await s.readKs()).spec?.suspend).toBe(true);
  });

  it("on the claim's status write that records Running: the apply followed on from the record, Succeeded once", async () => {
    const s = await scene(world);
    await s.adopt();
    const commit = await s.push({ "apps/cm.yaml": configMap("app-config", "r1") });
    // After Requested, the claim's next status write is the one that records Running.
    const reports = await runWith(s, commit, (phase) => {
      if (phase === "Requested")
        world.api.faults.failNext(1, { method: "PATCH", pathPrefix: claimStatusPath(s), status: 500 });
    });
    const phases = reports.map((r) => r.phase);
    expect(phases.filter((p) => ["Succeeded", "Failed", "RequestFailed"].includes(p))).toEqual(["Succeeded"]);
    expect(phases).toContain("Running");
    expect(await s.configValue()).toBe("r1");
    expect((await s.readKs()).spec?.suspend).toBe(true);
  });

  it("on the claim's status write that records the end: written again, Succeeded once, recorded", async () => {
    const s = await scene(world);
    await s.adopt();
    const commit = await s.push({ "apps/cm.yaml": configMap("app-config", "e1") });
    // After Settling (T2 recorded and written), the claim's next status write completes it.
    const reports = await runWith(s, commit, (phase) => {
      if (phase === "Settling")
        world.api.faults.failNext(2, { method: "PATCH", pathPrefix: claimStatusPath(s), status: 500 });
    });
    const phases = reports.map((r) => r.phase);
    expect(phases.filter((p) => ["Succeeded", "Failed", "RequestFailed"].includes(p))).toEqual(["Succeeded"]);
    const status = (await s.readClaim()).status as {
      operation?: { phase?: string };
      lastAppliedCommit?: string;
    };
    expect(status.operation?.phase).toBe("Succeeded");
    expect(status.lastAppliedCommit).toBe(commit);
  });

  it("on the claim's status write that records Settling: written again, the suspend recorded, Succeeded once", async () => {
    const s = await scene(world);
    await s.adopt();
    const commit = await s.push({ "apps/cm.yaml": configMap("app-config", "c1") });
    const reports = await runWith(s, commit, (phase) => {
      if (phase === "Running")
        world.api.faults.failNext(1, { method: "PATCH", pathPrefix: claimStatusPath(s), status: 500 });
    });
    const phases = reports.map((r) => r.phase);
    expect(phases.filter((p) => ["Succeeded", "Failed", "RequestFailed"].includes(p))).toEqual(["Succeeded"]);
    expect(await s.configValue()).toBe("c1");
    const ks = await s.readKs();
    expect(ks.spec?.suspend).toBe(true);
    // The claim records the operation's end, and its suspend token was recorded before the suspend.
    const status = (await s.readClaim()).status as {
      operation?: { phase?: string; suspendToken?: string };
      lastAppliedCommit?: string;
    };
    expect(status.operation?.phase).toBe("Succeeded");
    expect(status.operation?.suspendToken).toBeDefined();
    expect(status.lastAppliedCommit).toBe(commit);
  });
});
