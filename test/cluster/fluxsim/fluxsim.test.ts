/**
 * fluxsim against the simulated API server over HTTP and the real Git server: one test per fact
 * it reproduces (named after the fact), then the measured check of the seed's observations.
 */
import { rm } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import * as k8s from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { gitOk } from "../../git/cli.js";
import { GitPeer } from "../../git/peer.js";
import { type GitServer, startGitServer } from "../../git/server.js";
import { untilWith } from "../../support/wait.js";
import { type ApiServer, startApiServer } from "../apiserver/index.js";
import { type Clock, realClock } from "../clock.js";
import { type FluxSim, startFluxSim } from "./index.js";
import { WorkQueue } from "./workqueue.js";

const crd = (file: string) => fileURLToPath(new URL(`../crds/${file}`, import.meta.url));
const MERGE = k8s.setHeaderOptions("Content-Type", k8s.PatchStrategy.MergePatch);
const SRC = { group: "source.toolkit.fluxcd.io", version: "v1", plural: "gitrepositories" };
const KS = { group: "kustomize.toolkit.fluxcd.io", version: "v1", plural: "kustomizations" };
/** Every duration in a spec runs 1000 times faster: "1m" is 60 ms, "100h" is six minutes. */
const SCALE = 0.001;

const until = untilWith({ timeoutMs: 10_000, everyMs: 10 });

const configMap = (name: string, data: Record<string, string> = { v: "1" }) =>
  `apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ${name}\ndata:\n${Object.entries(data)
    .map(([k, v]) => `  ${k}: "${v}"`)
    .join("\n")}\n`;

const manyConfigMaps = (n: number, value = "1") =>
  Array.from({ length: n }, (_, i) => configMap(`cm-${i}`, { v: value })).join("---\n");

describe("fluxsim", () => {
  let api: ApiServer;
  let git: GitServer;
  let sim: FluxSim;
  let custom: k8s.CustomObjectsApi;
  let core: k8s.CoreV1Api;
  let skew = 0;
  let seq = 0;
  /** Real time, shifted by `skew` so a test can move wall-clock seconds forward without waiting. */
  const clock: Clock = { ...realClock, now: () => Date.now() + skew };

  beforeAll(async () => {
    api = await startApiServer({ bookmarkIntervalMs: 100 });
    await api.installCrdFile(crd("flux-gitrepository.yaml"));
    await api.installCrdFile(crd("flux-kustomization.yaml"));
    git = await startGitServer();
    const kc = api.kubeConfig();
    custom = kc.makeApiClient(k8s.CustomObjectsApi);
    core = kc.makeApiClient(k8s.CoreV1Api);
    sim = await startFluxSim({
      kubeConfig: kc,
      clock,
      knobs: { defaultIntervalScale: SCALE, perObjectApplyMs: 1 },
    });
  });
  afterAll(async () => {
    await sim?.stop();
    await api?.close();
    await git?.close();
  });

  // ---- helpers ---------------------------------------------------------------------------------

  interface Env {
    ns: string;
    url: string;
    /** A clone to push from, made on first use. */
    peer(): Promise<GitPeer>;
  }

  /** A namespace of its own and a repository of its own (branch main) for one test. */
  async function env(files: Record<string, string>): Promise<Env> {
    const ns = `t${++seq}`;
    await core.createNamespace({ body: { metadata: { name: ns } } });
    const url = await git.createRepo(ns, files);
    let peer: Promise<GitPeer> | undefined;
    return { ns, url, peer: () => (peer ??= GitPeer.clone(url)) };
  }

  async function gitRepository(e: Env, spec: Record<string, unknown> = {}, name = "repo") {
    await custom.createNamespacedCustomObject({
      ...SRC,
      namespace: e.ns,
      body: {
        apiVersion: "source.toolkit.fluxcd.io/v1",
        kind: "GitRepository",
        metadata: { name, namespace: e.ns },
        spec: { interval: "100h", url: e.url, ref: { branch: "main" }, ...spec },
      },
    });
  }

  async function kustomization(e: Env, spec: Record<string, unknown> = {}, name = "apps") {
    await custom.createNamespacedCustomObject({
      ...KS,
      namespace: e.ns,
      body: {
        apiVersion: "kustomize.toolkit.fluxcd.io/v1",
        kind: "Kustomization",
        metadata: { name, namespace: e.ns },
        spec: {
          interval: "100h",
          prune: true,
          path: "./apps",
          targetNamespace: e.ns,
          sourceRef: { kind: "GitRepository", name: "repo" },
          ...spec,
        },
      },
    });
  }

  const getSrc = async (ns: string, name = "repo") =>
    (await custom.getNamespacedCustomObject({ ...SRC, namespace: ns, name })) as any;
  const getKs = async (ns: string, name = "apps") =>
    (await custom.getNamespacedCustomObject({ ...KS, namespace: ns, name })) as any;
  const ready = (o: any) => o?.status?.conditions?.find((c: any) => c.type === "Ready");
  const patch = (kind: typeof SRC, ns: string, name: string, body: object) =>
    custom.patchNamespacedCustomObject({ ...kind, namespace: ns, name, body }, MERGE);
  const stamp = async (kind: typeof SRC, ns: string, name: string) => {
    const token = `t-${++seq}`;
    await patch(kind, ns, name, { metadata: { annotations: { "reconcile.fluxcd.io/requestedAt": token } } });
    return token;
  };
  const tip = async (e: Env) => (await git.tip(e.ns)) as string;

  /** Waits until the Kustomization is Ready=True with this revision applied. */
  const appliedAt = (ns: string, revision: string, name = "apps") =>
    until(async () => {
      const ks = await getKs(ns, name);
      return ready(ks)?.status === "True" && ks.status.lastAppliedRevision === revision && ks;
    }, `${ns}/${name} applied at ${revision}`);

  /** Pushes a change and stamps the GitRepository so its artifact holds the new tip. */
  async function pushAndFetch(e: Env, path: string, content: string): Promise<string> {
    const sha = await (await e.peer()).commitAndPush(path, content, `change ${path}`);
    const token = await stamp(SRC, e.ns, "repo");
    await until(async () => {
      const s = await getSrc(e.ns);
      return (
        s.status?.lastHandledReconcileAt === token && s.status?.artifact?.revision === `main@sha1:${sha}`
      );
    }, "artifact of the new tip");
    return `main@sha1:${sha}`;
  }

  /** A GitRepository and a Kustomization over `files`, applied once. */
  async function applied(files: Record<string, string>, ksSpec: Record<string, unknown> = {}) {
    const e = await env(files);
    await gitRepository(e);
    // The artifact first: a Kustomization without one would leave a dependency requeue pending.
    await until(async () => (await getSrc(e.ns)).status?.artifact, "first artifact");
    await kustomization(e, ksSpec);
    const revision = `main@sha1:${await tip(e)}`;
    await appliedAt(e.ns, revision);
    return { ...e, revision };
  }

  // ---- GitRepository ---------------------------------------------------------------------------

  it("GitRepository fetches spec.ref.branch from the Git server; artifact revision is <branch>@sha1:<40 hex>", async () => {
    const e = await env({ "apps/a.yaml": configMap("a") });
    await (await e.peer()).writeFile("apps/a.yaml", configMap("a", { v: "release" }));
    await (await e.peer()).commit("release content");
    await gitOk(["push", "-q", "origin", "HEAD:refs/heads/release"], { cwd: (await e.peer()).dir });
    await gitRepository(e, { ref: { branch: "release" } });
    const src = await until(async () => (await getSrc(e.ns)).status?.artifact && getSrc(e.ns), "artifact");
    const releaseTip = await git.tip(e.ns, "release");
    expect(src.status.artifact.revision).toMatch(/^release@sha1:[0-9a-f]{40}$/);
    expect(src.status.artifact.revision).toBe(`release@sha1:${releaseTip}`);
    expect(src.status.artifact.digest).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(ready(src)).toMatchObject({
      status: "True",
      reason: "Succeeded",
      message: `stored artifact for revision 'release@sha1:${releaseTip}'`,
    });
    expect(src.status.observedGeneration).toBe(1);
  });

  it("GitRepository fetches again on its interval", async () => {
    const e = await env({ "apps/a.yaml": configMap("a") });
    await gitRepository(e, { interval: "1m" }); // 60 ms here
    await until(async () => (await getSrc(e.ns)).status?.artifact, "first artifact");
    const sha = await (await e.peer()).commitAndPush("apps/a.yaml", configMap("a", { v: "2" }), "second");
    await until(
      async () => (await getSrc(e.ns)).status?.artifact?.revision === `main@sha1:${sha}`,
      "artifact of the pushed commit, with no request",
    );
    expect(sim.fetches({ namespace: e.ns, name: "repo" })).toBeGreaterThanOrEqual(2);
  });

  it("GitRepository fetches on a changed reconcile.fluxcd.io/requestedAt", async () => {
    const e = await env({ "apps/a.yaml": configMap("a") });
    await gitRepository(e);
    await until(async () => (await getSrc(e.ns)).status?.artifact, "first artifact");
    const sha = await (await e.peer()).commitAndPush("apps/a.yaml", configMap("a", { v: "2" }), "second");
    const fetchesBefore = sim.fetches({ namespace: e.ns, name: "repo" });
    const token = await stamp(SRC, e.ns, "repo");
    const src = await until(
      async () => ((await getSrc(e.ns)).status?.lastHandledReconcileAt === token ? getSrc(e.ns) : undefined),
      "token handled",
    );
    expect(src.status.artifact.revision).toBe(`main@sha1:${sha}`);
    expect(sim.fetches({ namespace: e.ns, name: "repo" })).toBe(fetchesBefore + 1);
  });

  it("GitRepository copies requestedAt to lastHandledReconcileAt on every return, suspended included", async () => {
    const e = await env({ "apps/a.yaml": configMap("a") });
    await gitRepository(e);
    const first = await until(async () => (await getSrc(e.ns)).status?.artifact?.revision, "first artifact");
    await patch(SRC, e.ns, "repo", { spec: { suspend: true } });
    await sim.idle();
    await (await e.peer()).commitAndPush("apps/a.yaml", configMap("a", { v: "2" }), "second");
    const fetchesBefore = sim.fetches({ namespace: e.ns, name: "repo" });
    const token = await stamp(SRC, e.ns, "repo");
    const src = await until(
      async () => ((await getSrc(e.ns)).status?.lastHandledReconcileAt === token ? getSrc(e.ns) : undefined),
      "token handled while suspended",
    );
    expect(src.status.artifact.revision).toBe(first);
    expect(sim.fetches({ namespace: e.ns, name: "repo" })).toBe(fetchesBefore);
  });

  it("a new artifact revision queues every Kustomization that reads the source", async () => {
    const e = await env({ "apps/a.yaml": configMap("a"), "more/b.yaml": configMap("b") });
    await gitRepository(e);
    await kustomization(e, {}, "apps");
    await kustomization(e, { path: "./more" }, "more");
    const first = `main@sha1:${await tip(e)}`;
    await appliedAt(e.ns, first, "apps");
    await appliedAt(e.ns, first, "more");
    const revision = await pushAndFetch(e, "more/b.yaml", configMap("b", { v: "2" }));
    await appliedAt(e.ns, revision, "apps");
    await appliedAt(e.ns, revision, "more");
    const cm = await core.readNamespacedConfigMap({ namespace: e.ns, name: "b" });
    expect(cm.data).toEqual({ v: "2" });
  });

  // ---- Kustomization: what a reconcile applies -------------------------------------------------

  it("applies the objects under spec.path (YAML files, multi-document) by server-side apply as kustomize-controller with owner labels", async () => {
    const e = await applied({
      "apps/one.yaml": `${configMap("a")}---\n${configMap("b")}`,
      "apps/sub/two.yml": configMap("c"),
      "apps/README.md": "not a manifest",
      "other/d.yaml": configMap("d"),
    });
    const cms = await core.listNamespacedConfigMap({ namespace: e.ns });
    expect(cms.items.map((c) => c.metadata!.name).sort()).toEqual(["a", "b", "c"]);
    for (const cm of cms.items) {
      expect(cm.metadata!.labels).toMatchObject({
        "kustomize.toolkit.fluxcd.io/name": "apps",
        "kustomize.toolkit.fluxcd.io/namespace": e.ns,
      });
      expect(cm.metadata!.managedFields).toEqual([
        expect.objectContaining({ manager: "kustomize-controller", operation: "Apply" }),
      ]);
    }
  });

  it("records status.inventory.entries as <ns>_<name>_<group>_<kind> with the version", async () => {
    const e = await applied({
      "apps/ns.yaml": "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: inv-extra\n",
      "apps/cm.yaml": configMap("a"),
    });
    const ks = await getKs(e.ns);
    expect(ks.status.inventory.entries).toEqual([
      { id: "_inv-extra__Namespace", v: "v1" },
      { id: `${e.ns}_a__ConfigMap`, v: "v1" },
    ]);
  });

  it("prunes objects that left the inventory when spec.prune, and leaves them when not", async () => {
    const e = await applied({ "apps/a.yaml": configMap("a"), "apps/b.yaml": configMap("b") });
    await kustomization(e, { prune: false, path: "./apps", targetNamespace: "default" }, "keep");
    await appliedAt(e.ns, e.revision, "keep");
    await rm(join((await e.peer()).dir, "apps/b.yaml"));
    const sha = await (await e.peer()).commit("drop b");
    await (await e.peer()).push();
    const token = await stamp(SRC, e.ns, "repo");
    await until(async () => (await getSrc(e.ns)).status?.lastHandledReconcileAt === token, "fetched");
    const revision = `main@sha1:${sha}`;
    const pruned = await appliedAt(e.ns, revision);
    expect(pruned.status.inventory.entries).toEqual([{ id: `${e.ns}_a__ConfigMap`, v: "v1" }]);
    await expect(core.readNamespacedConfigMap({ namespace: e.ns, name: "b" })).rejects.toMatchObject({
      code: 404,
    });
    const kept = await appliedAt(e.ns, revision, "keep");
    expect(kept.status.inventory.entries).toEqual([{ id: "default_a__ConfigMap", v: "v1" }]);
    expect((await core.readNamespacedConfigMap({ namespace: "default", name: "b" })).metadata!.name).toBe(
      "b",
    );
  });

  // ---- Kustomization: what queues a reconcile --------------------------------------------------

  it("Kustomization reconciles on a new generation", async () => {
    const e = await applied({ "apps/a.yaml": configMap("a") });
    const ref = { namespace: e.ns, name: "apps" };
    await sim.idle();
    const before = sim.reconciles(ref);
    await patch(KS, e.ns, "apps", { spec: { timeout: "3m" } });
    const ks = await until(async () => {
      const o = await getKs(e.ns);
      return o.status?.observedGeneration === 2 && o;
    }, "generation 2 observed");
    expect(ready(ks).status).toBe("True");
    expect(sim.reconciles(ref)).toBe(before + 1);
  });

  it("Kustomization reconciles on a new requestedAt and records it in lastHandledReconcileAt", async () => {
    const e = await applied({ "apps/a.yaml": configMap("a") });
    const ref = { namespace: e.ns, name: "apps" };
    await sim.idle();
    const before = sim.reconciles(ref);
    const token = await stamp(KS, e.ns, "apps");
    await until(async () => (await getKs(e.ns)).status?.lastHandledReconcileAt === token, "token handled");
    expect(sim.reconciles(ref)).toBe(before + 1);
  });

  it("Kustomization reconciles on its interval", async () => {
    const e = await applied({ "apps/a.yaml": configMap("a") }, { interval: "1m" }); // 60 ms here
    const ref = { namespace: e.ns, name: "apps" };
    const before = sim.reconciles(ref);
    await until(async () => sim.reconciles(ref) >= before + 3, "three more reconciles on the interval");
    // drift is reverted by a timed reconcile alone
    await core.patchNamespacedConfigMap(
      { namespace: e.ns, name: "a", body: { data: { v: "drifted" } }, fieldManager: "kubectl-edit" },
      MERGE,
    );
    await until(
      async () => (await core.readNamespacedConfigMap({ namespace: e.ns, name: "a" })).data?.v === "1",
      "drift reverted",
    );
  });

  it("Kustomization retries a failed apply after retryInterval", async () => {
    const e = await applied({ "apps/a.yaml": configMap("a") }, { retryInterval: "1m" }); // 60 ms here
    const ref = { namespace: e.ns, name: "apps" };
    await sim.idle();
    sim.failNextApply(ref, "build");
    const before = sim.reconciles(ref);
    await stamp(KS, e.ns, "apps");
    await until(async () => ready(await getKs(e.ns))?.reason === "BuildFailed", "build failure");
    const ks = await until(async () => {
      const o = await getKs(e.ns);
      return ready(o)?.reason === "ReconciliationSucceeded" && o;
    }, "success on the retry, with no further request");
    expect(sim.reconciles(ref)).toBeGreaterThanOrEqual(before + 2);
    expect(ks.status.history[0].lastReconciledStatus).toBe("ReconciliationSucceeded");
  });

  it("a new requestedAt reconciles at once while a failed reconcile waits for its retryInterval", async () => {
    // 10h scaled: far longer than the test, so only the token explains the second reconcile.
    const e = await applied({ "apps/a.yaml": configMap("a") }, { retryInterval: "10h" });
    const ref = { namespace: e.ns, name: "apps" };
    await sim.idle();
    sim.failNextApply(ref, "build");
    const before = sim.reconciles(ref);
    await stamp(KS, e.ns, "apps");
    await until(async () => ready(await getKs(e.ns))?.reason === "BuildFailed", "build failure");
    expect(sim.reconciles(ref)).toBe(before + 1);
    // The failed reconcile requeued after retryInterval; a reconcile request does not wait for it.
    const token = await stamp(KS, e.ns, "apps");
    const ks = await until(async () => {
      const o = await getKs(e.ns);
      return (
        o?.status?.lastHandledReconcileAt === token && ready(o)?.reason === "ReconciliationSucceeded" && o
      );
    }, "the requested reconcile, at once");
    expect(sim.reconciles(ref)).toBe(before + 2);
    expect(ks.status.lastAppliedRevision).toBe(`main@sha1:${await tip(e)}`);
  });

  it("Kustomization runs one reconcile per object at a time", async () => {
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

    // Through the API: five tokens stamped during a running apply make one more reconcile.
    const e = await applied({ "apps/many.yaml": manyConfigMaps(10) });
    const ref = { namespace: e.ns, name: "apps" };
    await sim.idle();
    sim.knobs.perObjectApplyMs = 20;
    try {
      const before = sim.reconciles(ref);
      await stamp(KS, e.ns, "apps");
      await until(async () => ready(await getKs(e.ns))?.status === "Unknown", "apply running");
      let last = "";
      for (let i = 0; i < 5; i++) last = await stamp(KS, e.ns, "apps");
      await until(
        async () => (await getKs(e.ns)).status?.lastHandledReconcileAt === last,
        "last token handled",
      );
      await sim.idle();
      expect(sim.reconciles(ref)).toBe(before + 2);
    } finally {
      sim.knobs.perObjectApplyMs = 1;
    }
  });

  // ---- Kustomization: suspend ------------------------------------------------------------------

  it("Kustomization reads spec.suspend only when a reconcile starts: a suspend does not stop a running apply", async () => {
    const e = await applied({ "apps/many.yaml": manyConfigMaps(20) });
    const ref = { namespace: e.ns, name: "apps" };
    await sim.idle();
    sim.knobs.perObjectApplyMs = 15;
    try {
      const revision = await pushAndFetch(e, "apps/many.yaml", manyConfigMaps(20, "2"));
      await until(async () => ready(await getKs(e.ns))?.status === "Unknown", "apply running");
      await patch(KS, e.ns, "apps", { spec: { suspend: true } });
      const ks = await appliedAt(e.ns, revision);
      expect(ks.spec.suspend).toBe(true);
      const cms = await core.listNamespacedConfigMap({ namespace: e.ns });
      expect(cms.items.every((c) => c.data?.v === "2")).toBe(true);
      expect(sim.appliedRevisions(ref).at(-1)).toBe(revision);
    } finally {
      sim.knobs.perObjectApplyMs = 1;
    }
  });

  it("a suspended Kustomization returns before resolving the source but still copies requestedAt to lastHandledReconcileAt", async () => {
    const e = await applied({ "apps/a.yaml": configMap("a") });
    const ref = { namespace: e.ns, name: "apps" };
    await sim.idle();
    const before = sim.reconciles(ref);
    const token = `t-${++seq}`;
    // One write: suspended, pointed at a source that does not exist, and a token.
    await patch(KS, e.ns, "apps", {
      metadata: { annotations: { "reconcile.fluxcd.io/requestedAt": token } },
      spec: { suspend: true, sourceRef: { kind: "GitRepository", name: "missing" } },
    });
    const ks = await until(async () => {
      const o = await getKs(e.ns);
      return o.status?.lastHandledReconcileAt === token && o;
    }, "token handled");
    expect(ready(ks)).toMatchObject({ status: "True", reason: "ReconciliationSucceeded" });
    expect(sim.reconciles(ref)).toBe(before);
  });

  it("Kustomization writes lastAttemptedRevision before the build", async () => {
    const e = await applied({ "apps/a.yaml": configMap("a") });
    const ref = { namespace: e.ns, name: "apps" };
    await sim.idle();
    sim.failNextApply(ref, "build");
    const revision = await pushAndFetch(e, "apps/a.yaml", configMap("a", { v: "2" }));
    const ks = await until(async () => {
      const o = await getKs(e.ns);
      return ready(o)?.status === "False" && o;
    }, "build failure");
    expect(ready(ks)).toMatchObject({
      reason: "BuildFailed",
      message: expect.stringContaining("kustomize build failed"),
    });
    expect(ks.status.lastAttemptedRevision).toBe(revision);
    expect(ks.status.lastAppliedRevision).toBe(e.revision);
    expect(ks.status.conditions.find((c: any) => c.type === "Reconciling")?.reason).toBe(
      "ProgressingWithRetry",
    );
    expect((await core.readNamespacedConfigMap({ namespace: e.ns, name: "a" })).data).toEqual({ v: "1" });
  });

  it("Ready goes Unknown/Progressing at the start of a real reconcile (lastTransitionTime moves), then True/ReconciliationSucceeded with lastAppliedRevision", async () => {
    const e = await applied({ "apps/a.yaml": configMap("a") });
    await sim.idle();
    const previous = ready(await getKs(e.ns));
    skew += 5000; // five seconds later, without waiting for them
    const seen: any[] = [];
    const watch = new k8s.Watch(api.kubeConfig());
    const req = await watch.watch(
      `/apis/kustomize.toolkit.fluxcd.io/v1/namespaces/${e.ns}/kustomizations`,
      {},
      (_type, obj: any) => {
        const r = ready(obj);
        if (r)
          seen.push({ status: r.status, reason: r.reason, message: r.message, at: r.lastTransitionTime });
      },
      () => {},
    );
    try {
      const revision = await pushAndFetch(e, "apps/a.yaml", configMap("a", { v: "2" }));
      const ks = await appliedAt(e.ns, revision);
      await until(
        async () => seen.some((s) => s.status === "True" && s.at === ready(ks).lastTransitionTime),
        "watch",
      );
      const unknown = seen.find((s) => s.status === "Unknown");
      expect(unknown).toMatchObject({ reason: "Progressing", message: "Reconciliation in progress" });
      expect(unknown.at).not.toBe(previous.lastTransitionTime);
      expect(ready(ks)).toMatchObject({
        reason: "ReconciliationSucceeded",
        message: `Applied revision: ${revision}`,
      });
      expect(Date.parse(ready(ks).lastTransitionTime)).toBeGreaterThan(
        Date.parse(previous.lastTransitionTime),
      );
      expect(seen.findIndex((s) => s.status === "Unknown")).toBeLessThan(
        seen.findIndex((s) => s.status === "True" && s.at === ready(ks).lastTransitionTime),
      );
    } finally {
      req.abort();
    }
  });

  it("Ready goes False with the failure reason: a failed health check after the apply keeps lastAppliedRevision", async () => {
    const e = await applied({ "apps/a.yaml": configMap("a") });
    const ref = { namespace: e.ns, name: "apps" };
    await sim.idle();
    sim.failNextApply(ref, "health");
    const revision = await pushAndFetch(e, "apps/a.yaml", configMap("a", { v: "2" }));
    const ks = await until(async () => {
      const o = await getKs(e.ns);
      return ready(o)?.status === "False" && o;
    }, "health check failure");
    expect(ready(ks).reason).toBe("HealthCheckFailed");
    expect(ks.status.conditions.find((c: any) => c.type === "Healthy")).toMatchObject({ status: "False" });
    expect(ks.status.lastAttemptedRevision).toBe(revision);
    expect(ks.status.lastAppliedRevision).toBe(e.revision);
    expect(ks.status.history[0]).toMatchObject({
      lastReconciledStatus: "HealthCheckFailed",
      metadata: { revision },
    });
    expect((await core.readNamespacedConfigMap({ namespace: e.ns, name: "a" })).data).toEqual({ v: "2" });
    expect(sim.appliedRevisions(ref).at(-1)).toBe(revision);
  });

  it("DependencyNotReady while a dependsOn entry is not Ready at its generation", async () => {
    const e = await env({ "apps/a.yaml": configMap("a"), "infra/i.yaml": configMap("i") });
    await gitRepository(e);
    const revision = `main@sha1:${await tip(e)}`;
    await kustomization(e, { path: "./absent" }, "infra"); // fails: no such path
    await kustomization(e, { dependsOn: [{ name: "infra" }] }, "apps");
    await until(async () => ready(await getKs(e.ns, "infra"))?.reason === "ArtifactFailed", "infra failing");
    const blocked = await until(async () => {
      const o = await getKs(e.ns, "apps");
      return ready(o)?.reason === "DependencyNotReady" && o;
    }, "apps held back");
    expect(ready(blocked)).toMatchObject({
      status: "False",
      message: `dependency '${e.ns}/infra' is not ready`,
    });
    // Suspended after its failure, the dependency still holds its dependents back.
    await patch(KS, e.ns, "infra", { spec: { suspend: true, path: "./infra" } });
    await sim.idle();
    // A few dependency requeues (30 ms each here) of the dependent, each still held back.
    const requeues = sim.reconciles({ namespace: e.ns, name: "apps" });
    await until(
      async () => sim.reconciles({ namespace: e.ns, name: "apps" }) >= requeues + 3,
      "three more reconciles of apps",
    );
    await sim.idle();
    expect(ready(await getKs(e.ns, "apps"))?.reason).toBe("DependencyNotReady");
    expect(sim.appliedRevisions({ namespace: e.ns, name: "apps" })).toEqual([]);
    // Resumed, it succeeds, and the dependent follows on its next requeue.
    await patch(KS, e.ns, "infra", { spec: { suspend: false } });
    await appliedAt(e.ns, revision, "infra");
    await appliedAt(e.ns, revision, "apps");
  });

  it("observedGeneration is set whenever Ready ends True, a suspended return with a Ready left from before included", async () => {
    const e = await applied({ "apps/a.yaml": configMap("a") });
    const ref = { namespace: e.ns, name: "apps" };
    await sim.idle();
    sim.failNextApply(ref, "build");
    await patch(KS, e.ns, "apps", { spec: { timeout: "2m" } }); // generation 2, fails
    await until(async () => ready(await getKs(e.ns))?.reason === "BuildFailed", "failure");
    expect((await getKs(e.ns)).status.observedGeneration).toBe(1);
    await patch(KS, e.ns, "apps", { spec: { timeout: "3m" } }); // generation 3, succeeds
    await until(async () => (await getKs(e.ns)).status?.observedGeneration === 3, "generation 3 observed");
    const before = sim.reconciles(ref);
    await patch(KS, e.ns, "apps", { spec: { suspend: true } }); // generation 4, nothing applied
    const ks = await until(async () => {
      const o = await getKs(e.ns);
      return o.status?.observedGeneration === 4 && o;
    }, "generation 4 observed while suspended");
    expect(ready(ks).status).toBe("True");
    expect(sim.reconciles(ref)).toBe(before);
  });

  it("status.history holds at most 5 snapshots, newest first, with digest, revision and counts", async () => {
    const e = await applied({ "apps/a.yaml": configMap("a") });
    await sim.idle();
    const token = await stamp(KS, e.ns, "apps"); // same content again: counted into one snapshot
    const again = await until(async () => {
      const o = await getKs(e.ns);
      return o.status?.lastHandledReconcileAt === token && o;
    }, "second reconcile");
    expect(again.status.history).toHaveLength(1);
    expect(again.status.history[0]).toMatchObject({
      digest: expect.stringMatching(/^sha256:[0-9a-f]{64}$/),
      totalReconciliations: 2,
      lastReconciledStatus: "ReconciliationSucceeded",
      metadata: { revision: e.revision },
      firstReconciled: expect.any(String),
      lastReconciled: expect.any(String),
      lastReconciledDuration: expect.any(String),
    });
    // Six more builds of one revision, each different (another target namespace), a second apart.
    for (let i = 1; i <= 6; i++) {
      const target = `${e.ns}-h${i}`;
      await core.createNamespace({ body: { metadata: { name: target } } });
      skew += 1000;
      await patch(KS, e.ns, "apps", { spec: { targetNamespace: target } });
      await until(async () => {
        const o = await getKs(e.ns);
        return o.status?.observedGeneration === 1 + i && ready(o)?.status === "True";
      }, `build ${i} applied`);
    }
    const ks = await getKs(e.ns);
    expect(ks.status.history).toHaveLength(5);
    expect(new Set(ks.status.history.map((h: any) => h.digest)).size).toBe(5);
    const times = ks.status.history.map((h: any) => Date.parse(h.lastReconciled));
    expect(times).toEqual([...times].sort((a, b) => b - a));
    expect(new Set(times).size).toBe(5);
    for (const h of ks.status.history)
      expect(h).toMatchObject({ totalReconciliations: 1, metadata: { revision: e.revision } });
  });

  it("timing knobs: fetch latency delays the artifact, per-object apply time scales with the objects", async () => {
    const e = await applied({ "apps/many.yaml": manyConfigMaps(20) });
    await sim.idle();
    sim.knobs.fetchLatencyMs = 150;
    sim.knobs.perObjectApplyMs = 10;
    try {
      const t0 = Date.now();
      const revision = await pushAndFetch(e, "apps/many.yaml", manyConfigMaps(20, "2"));
      expect(Date.now() - t0).toBeGreaterThanOrEqual(150);
      const t1 = Date.now();
      await appliedAt(e.ns, revision);
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
    const e = await env({ "apps/a.yaml": configMap("a") });
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
        spec: { interval: "100h", url: e.url, ref: { branch: "main" } },
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

  // ---- the seed's measured observations --------------------------------------------------------

  it("measured: suspended ignores new artifacts (0 of N), suspend does not stop a running apply, requestedAt on a suspended object is handled without an apply, a resume alone applies, a resume applies what the artifact holds then", async () => {
    const N = 3;
    const e = await applied({ "apps/many.yaml": manyConfigMaps(10) });
    const ref = { namespace: e.ns, name: "apps" };
    await sim.idle();

    // 1. A suspended Kustomization ignores new artifacts: 0 of N.
    await patch(KS, e.ns, "apps", { spec: { suspend: true } });
    await sim.idle();
    const reconcilesSuspended = sim.reconciles(ref);
    const appliedSuspended = sim.appliedRevisions(ref).length;
    let latest = e.revision;
    for (let i = 0; i < N; i++) latest = await pushAndFetch(e, "apps/many.yaml", manyConfigMaps(10, `s${i}`));
    await sim.idle();
    const ignored = await getKs(e.ns);
    expect(sim.reconciles(ref) - reconcilesSuspended).toBe(0);
    expect(sim.appliedRevisions(ref).length - appliedSuspended).toBe(0);
    expect(ignored.status.lastAppliedRevision).toBe(e.revision);

    // 2. A requestedAt on the suspended object is handled without an apply.
    const token = await stamp(KS, e.ns, "apps");
    await until(async () => (await getKs(e.ns)).status?.lastHandledReconcileAt === token, "token handled");
    expect(sim.reconciles(ref)).toBe(reconcilesSuspended);
    expect((await core.readNamespacedConfigMap({ namespace: e.ns, name: "cm-0" })).data).toEqual({ v: "1" });

    // 3. A resume applies whatever the artifact holds then (the last of the N commits).
    await patch(KS, e.ns, "apps", { spec: { suspend: false } });
    await appliedAt(e.ns, latest);
    expect((await core.readNamespacedConfigMap({ namespace: e.ns, name: "cm-0" })).data).toEqual({
      v: `s${N - 1}`,
    });
    expect(sim.appliedRevisions(ref).slice(appliedSuspended)).toEqual([latest]);

    // 4. A resume alone applies: a drifted object is reverted with no new commit.
    await patch(KS, e.ns, "apps", { spec: { suspend: true } });
    await sim.idle();
    await core.patchNamespacedConfigMap(
      { namespace: e.ns, name: "cm-3", body: { data: { v: "drifted" } }, fieldManager: "kubectl-edit" },
      MERGE,
    );
    const beforeResume = sim.reconciles(ref);
    await patch(KS, e.ns, "apps", { spec: { suspend: false } });
    await until(
      async () =>
        (await core.readNamespacedConfigMap({ namespace: e.ns, name: "cm-3" })).data?.v === `s${N - 1}`,
      "drift reverted by the resume",
    );
    expect(sim.reconciles(ref)).toBe(beforeResume + 1);
    expect(await tip(e)).toBe(latest.split(":")[1]);

    // 5. A suspend does not stop an apply already running.
    sim.knobs.perObjectApplyMs = 20;
    try {
      const next = await pushAndFetch(e, "apps/many.yaml", manyConfigMaps(10, "last"));
      await until(async () => ready(await getKs(e.ns))?.status === "Unknown", "apply running");
      await patch(KS, e.ns, "apps", { spec: { suspend: true } });
      await appliedAt(e.ns, next);
      const cms = await core.listNamespacedConfigMap({ namespace: e.ns });
      expect(cms.items.every((c) => c.data?.v === "last")).toBe(true);
    } finally {
      sim.knobs.perObjectApplyMs = 1;
    }
  });
});
