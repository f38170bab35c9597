/**
 * fluxsim against the simulated API server over HTTP and the real Git server: Flux's facts
 * (facts.ts, the same test bodies the real tier runs against real Flux), then what only the
 * simulator has: its timing knobs, its work queue and a clean stop.
 */
import { fileURLToPath } from "node:url";
import * as k8s from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { GitPeer } from "../../git/peer.js";
import { type GitServer, startGitServer } from "../../git/server.js";
import { untilWith } from "../../support/wait.js";
import { type ApiServer, startApiServer } from "../apiserver/index.js";
import { type Clock, realClock } from "../clock.js";
import { describeFluxFacts, manyConfigMaps } from "./facts.js";
import { type FluxSim, startFluxSim } from "./index.js";
import { WorkQueue } from "./workqueue.js";

const crd = (file: string) => fileURLToPath(new URL(`../crds/${file}`, import.meta.url));
const SRC = { group: "source.toolkit.fluxcd.io", version: "v1", plural: "gitrepositories" };
const KS = { group: "kustomize.toolkit.fluxcd.io", version: "v1", plural: "kustomizations" };
/** Every duration in a spec runs 1000 times faster: "1m" is 60 ms, "100h" is six minutes. */
const SCALE = 0.001;
/** Per-object apply time while a test needs an apply it can act during (20 objects: 300 ms). */
const SLOW_APPLY_MS = 15;

const until = untilWith({ timeoutMs: 10_000, everyMs: 10 });

async function startSimulated() {
  const api = await startApiServer({ bookmarkIntervalMs: 100 });
  await api.installCrdFile(crd("flux-gitrepository.yaml"));
  await api.installCrdFile(crd("flux-kustomization.yaml"));
  const git = await startGitServer();
  let skew = 0;
  /** Real time, shifted by `skew` so a test can move wall-clock seconds forward without waiting. */
  const clock: Clock = { ...realClock, now: () => Date.now() + skew };
  const kubeConfig = api.kubeConfig();
  const sim = await startFluxSim({
    kubeConfig,
    clock,
    knobs: { defaultIntervalScale: SCALE, perObjectApplyMs: 1 },
  });
  return { api, git, sim, clock, advance: (ms: number) => (skew += ms) };
}

describeFluxFacts({
  backend: "simulated",
  timeoutMs: 10_000,
  start: async () => {
    const { api, git, sim, advance } = await startSimulated();
    return {
      kubeConfig: api.kubeConfig(),
      git,
      shortInterval: "1m",
      reconciles: (ref) => sim.reconciles(ref),
      fetches: (ref) => sim.fetches(ref),
      appliedRevisions: (ref) => sim.appliedRevisions(ref),
      idle: () => sim.idle(),
      advance: async (ms) => {
        advance(ms);
      },
      slowObjects: 20,
      slowApplies: () => {
        sim.knobs.perObjectApplyMs = SLOW_APPLY_MS;
        return () => {
          sim.knobs.perObjectApplyMs = 1;
        };
      },
      // Every test has namespaces of its own on a server of this file's own.
      cleanUp: async () => {},
      sim,
      stop: async () => {
        await sim.stop();
        await api.close();
        await git.close();
      },
    };
  },
});

describe("fluxsim", () => {
  let api: ApiServer;
  let git: GitServer;
  let sim: FluxSim;
  let custom: k8s.CustomObjectsApi;
  let core: k8s.CoreV1Api;
  let seq = 0;

  beforeAll(async () => {
    ({ api, git, sim } = await startSimulated());
    const kc = api.kubeConfig();
    custom = kc.makeApiClient(k8s.CustomObjectsApi);
    core = kc.makeApiClient(k8s.CoreV1Api);
  });
  afterAll(async () => {
    await sim?.stop();
    await api?.close();
    await git?.close();
  });

  it("runs one reconcile per key at a time: a key added while it runs is run again after, never alongside", async () => {
    // The queue itself: a key added while it runs is run again after, never alongside.
    let running = 0;
    let most = 0;
    let runs = 0;
    const q = new WorkQueue(
      realClock,
      4,
      async () => {
        running++;
        runs++;
        most = Math.max(most, running);
        // A reconcile that takes a while, so keys added meanwhile meet it running (the case under test).
        await new Promise((r) => setTimeout(r, 20));
        running--;
        return {};
      },
      () => {},
      () => 1000,
    );
    q.add("ns/a");
    await until(async () => running === 1, "the first run to start");
    for (let i = 0; i < 5; i++) q.add("ns/a");
    await q.idle();
    await until(async () => q.isIdle() && runs === 2, "the coalesced second run");
    expect(most).toBe(1);
    await q.stop();
  });

  /** A namespace and repository of their own, a GitRepository and Kustomization over them, applied. */
  async function applied(files: Record<string, string>) {
    const ns = `sim-${++seq}`;
    await core.createNamespace({ body: { metadata: { name: ns } } });
    const url = await git.createRepo(ns, files);
    const spec = { interval: "100h" };
    await custom.createNamespacedCustomObject({
      ...SRC,
      namespace: ns,
      body: {
        apiVersion: "source.toolkit.fluxcd.io/v1",
        kind: "GitRepository",
        metadata: { name: "repo" },
        spec: { ...spec, url, ref: { branch: "main" } },
      },
    });
    await custom.createNamespacedCustomObject({
      ...KS,
      namespace: ns,
      body: {
        apiVersion: "kustomize.toolkit.fluxcd.io/v1",
        kind: "Kustomization",
        metadata: { name: "apps" },
        spec: {
          ...spec,
          prune: true,
          path: "./apps",
          targetNamespace: ns,
          sourceRef: { kind: "GitRepository", name: "repo" },
        },
      },
    });
    await appliedAt(ns, `main@sha1:${await git.tip(ns)}`);
    return { ns, url };
  }
  const appliedAt = (ns: string, revision: string) =>
    until(async () => {
      const ks = (await custom.getNamespacedCustomObject({ ...KS, namespace: ns, name: "apps" })) as any;
      return ks.status?.lastAppliedRevision === revision;
    }, `${ns} applied at ${revision}`);

  it("timing knobs: fetch latency delays the artifact, per-object apply time scales with the objects", async () => {
    const { ns, url } = await applied({ "apps/many.yaml": manyConfigMaps(20) });
    await sim.idle();
    sim.knobs.fetchLatencyMs = 150;
    sim.knobs.perObjectApplyMs = 10;
    try {
      const peer = await GitPeer.clone(url);
      const sha = await peer.commitAndPush("apps/many.yaml", manyConfigMaps(20, "2"), "second");
      const revision = `main@sha1:${sha}`;
      const t0 = Date.now();
      const token = `t-${++seq}`;
      await custom.patchNamespacedCustomObject(
        {
          ...SRC,
          namespace: ns,
          name: "repo",
          body: { metadata: { annotations: { "reconcile.fluxcd.io/requestedAt": token } } },
        },
        k8s.setHeaderOptions("Content-Type", k8s.PatchStrategy.MergePatch),
      );
      await until(async () => {
        const src = (await custom.getNamespacedCustomObject({ ...SRC, namespace: ns, name: "repo" })) as any;
        return src.status?.artifact?.revision === revision;
      }, "artifact of the new tip");
      expect(Date.now() - t0).toBeGreaterThanOrEqual(150);
      const t1 = Date.now();
      await appliedAt(ns, revision);
      expect(Date.now() - t1).toBeGreaterThanOrEqual(20 * 10);
    } finally {
      sim.knobs.fetchLatencyMs = 0;
      sim.knobs.perObjectApplyMs = 1;
    }
  });

  it("stop() leaves no timers and no watches running", async () => {
    const server = await startApiServer({ bookmarkIntervalMs: 50 });
    await server.installCrdFile(crd("flux-gitrepository.yaml"));
    await server.installCrdFile(crd("flux-kustomization.yaml"));
    const timers = new Set<unknown>();
    const counting: Clock = {
      now: () => Date.now(),
      setTimeout: (fn, ms) => {
        const h = setTimeout(() => {
          timers.delete(h);
          fn();
        }, ms);
        timers.add(h);
        return h;
      },
      clearTimeout: (h) => {
        timers.delete(h);
        clearTimeout(h as NodeJS.Timeout);
      },
    };
    const url = await git.createRepo(`sim-${++seq}`, {
      "apps/a.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n",
    });
    const kc = server.kubeConfig();
    const own = await startFluxSim({
      kubeConfig: kc,
      clock: counting,
      knobs: { defaultIntervalScale: SCALE },
    });
    const c = kc.makeApiClient(k8s.CustomObjectsApi);
    await kc.makeApiClient(k8s.CoreV1Api).createNamespace({ body: { metadata: { name: "s" } } });
    await c.createNamespacedCustomObject({
      ...SRC,
      namespace: "s",
      body: {
        apiVersion: "source.toolkit.fluxcd.io/v1",
        kind: "GitRepository",
        metadata: { name: "repo" },
        spec: { interval: "100h", url, ref: { branch: "main" } },
      },
    });
    await c.createNamespacedCustomObject({
      ...KS,
      namespace: "s",
      body: {
        apiVersion: "kustomize.toolkit.fluxcd.io/v1",
        kind: "Kustomization",
        metadata: { name: "apps" },
        spec: {
          interval: "100h",
          prune: true,
          path: "./apps",
          sourceRef: { kind: "GitRepository", name: "repo" },
        },
      },
    });
    await until(
      async () =>
        ((await c.getNamespacedCustomObject({ ...KS, namespace: "s", name: "apps" })) as any).status
          ?.lastAppliedRevision,
      "applied",
    );
    expect(timers.size).toBeGreaterThan(0); // interval requeues pending
    await own.stop();
    expect(timers.size).toBe(0);
    expect(server.faults.dropWatches("/apis/")).toBe(0);
    await server.close();
  });
});
