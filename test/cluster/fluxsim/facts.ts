/**
 * Flux's facts as seed 000 states them (docs/testing-fluxsim.md), one test a fact, written once
 * and run against two backends: the simulated API server with fluxsim (fluxsim.test.ts, the
 * default suite) and the real control plane with real source-controller and kustomize-controller
 * (test/real/flux-facts.real.test.ts, the real tier). Where the two differ, fluxsim is wrong.
 */
import { rm } from "node:fs/promises";
import { join } from "node:path";
import * as k8s from "@kubernetes/client-node";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { gitOk } from "../../git/cli.js";
import { GitPeer } from "../../git/peer.js";
import type { GitServer } from "../../git/server.js";
import { untilWith } from "../../support/wait.js";
import type { FluxSim, ObjectName } from "./index.js";

export interface FluxBackend {
  kubeConfig: k8s.KubeConfig;
  git: GitServer;
  /**
   * A spec duration short enough for a test to see it pass several times: "1m" for fluxsim, whose
   * durations run 1000 times faster (60 ms), a few seconds for real Flux.
   */
  shortInterval: string;
  /** Reconciles of a Kustomization that got past its suspend check, so far. */
  reconciles(ref: ObjectName): number;
  /** Reconciles of a GitRepository that fetched from Git, so far. */
  fetches(ref: ObjectName): number;
  /** Revisions whose server-side apply completed, oldest first, for a Kustomization. */
  appliedRevisions(ref: ObjectName): string[];
  /** Resolves when neither controller has anything left to do for now. */
  idle(): Promise<void>;
  /** Lets `ms` of wall-clock time pass (fluxsim: its clock moves on without waiting). */
  advance(ms: number): Promise<void>;
  /** How many objects (at least 10) make an apply that `slowApplies` lets a test act during. */
  slowObjects: number;
  /** Makes applies of `slowObjects` last long enough to act while one runs; returns the undo. */
  slowApplies(): () => void;
  /** Namespaces a test may not leave behind (the real cluster is shared by the file's tests). */
  cleanUp(namespaces: string[]): Promise<void>;
  /** The simulator, for the facts only it can be made to show (injected failures). */
  sim?: FluxSim;
  stop(): Promise<void>;
}

const MERGE = k8s.setHeaderOptions("Content-Type", k8s.PatchStrategy.MergePatch);
const SRC = { group: "source.toolkit.fluxcd.io", version: "v1", plural: "gitrepositories" };
const KS = { group: "kustomize.toolkit.fluxcd.io", version: "v1", plural: "kustomizations" };

const configMap = (name: string, data: Record<string, string> = { v: "1" }) =>
  `apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ${name}\ndata:\n${Object.entries(data)
    .map(([k, v]) => `  ${k}: "${v}"`)
    .join("\n")}\n`;

export const manyConfigMaps = (n: number, value = "1") =>
  Array.from({ length: n }, (_, i) => configMap(`cm-${i}`, { v: value })).join("---\n");

export interface FluxFactsOptions {
  /** "simulated" or "real": names the describe block, and skips what only the simulator can show. */
  backend: "simulated" | "real";
  start: () => Promise<FluxBackend>;
  /** How long one condition may take here. */
  timeoutMs: number;
  /** Skips the whole set (the real binaries are not built): `start` is never called. */
  skip?: boolean;
}

export function describeFluxFacts(opts: FluxFactsOptions): void {
  /** Facts only fluxsim can be made to show (an injected failure): skipped on real Flux. */
  const onlySimulated = it.skipIf(opts.backend !== "simulated");
  const until = untilWith({ timeoutMs: opts.timeoutMs, everyMs: opts.backend === "real" ? 50 : 10 });

  describe.skipIf(opts.skip ?? false)(`Flux facts (${opts.backend})`, () => {
    let b: FluxBackend;
    let custom: k8s.CustomObjectsApi;
    let core: k8s.CoreV1Api;
    let seq = 0;
    /** Namespaces this test made, removed after it. */
    let made: string[] = [];
    const prefix = `f${process.pid.toString(36)}`;

    beforeAll(async () => {
      b = await opts.start();
      custom = b.kubeConfig.makeApiClient(k8s.CustomObjectsApi);
      core = b.kubeConfig.makeApiClient(k8s.CoreV1Api);
    });
    afterEach(async () => {
      const names = made;
      made = [];
      await b.cleanUp(names);
    });
    afterAll(async () => {
      await b?.stop();
    });

    const namespace = async (name: string) => {
      await core.createNamespace({ body: { metadata: { name } } });
      made.push(name);
    };

    // ---- helpers ---------------------------------------------------------------------------------

    interface Env {
      ns: string;
      url: string;
      /** A clone to push from, made on first use. */
      peer(): Promise<GitPeer>;
    }

    /** A namespace of its own and a repository of its own (branch main) for one test. */
    async function env(files: Record<string, string>): Promise<Env> {
      const ns = `${prefix}-${++seq}`;
      await namespace(ns);
      const url = await b.git.createRepo(ns, files);
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
      await patch(kind, ns, name, {
        metadata: { annotations: { "reconcile.fluxcd.io/requestedAt": token } },
      });
      return token;
    };
    const tip = async (e: Env) => (await b.git.tip(e.ns)) as string;

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
      const releaseTip = await b.git.tip(e.ns, "release");
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
      await gitRepository(e, { interval: b.shortInterval });
      await until(async () => (await getSrc(e.ns)).status?.artifact, "first artifact");
      const sha = await (await e.peer()).commitAndPush("apps/a.yaml", configMap("a", { v: "2" }), "second");
      await until(
        async () => (await getSrc(e.ns)).status?.artifact?.revision === `main@sha1:${sha}`,
        "artifact of the pushed commit, with no request",
      );
      expect(b.fetches({ namespace: e.ns, name: "repo" })).toBeGreaterThanOrEqual(2);
    });

    it("GitRepository fetches on a changed reconcile.fluxcd.io/requestedAt", async () => {
      const e = await env({ "apps/a.yaml": configMap("a") });
      await gitRepository(e);
      await until(async () => (await getSrc(e.ns)).status?.artifact, "first artifact");
      const sha = await (await e.peer()).commitAndPush("apps/a.yaml", configMap("a", { v: "2" }), "second");
      const fetchesBefore = b.fetches({ namespace: e.ns, name: "repo" });
      const token = await stamp(SRC, e.ns, "repo");
      const src = await until(
        async () =>
          (await getSrc(e.ns)).status?.lastHandledReconcileAt === token ? getSrc(e.ns) : undefined,
        "token handled",
      );
      expect(src.status.artifact.revision).toBe(`main@sha1:${sha}`);
      expect(b.fetches({ namespace: e.ns, name: "repo" })).toBe(fetchesBefore + 1);
    });

    it("GitRepository copies requestedAt to lastHandledReconcileAt on every return, suspended included", async () => {
      const e = await env({ "apps/a.yaml": configMap("a") });
      await gitRepository(e);
      const first = await until(
        async () => (await getSrc(e.ns)).status?.artifact?.revision,
        "first artifact",
      );
      await patch(SRC, e.ns, "repo", { spec: { suspend: true } });
      await b.idle();
      await (await e.peer()).commitAndPush("apps/a.yaml", configMap("a", { v: "2" }), "second");
      const fetchesBefore = b.fetches({ namespace: e.ns, name: "repo" });
      const token = await stamp(SRC, e.ns, "repo");
      const src = await until(
        async () =>
          (await getSrc(e.ns)).status?.lastHandledReconcileAt === token ? getSrc(e.ns) : undefined,
        "token handled while suspended",
      );
      expect(src.status.artifact.revision).toBe(first);
      expect(b.fetches({ namespace: e.ns, name: "repo" })).toBe(fetchesBefore);
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
        // kustomize's namespace transformer renames a Namespace to the targetNamespace.
        { id: `_${e.ns}__Namespace`, v: "v1" },
        { id: `${e.ns}_a__ConfigMap`, v: "v1" },
      ]);
    });

    it("a kustomization.yaml's namespace moves namespaced objects and renames a Namespace; other cluster-scoped objects keep theirs", async () => {
      const e = await env({ "README.md": "manifests under apps/" });
      const peer = await e.peer();
      // Names of this test's own: the cluster may be shared.
      await peer.writeFile(
        "apps/all.yaml",
        [
          "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: renamed\n",
          `apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: ${e.ns}-reader\nrules: []\n`,
          configMap("a"),
        ].join("---\n"),
      );
      const sha = await peer.commitAndPush(
        "apps/kustomization.yaml",
        `apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: ${e.ns}\nresources:\n  - all.yaml\n`,
        "a namespace for the folder",
      );
      await gitRepository(e);
      await kustomization(e, { targetNamespace: undefined });
      const ks = await appliedAt(e.ns, `main@sha1:${sha}`);
      expect(ks.status.inventory.entries).toEqual([
        { id: `_${e.ns}__Namespace`, v: "v1" },
        { id: `_${e.ns}-reader_rbac.authorization.k8s.io_ClusterRole`, v: "v1" },
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
      await b.idle();
      const before = b.reconciles(ref);
      await patch(KS, e.ns, "apps", { spec: { timeout: "3m" } });
      const ks = await until(async () => {
        const o = await getKs(e.ns);
        return o.status?.observedGeneration === 2 && o;
      }, "generation 2 observed");
      expect(ready(ks).status).toBe("True");
      expect(b.reconciles(ref)).toBe(before + 1);
    });

    it("Kustomization reconciles on a new requestedAt and records it in lastHandledReconcileAt", async () => {
      const e = await applied({ "apps/a.yaml": configMap("a") });
      const ref = { namespace: e.ns, name: "apps" };
      await b.idle();
      const before = b.reconciles(ref);
      const token = await stamp(KS, e.ns, "apps");
      await until(async () => (await getKs(e.ns)).status?.lastHandledReconcileAt === token, "token handled");
      expect(b.reconciles(ref)).toBe(before + 1);
    });

    it("Kustomization reconciles on its interval", async () => {
      const e = await applied({ "apps/a.yaml": configMap("a") }, { interval: b.shortInterval });
      const ref = { namespace: e.ns, name: "apps" };
      const before = b.reconciles(ref);
      await until(async () => b.reconciles(ref) >= before + 3, "three more reconciles on the interval");
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

    onlySimulated("Kustomization retries a failed apply after retryInterval", async () => {
      const e = await applied({ "apps/a.yaml": configMap("a") }, { retryInterval: "1m" }); // 60 ms here
      const ref = { namespace: e.ns, name: "apps" };
      await b.idle();
      b.sim!.failNextApply(ref, "build");
      const before = b.reconciles(ref);
      await stamp(KS, e.ns, "apps");
      await until(async () => ready(await getKs(e.ns))?.reason === "BuildFailed", "build failure");
      const ks = await until(async () => {
        const o = await getKs(e.ns);
        return ready(o)?.reason === "ReconciliationSucceeded" && o;
      }, "success on the retry, with no further request");
      expect(b.reconciles(ref)).toBeGreaterThanOrEqual(before + 2);
      expect(ks.status.history[0].lastReconciledStatus).toBe("ReconciliationSucceeded");
    });

    onlySimulated(
      "a new requestedAt reconciles at once while a failed reconcile waits for its retryInterval",
      async () => {
        // 10h scaled: far longer than the test, so only the token explains the second reconcile.
        const e = await applied({ "apps/a.yaml": configMap("a") }, { retryInterval: "10h" });
        const ref = { namespace: e.ns, name: "apps" };
        await b.idle();
        b.sim!.failNextApply(ref, "build");
        const before = b.reconciles(ref);
        await stamp(KS, e.ns, "apps");
        await until(async () => ready(await getKs(e.ns))?.reason === "BuildFailed", "build failure");
        expect(b.reconciles(ref)).toBe(before + 1);
        // The failed reconcile requeued after retryInterval; a reconcile request does not wait for it.
        const token = await stamp(KS, e.ns, "apps");
        const ks = await until(async () => {
          const o = await getKs(e.ns);
          return (
            o?.status?.lastHandledReconcileAt === token && ready(o)?.reason === "ReconciliationSucceeded" && o
          );
        }, "the requested reconcile, at once");
        expect(b.reconciles(ref)).toBe(before + 2);
        expect(ks.status.lastAppliedRevision).toBe(`main@sha1:${await tip(e)}`);
      },
    );

    it("Kustomization runs one reconcile per object at a time", async () => {
      // Through the API: five tokens stamped during a running apply make one more reconcile.
      const e = await applied({ "apps/many.yaml": manyConfigMaps(b.slowObjects) });
      const ref = { namespace: e.ns, name: "apps" };
      await b.idle();
      const fast = b.slowApplies();
      try {
        const before = b.reconciles(ref);
        await stamp(KS, e.ns, "apps");
        await until(async () => ready(await getKs(e.ns))?.status === "Unknown", "apply running");
        let last = "";
        for (let i = 0; i < 5; i++) last = await stamp(KS, e.ns, "apps");
        await until(
          async () => (await getKs(e.ns)).status?.lastHandledReconcileAt === last,
          "last token handled",
        );
        await b.idle();
        expect(b.reconciles(ref)).toBe(before + 2);
      } finally {
        fast();
      }
    });

    // ---- Kustomization: suspend ------------------------------------------------------------------

    it("Kustomization reads spec.suspend only when a reconcile starts: a suspend does not stop a running apply", async () => {
      const e = await applied({ "apps/many.yaml": manyConfigMaps(b.slowObjects) });
      const ref = { namespace: e.ns, name: "apps" };
      await b.idle();
      const fast = b.slowApplies();
      try {
        const revision = await pushAndFetch(e, "apps/many.yaml", manyConfigMaps(b.slowObjects, "2"));
        await until(async () => ready(await getKs(e.ns))?.status === "Unknown", "apply running");
        await patch(KS, e.ns, "apps", { spec: { suspend: true } });
        const ks = await appliedAt(e.ns, revision);
        expect(ks.spec.suspend).toBe(true);
        const cms = await core.listNamespacedConfigMap({ namespace: e.ns });
        expect(cms.items.every((c) => c.data?.v === "2")).toBe(true);
        expect(b.appliedRevisions(ref).at(-1)).toBe(revision);
      } finally {
        fast();
      }
    });

    it("a suspended Kustomization returns before resolving the source but still copies requestedAt to lastHandledReconcileAt", async () => {
      const e = await applied({ "apps/a.yaml": configMap("a") });
      const ref = { namespace: e.ns, name: "apps" };
      await b.idle();
      const before = b.reconciles(ref);
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
      expect(b.reconciles(ref)).toBe(before);
    });

    it("Kustomization writes lastAttemptedRevision before the build", async () => {
      const e = await applied({ "apps/a.yaml": configMap("a") });
      const ref = { namespace: e.ns, name: "apps" };
      await b.idle();
      // A commit that changes a.yaml and names a resource the folder does not hold: no build.
      await (await e.peer()).writeFile("apps/a.yaml", configMap("a", { v: "2" }));
      const revision = await pushAndFetch(
        e,
        "apps/kustomization.yaml",
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - a.yaml\n  - missing.yaml\n",
      );
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
      expect(b.appliedRevisions(ref)).toEqual([e.revision]);
    });

    it("Ready goes Unknown/Progressing at the start of a real reconcile (lastTransitionTime moves), then True/ReconciliationSucceeded with lastAppliedRevision", async () => {
      const e = await applied({ "apps/a.yaml": configMap("a") });
      await b.idle();
      const previous = ready(await getKs(e.ns));
      await b.advance(5000);
      const seen: any[] = [];
      const watch = new k8s.Watch(b.kubeConfig);
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

    onlySimulated(
      "Ready goes False with the failure reason: a failed health check after the apply keeps lastAppliedRevision",
      async () => {
        const e = await applied({ "apps/a.yaml": configMap("a") });
        const ref = { namespace: e.ns, name: "apps" };
        await b.idle();
        b.sim!.failNextApply(ref, "health");
        const revision = await pushAndFetch(e, "apps/a.yaml", configMap("a", { v: "2" }));
        const ks = await until(async () => {
          const o = await getKs(e.ns);
          return ready(o)?.status === "False" && o;
        }, "health check failure");
        expect(ready(ks).reason).toBe("HealthCheckFailed");
        expect(ks.status.conditions.find((c: any) => c.type === "Healthy")).toMatchObject({
          status: "False",
        });
        expect(ks.status.lastAttemptedRevision).toBe(revision);
        expect(ks.status.lastAppliedRevision).toBe(e.revision);
        expect(ks.status.history[0]).toMatchObject({
          lastReconciledStatus: "HealthCheckFailed",
          metadata: { revision },
        });
        expect((await core.readNamespacedConfigMap({ namespace: e.ns, name: "a" })).data).toEqual({ v: "2" });
        expect(b.appliedRevisions(ref).at(-1)).toBe(revision);
      },
    );

    it("DependencyNotReady while a dependsOn entry is not Ready at its generation", async () => {
      const e = await env({ "apps/a.yaml": configMap("a"), "infra/i.yaml": configMap("i") });
      await gitRepository(e);
      const revision = `main@sha1:${await tip(e)}`;
      await kustomization(e, { path: "./absent" }, "infra"); // fails: no such path
      await kustomization(e, { dependsOn: [{ name: "infra" }] }, "apps");
      await until(
        async () => ready(await getKs(e.ns, "infra"))?.reason === "ArtifactFailed",
        "infra failing",
      );
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
      await b.idle();
      // A few dependency requeues of the dependent, each still held back.
      const requeues = b.reconciles({ namespace: e.ns, name: "apps" });
      await until(
        async () => b.reconciles({ namespace: e.ns, name: "apps" }) >= requeues + 3,
        "three more reconciles of apps",
      );
      await b.idle();
      expect(ready(await getKs(e.ns, "apps"))?.reason).toBe("DependencyNotReady");
      expect(b.appliedRevisions({ namespace: e.ns, name: "apps" })).toEqual([]);
      // Resumed, it succeeds, and the dependent follows on its next requeue.
      await patch(KS, e.ns, "infra", { spec: { suspend: false } });
      await appliedAt(e.ns, revision, "infra");
      await appliedAt(e.ns, revision, "apps");
    });

    it("observedGeneration is set whenever Ready ends True, a suspended return with a Ready left from before included", async () => {
      const e = await applied({ "apps/a.yaml": configMap("a") });
      const ref = { namespace: e.ns, name: "apps" };
      await b.idle();
      await patch(KS, e.ns, "apps", { spec: { path: "./absent" } }); // generation 2, fails
      await until(async () => ready(await getKs(e.ns))?.status === "False", "failure");
      expect((await getKs(e.ns)).status.observedGeneration).toBe(1);
      await patch(KS, e.ns, "apps", { spec: { path: "./apps" } }); // generation 3, succeeds
      await until(async () => (await getKs(e.ns)).status?.observedGeneration === 3, "generation 3 observed");
      const before = b.reconciles(ref);
      await patch(KS, e.ns, "apps", { spec: { suspend: true } }); // generation 4, nothing applied
      const ks = await until(async () => {
        const o = await getKs(e.ns);
        return o.status?.observedGeneration === 4 && o;
      }, "generation 4 observed while suspended");
      expect(ready(ks).status).toBe("True");
      expect(b.reconciles(ref)).toBe(before);
    });

    it("status.history holds at most 5 snapshots, newest first, with digest, revision and counts", async () => {
      const e = await applied({ "apps/a.yaml": configMap("a") });
      await b.idle();
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
        await namespace(target);
        await b.advance(1000);
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

    // ---- the seed's measured observations --------------------------------------------------------

    it("measured: suspended ignores new artifacts (0 of N), suspend does not stop a running apply, requestedAt on a suspended object is handled without an apply, a resume alone applies, a resume applies what the artifact holds then", async () => {
      const N = 3;
      const many = b.slowObjects;
      const e = await applied({ "apps/many.yaml": manyConfigMaps(many) });
      const ref = { namespace: e.ns, name: "apps" };
      await b.idle();

      // 1. A suspended Kustomization ignores new artifacts: 0 of N.
      await patch(KS, e.ns, "apps", { spec: { suspend: true } });
      await b.idle();
      const reconcilesSuspended = b.reconciles(ref);
      const appliedSuspended = b.appliedRevisions(ref).length;
      let latest = e.revision;
      for (let i = 0; i < N; i++)
        latest = await pushAndFetch(e, "apps/many.yaml", manyConfigMaps(many, `s${i}`));
      await b.idle();
      const ignored = await getKs(e.ns);
      expect(b.reconciles(ref) - reconcilesSuspended).toBe(0);
      expect(b.appliedRevisions(ref).length - appliedSuspended).toBe(0);
      expect(ignored.status.lastAppliedRevision).toBe(e.revision);

      // 2. A requestedAt on the suspended object is handled without an apply.
      const token = await stamp(KS, e.ns, "apps");
      await until(async () => (await getKs(e.ns)).status?.lastHandledReconcileAt === token, "token handled");
      expect(b.reconciles(ref)).toBe(reconcilesSuspended);
      expect((await core.readNamespacedConfigMap({ namespace: e.ns, name: "cm-0" })).data).toEqual({
        v: "1",
      });

      // 3. A resume applies whatever the artifact holds then (the last of the N commits).
      await patch(KS, e.ns, "apps", { spec: { suspend: false } });
      await appliedAt(e.ns, latest);
      expect((await core.readNamespacedConfigMap({ namespace: e.ns, name: "cm-0" })).data).toEqual({
        v: `s${N - 1}`,
      });
      expect(b.appliedRevisions(ref).slice(appliedSuspended)).toEqual([latest]);

      // 4. A resume alone applies: a drifted object is reverted with no new commit.
      await patch(KS, e.ns, "apps", { spec: { suspend: true } });
      await b.idle();
      await core.patchNamespacedConfigMap(
        { namespace: e.ns, name: "cm-3", body: { data: { v: "drifted" } }, fieldManager: "kubectl-edit" },
        MERGE,
      );
      const beforeResume = b.reconciles(ref);
      await patch(KS, e.ns, "apps", { spec: { suspend: false } });
      await until(
        async () =>
          (await core.readNamespacedConfigMap({ namespace: e.ns, name: "cm-3" })).data?.v === `s${N - 1}`,
        "drift reverted by the resume",
      );
      expect(b.reconciles(ref)).toBe(beforeResume + 1);
      expect(await tip(e)).toBe(latest.split(":")[1]);

      // 5. A suspend does not stop an apply already running.
      const fast = b.slowApplies();
      try {
        const next = await pushAndFetch(e, "apps/many.yaml", manyConfigMaps(many, "last"));
        await until(async () => ready(await getKs(e.ns))?.status === "Unknown", "apply running");
        await patch(KS, e.ns, "apps", { spec: { suspend: true } });
        await appliedAt(e.ns, next);
        const cms = await core.listNamespacedConfigMap({ namespace: e.ns });
        expect(cms.items.every((c) => c.data?.v === "last")).toBe(true);
      } finally {
        fast();
      }
    });
  });
}
