// Real Argo CD (repo-server and application-controller built from argo-cd's module) on the real
// control plane, syncing from our Git smart-HTTP server: what its controller writes, as it writes it.
// One cluster and one Argo CD for the file; each test gets its own destination namespace, and its
// Applications and namespace are removed after it.
import * as k8s from "@kubernetes/client-node";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { gitOk } from "../git/cli.js";
import { GitPeer } from "../git/peer.js";
import { type GitServer, startGitServer } from "../git/server.js";
import { untilWith } from "../support/wait.js";
import { argoApplication, createApplication, type RealArgoCD, startRealArgoCD } from "./argocd.js";
import { ARGOCD_BINARIES, CONTROL_PLANE, findRealBinaries } from "./binaries.js";
import { type RealCluster, startRealCluster } from "./cluster.js";

const bins = findRealBinaries([...CONTROL_PLANE, ...ARGOCD_BINARIES]);
if (!bins.built) console.warn(`\n!!! SKIPPED test/real/argocd.real.test.ts: ${bins.message}\n`);

const GROUP = "argoproj.io";
const VERSION = "v1alpha1";
const until = untilWith({ timeoutMs: 60_000, everyMs: 100, retryErrors: true });
const statusOf = (err: unknown): number | undefined => (err as { code?: number }).code;

const cm = (name: string, data: Record<string, string>, extra = "") =>
  `apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ${name}\n${extra}data:\n${Object.entries(data)
    .map(([k, v]) => `  ${k}: "${v}"`)
    .join("\n")}\n`;

describe.skipIf(!bins.built)("real Argo CD", () => {
  let cluster: RealCluster;
  let argocd: RealArgoCD;
  let git: GitServer;
  let kc: k8s.KubeConfig;
  let custom: k8s.CustomObjectsApi;
  let core: k8s.CoreV1Api;
  let seq = 0;
  let ns = "";

  beforeAll(async () => {
    cluster = await startRealCluster();
    argocd = await startRealArgoCD(cluster);
    git = await startGitServer();
    kc = cluster.kubeConfig();
    custom = kc.makeApiClient(k8s.CustomObjectsApi);
    core = kc.makeApiClient(k8s.CoreV1Api);
  }, 240_000);
  afterAll(async () => {
    await git?.close();
    await argocd?.stop();
    await cluster?.stop();
  }, 60_000);
  beforeEach(async () => {
    ns = `argo-${++seq}`;
    await core.createNamespace({ body: { metadata: { name: ns } } });
  });
  afterEach(async () => {
    await custom.deleteCollectionNamespacedCustomObject({
      group: GROUP,
      version: VERSION,
      namespace: "argocd",
      plural: "applications",
    });
    await core.deleteNamespace({ name: ns });
  });

  const repo = async (files: Record<string, string>) => {
    const name = `r${seq}`;
    await git.createRepo(name, Object.fromEntries(Object.entries(files).map(([k, v]) => [`deploy/${k}`, v])));
    return { url: git.repoUrl(name), tip: async () => (await git.tip(name, "main")) as string };
  };
  const getApp = (name: string) =>
    custom.getNamespacedCustomObject({
      group: GROUP,
      version: VERSION,
      namespace: "argocd",
      plural: "applications",
      name,
    }) as Promise<any>;
  const mergeApp = (name: string, body: unknown) =>
    custom.patchNamespacedCustomObject(
      { group: GROUP, version: VERSION, namespace: "argocd", plural: "applications", name, body },
      k8s.setHeaderOptions("Content-Type", k8s.PatchStrategy.MergePatch),
    ) as Promise<any>;
  /** As `argocd app sync` does: set operation at the version read, over a cleared operationState. */
  const startOperation = async (name: string, operation: unknown) => {
    for (;;) {
      const app = await getApp(name);
      if (app.operation) throw new Error("another operation is already in progress");
      app.operation = operation;
      if (app.status) delete app.status.operationState;
      try {
        return await custom.replaceNamespacedCustomObject({
          group: GROUP,
          version: VERSION,
          namespace: "argocd",
          plural: "applications",
          name,
          body: app,
        });
      } catch (e) {
        if (statusOf(e) !== 409) throw e;
      }
    }
  };
  const finished = (name: string) =>
    until(async () => {
      const app = await getApp(name);
      const s = app.status?.operationState;
      return s && ["Succeeded", "Failed", "Error"].includes(s.phase) && !app.operation ? app : undefined;
    }, `the operation of ${name} to end`);
  const readCm = (name: string) =>
    core.readNamespacedConfigMap({ name, namespace: ns }).catch((e) => {
      if (statusOf(e) === 404) return undefined;
      throw e;
    });
  const app = (name: string, url: string, syncPolicy?: Record<string, unknown>) =>
    createApplication(
      kc,
      argoApplication({ name, repoURL: url, path: "deploy", destinationNamespace: ns, syncPolicy }),
    );

  it("syncs a Git commit into ConfigMaps and records operation state, sync status and history", async () => {
    const r = await repo({ "a.yaml": cm("a", { k: "1" }), "b.yaml": cm("b", { k: "2" }) });
    const tip = await r.tip();
    await app("basic", r.url);
    const compared = await until(async () => {
      const s = (await getApp("basic")).status?.sync;
      return s?.status === "Unknown" ? undefined : s;
    }, "the first comparison");
    expect(compared).toMatchObject({ status: "OutOfSync", revision: tip });
    expect(await readCm("a")).toBeUndefined();

    const operation = {
      sync: { revision: "main", prune: false },
      initiatedBy: { username: "tester" },
      info: [{ name: "applygate.dev/operation-token", value: "tok-1" }],
    };
    await startOperation("basic", operation);
    const done = await finished("basic");
    const state = done.status.operationState;
    expect(state).toMatchObject({
      phase: "Succeeded",
      message: "successfully synced (all tasks run)",
      syncResult: { revision: tip },
    });
    // The copy is the controller's Go struct written back: a false field is left out (omitempty)
    // and retry, a struct rather than a pointer, is there even when empty.
    expect(state.operation).toEqual({ ...operation, sync: { revision: "main" }, retry: {} });
    expect(Date.parse(state.finishedAt)).toBeGreaterThanOrEqual(Date.parse(state.startedAt));
    // In the order the applies finished, which varies between two objects of one wave and kind.
    expect(state.syncResult.resources.map((x: any) => [x.kind, x.name, x.status]).sort()).toEqual([
      ["ConfigMap", "a", "Synced"],
      ["ConfigMap", "b", "Synced"],
    ]);
    expect(done.status.history).toHaveLength(1);
    expect(done.status.history[0]).toMatchObject({
      id: 0,
      revision: tip,
      initiatedBy: { username: "tester" },
    });
    const a = await readCm("a");
    expect(a?.data).toEqual({ k: "1" });
    expect(a?.metadata?.annotations?.["argocd.argoproj.io/tracking-id"]).toBe(`basic:/ConfigMap:${ns}/a`);
    expect(a?.metadata?.managedFields?.map((m) => m.manager)).toContain("argocd-controller");
    await until(async () => {
      const s = (await getApp("basic")).status?.sync;
      return s?.status === "Synced" && s.revision === tip;
    }, "Synced at the tip");
  });

  it("ends an operation that waits for its retry when its phase is set to Terminating", async () => {
    // The object names a namespace that does not exist: every attempt fails.
    const r = await repo({ "a.yaml": cm("a", { k: "1" }, "  namespace: nowhere\n") });
    await app("term", r.url);
    await until(async () => (await getApp("term")).status?.sync, "the first comparison");
    await startOperation("term", {
      sync: { prune: false },
      initiatedBy: { username: "tester" },
      retry: { limit: 3, backoff: { duration: "10m", maxDuration: "1h" } },
    });
    const waiting = await until(async () => {
      const s = (await getApp("term")).status?.operationState;
      return s?.phase === "Running" && s.retryCount === 1 && s.finishedAt ? s : undefined;
    }, "the operation to wait for its first retry");
    expect(waiting.message).toMatch(/Retrying attempt #1 at \d{1,2}:\d{2}(AM|PM)\.$/);

    // What `argocd app terminate-op` does: phase Terminating, through an update of the Application.
    for (;;) {
      const current = await getApp("term");
      current.status.operationState.phase = "Terminating";
      const written = await custom
        .replaceNamespacedCustomObject({
          group: GROUP,
          version: VERSION,
          namespace: "argocd",
          plural: "applications",
          name: "term",
          body: current,
        })
        .then(
          () => true,
          (e) => (statusOf(e) === 409 ? false : Promise.reject(e)),
        );
      if (written) break;
    }
    const ended = (await finished("term")).status.operationState;
    expect(ended).toMatchObject({
      phase: "Failed",
      retryCount: 1,
      message: "Operation terminated (retried 1 times).",
    });
  });

  it("syncs by itself with automated sync on, and not once it is switched off", async () => {
    const r = await repo({ "a.yaml": cm("a", { k: "1" }) });
    await app("auto", r.url, { automated: {} });
    await app("manual", r.url, { automated: { enabled: false } });
    const auto = (await finished("auto")).status.operationState;
    expect(auto.phase).toBe("Succeeded");
    expect(auto.operation.initiatedBy).toEqual({ automated: true });
    expect(auto.operation.sync.revision).toBe(await r.tip());
    expect((await getApp("manual")).status?.operationState).toBeUndefined();

    // Switched off, a new commit is compared (OutOfSync) but not synced.
    await mergeApp("auto", { spec: { syncPolicy: { automated: { enabled: false } } } });
    const peer = await GitPeer.clone(r.url);
    const next = await peer.commitAndPush("deploy/a.yaml", cm("a", { k: "2" }), "k=2");
    await mergeApp("auto", { metadata: { annotations: { "argocd.argoproj.io/refresh": "normal" } } });
    await until(async () => {
      const s = (await getApp("auto")).status?.sync;
      return s?.revision === next && s.status === "OutOfSync";
    }, "the new commit compared");
    expect((await readCm("a"))?.data).toEqual({ k: "1" });
    expect((await getApp("auto")).status.operationState.syncResult.revision).not.toBe(next);

    // Switched on again, it syncs what it found.
    await mergeApp("auto", { spec: { syncPolicy: { automated: { enabled: true } } } });
    await until(
      async () => (await getApp("auto")).status?.operationState?.syncResult?.revision === next,
      "auto sync",
    );
    await until(async () => (await readCm("a"))?.data?.k === "2", "the new value applied");
  });

  it("prunes an object removed from Git with foreground deletion, its dependents collected first", async () => {
    const r = await repo({ "a.yaml": cm("a", { k: "1" }), "b.yaml": cm("b", { k: "1" }) });
    await app("prune", r.url);
    await until(async () => (await getApp("prune")).status?.sync, "the first comparison");
    await startOperation("prune", { sync: { prune: false }, initiatedBy: { username: "tester" } });
    await finished("prune");
    const b = await readCm("b");
    // A dependent of b, made by somebody else, blocking b's deletion until it is gone.
    await core.createNamespacedConfigMap({
      namespace: ns,
      body: {
        metadata: {
          name: "b-child",
          ownerReferences: [
            {
              apiVersion: "v1",
              kind: "ConfigMap",
              name: "b",
              uid: b!.metadata!.uid!,
              blockOwnerDeletion: true,
            },
          ],
        },
      },
    });
    const peer = await GitPeer.clone(r.url);
    await gitOk(["rm", "-q", "deploy/b.yaml"], { cwd: peer.dir });
    await peer.commit("drop b");
    await peer.push();
    await mergeApp("prune", { metadata: { annotations: { "argocd.argoproj.io/refresh": "normal" } } });
    await until(
      async () => (await getApp("prune")).status?.sync?.revision === (await r.tip()),
      "the drop compared",
    );

    await startOperation("prune", { sync: { prune: true }, initiatedBy: { username: "tester" } });
    const state = (await finished("prune")).status.operationState;
    expect(state.phase).toBe("Succeeded");
    expect(state.syncResult.resources).toContainEqual(
      expect.objectContaining({ name: "b", status: "Pruned", message: "pruned" }),
    );
    await until(async () => !(await readCm("b")) && !(await readCm("b-child")), "b and its dependent gone");
    expect((await readCm("a"))?.data).toEqual({ k: "1" });
  });
});
