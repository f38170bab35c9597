/**
 * The Argo CD facts argosim reproduces, one test per fact the applier relies on, named after the
 * fact, run with the same bodies against two backends: argosim on the simulated API server
 * (argosim.test.ts, the default suite) and real Argo CD on the real control plane
 * (test/real/argosim-facts.real.test.ts). Where the two differ, argosim is wrong.
 *
 * A few facts need a handle only the simulator has (hold or fail the next sync, an injected clock,
 * its knobs, an older Argo CD's schema): they run on argosim alone, and are listed as skipped on
 * the real backend with the handle they need.
 */
import * as k8s from "@kubernetes/client-node";
import { afterAll, afterEach, beforeAll, describe, expect, it, onTestFinished } from "vitest";
import { GitPeer } from "../../git/peer.js";
import { type GitServer, startGitServer } from "../../git/server.js";
import { untilWith } from "../../support/wait.js";
import { startApiServer } from "../apiserver/index.js";
import type { AppRef, ArgoSim, ArgoSimOptions, SyncRecord } from "./index.js";
import { argocdApplicationCrd, startArgoSim } from "./index.js";

const crd = (file: string) => new URL(`../crds/${file}`, import.meta.url).pathname;
const GROUP = "argoproj.io";
const VERSION = "v1alpha1";

/** What only the simulator offers a test. */
export type SimHandle = "hold" | "fail" | "syncs" | "clock" | "knobs" | "versions" | "stop" | "appsets";

/** The controller of one test: argosim started for it, or the real one set as it asks. */
export interface ArgoController {
  knobs: ArgoSim["knobs"];
  /** Resolves once the controller has nothing left to do (the simulator knows; the real one is watched until quiet). */
  idle(): Promise<void>;
  failNextSync(app: AppRef, phase?: "Failed" | "Error"): void;
  holdSync(app: AppRef): { release(): void };
  syncs(app: AppRef): SyncRecord[];
}

export interface ArgoFactsBackend {
  name: string;
  /** The simulator's handles this backend offers. */
  handles: ReadonlySet<SimHandle>;
  /**
   * An API server with Argo CD's CRDs, namespaces argocd (Argo CD's own), apps (the destination)
   * and team (Applications outside argocd); answers its admin.
   */
  start(): Promise<k8s.KubeConfig>;
  /** The controller for one test, with the simulator's options (knobs.refreshIntervalMs on both). */
  controller(opts: Partial<ArgoSimOptions>): Promise<ArgoController>;
  /** After each test: its controller stopped (argosim) or its Applications and objects removed (real). */
  reset(): Promise<void>;
  stop(): Promise<void>;
}

const cm = (name: string, data: Record<string, string>, annotations?: Record<string, string>) =>
  `apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ${name}\n${
    annotations
      ? `  annotations:\n${Object.entries(annotations)
          .map(([k, v]) => `    ${k}: "${v}"`)
          .join("\n")}\n`
      : ""
  }data:\n${Object.entries(data)
    .map(([k, v]) => `  ${k}: "${v}"`)
    .join("\n")}\n`;

export function describeArgoFacts(backend: ArgoFactsBackend, timeoutMs = 30_000): void {
  const until = untilWith({ timeoutMs, everyMs: 25, retryErrors: true });
  /** A fact whose test needs simulator handles: skipped, naming them, on a backend without them. */
  const fact = (name: string, needs: SimHandle[], body: () => Promise<void>, testTimeout?: number) => {
    const missing = needs.filter((h) => !backend.handles.has(h));
    if (missing.length > 0) it.skip(`${name} [needs the simulator's ${missing.join(", ")}]`, body);
    else it(name, body, testTimeout);
  };

  describe(backend.name, () => {
    let gitServer: GitServer;
    let kc: k8s.KubeConfig;
    let custom: k8s.CustomObjectsApi;
    let core: k8s.CoreV1Api;
    let seq = 0;

    beforeAll(async () => {
      kc = await backend.start();
      custom = kc.makeApiClient(k8s.CustomObjectsApi);
      core = kc.makeApiClient(k8s.CoreV1Api);
      gitServer = await startGitServer();
    }, 240_000);
    afterEach(async () => {
      await backend.reset();
    }, 60_000);
    afterAll(async () => {
      await gitServer?.close();
      await backend.stop();
    }, 60_000);

    const sim = (opts: Partial<ArgoSimOptions> = {}) => backend.controller(opts);

    /** A repository with deploy/ holding the files, and a peer to push more commits. */
    const repo = async (files: Record<string, string>) => {
      const name = `r${++seq}`;
      const prefixed = Object.fromEntries(Object.entries(files).map(([k, v]) => [`deploy/${k}`, v]));
      await gitServer.createRepo(name, prefixed);
      const url = gitServer.repoUrl(name);
      const tip = async (branch = "main") => (await gitServer.tip(name, branch)) as string;
      let peer: GitPeer | undefined;
      return {
        url,
        tip,
        async push(path: string, content: string) {
          peer ??= await GitPeer.clone(url);
          return peer.commitAndPush(`deploy/${path}`, content, `change ${path}`);
        },
      };
    };

    const getApp = (name: string, namespace = "argocd") =>
      custom.getNamespacedCustomObject({
        group: GROUP,
        version: VERSION,
        namespace,
        plural: "applications",
        name,
      }) as Promise<any>;

    const createApp = async (
      name: string,
      url: string,
      spec: Record<string, unknown> = {},
      namespace = "argocd",
      annotations?: Record<string, string>,
    ) =>
      custom.createNamespacedCustomObject({
        group: GROUP,
        version: VERSION,
        namespace,
        plural: "applications",
        body: {
          apiVersion: `${GROUP}/${VERSION}`,
          kind: "Application",
          metadata: { name, namespace, ...(annotations ? { annotations } : {}) },
          spec: {
            project: "default",
            destination: { server: "https://kubernetes.default.svc", namespace: "apps" },
            source: { repoURL: url, path: "deploy", targetRevision: "main" },
            ...spec,
          },
        },
      }) as Promise<any>;

    const mergeApp = (name: string, body: unknown, namespace = "argocd") =>
      custom.patchNamespacedCustomObject(
        { group: GROUP, version: VERSION, namespace, plural: "applications", name, body },
        k8s.setHeaderOptions("Content-Type", k8s.PatchStrategy.MergePatch),
      ) as Promise<any>;

    /** What applygate (or `argocd app sync`) does: set operation, clear operationState, at the version read. */
    const startOperation = async (name: string, operation: unknown, namespace = "argocd") => {
      for (;;) {
        const app = await getApp(name, namespace);
        if (app.operation) throw new Error("another operation is already in progress");
        app.operation = operation;
        if (app.status) delete app.status.operationState;
        try {
          return await custom.replaceNamespacedCustomObject({
            group: GROUP,
            version: VERSION,
            namespace,
            plural: "applications",
            name,
            body: app,
          });
        } catch (e) {
          if ((e as { code?: number }).code !== 409) throw e;
        }
      }
    };

    const manualSync = (revision?: string, extra: Record<string, unknown> = {}) => ({
      sync: { ...(revision ? { revision } : {}), prune: false },
      initiatedBy: { username: "tester" },
      ...extra,
    });

    const opState = async (name: string, namespace = "argocd") =>
      (await getApp(name, namespace)).status?.operationState;
    const finished = (name: string, namespace = "argocd") =>
      until(async () => {
        const app = await getApp(name, namespace);
        const s = app.status?.operationState;
        return s && ["Succeeded", "Failed", "Error"].includes(s.phase) && !app.operation ? s : undefined;
      }, `operation of ${name} to complete`);
    const readCm = (name: string, namespace = "apps") =>
      core.readNamespacedConfigMap({ name, namespace }).catch(() => undefined);

    // ---- Application basics ---------------------------------------------------------------------

    fact(
      "the Application CRD has no status subresource, so status is written through the main resource",
      [],
      async () => {
        const r = await repo({ "a.yaml": cm("basics-a", { k: "1" }) });
        await sim();
        await createApp("basics", r.url);
        const app = await until(async () => {
          const a = await getApp("basics");
          return a.status?.sync?.revision ? a : undefined;
        }, "a refresh");
        expect(app.status.sync.revision).toBe(await r.tip());
        const resources = await custom.getAPIResources({ group: GROUP, version: VERSION });
        expect(resources.resources.map((x: { name: string }) => x.name)).toContain("applications");
        expect(resources.resources.map((x: { name: string }) => x.name)).not.toContain("applications/status");
        // The controller's status write is an update of the main resource under its user agent.
        const managers = (app.metadata.managedFields ?? []).map((m: any) => [m.manager, m.subresource ?? ""]);
        expect(managers).toContainEqual(["argocd-application-controller", ""]);
      },
    );

    fact("automated sync is on when automated is present and enabled is unset or true", [], async () => {
      const r = await repo({ "a.yaml": cm("auto-a", { k: "1" }) });
      const s = await sim();
      await createApp("auto-unset", r.url, { syncPolicy: { automated: {} } });
      await createApp("auto-true", r.url, { syncPolicy: { automated: { enabled: true } } });
      await createApp("auto-false", r.url, { syncPolicy: { automated: { enabled: false, prune: true } } });
      await createApp("auto-absent", r.url);
      expect((await finished("auto-unset")).phase).toBe("Succeeded");
      expect((await finished("auto-true")).phase).toBe("Succeeded");
      for (const name of ["auto-false", "auto-absent"])
        await until(
          async () => (await getApp(name)).status?.sync?.status === "OutOfSync",
          `${name} compared`,
        );
      await s.idle();
      for (const name of ["auto-false", "auto-absent"]) {
        const app = await getApp(name);
        expect(app.operation).toBeUndefined();
        expect(app.status.operationState).toBeUndefined();
        if (backend.handles.has("syncs")) expect(s.syncs({ namespace: "argocd", name })).toEqual([]);
      }
    });

    fact(
      "automated sync builds Operation{sync{revision, prune, syncOptions, source}, initiatedBy automated, retry limit 5} and sets it in an update that clears operationState",
      [],
      async () => {
        const r = await repo({ "a.yaml": cm("build-a", { k: "1" }) });
        const seen: any[] = [];
        const watch = await new k8s.Watch(kc).watch(
          `/apis/${GROUP}/${VERSION}/namespaces/argocd/applications`,
          { fieldSelector: "metadata.name=build" },
          (_t, o) => seen.push(structuredClone(o)),
          () => {},
        );
        try {
          await sim();
          await createApp("build", r.url, {
            syncPolicy: { automated: { prune: true }, syncOptions: ["CreateNamespace=true"] },
          });
          const first = await finished("build");
          expect(first.operation).toEqual({
            sync: {
              revision: await r.tip(),
              prune: true,
              syncOptions: ["CreateNamespace=true"],
              source: { repoURL: r.url, path: "deploy", targetRevision: "main" },
            },
            initiatedBy: { automated: true },
            retry: { limit: 5 },
          });
          // The second automated sync is set over a completed state, which the same update clears.
          await r.push("b.yaml", cm("build-b", { k: "2" }));
          await mergeApp("build", { metadata: { annotations: { "argocd.argoproj.io/refresh": "normal" } } });
          await until(
            async () => (await finished("build")).syncResult?.revision === (await r.tip()),
            "second sync",
          );
          const setting = seen.filter((o) => o.operation && !o.status?.operationState);
          expect(setting.length).toBeGreaterThanOrEqual(2);
        } finally {
          watch.abort();
        }
      },
    );

    fact(
      "a timed refresh compares at the revision the repo-server resolved last (cached for minutes): a new commit waits for a refresh request, and automated sync then syncs it",
      [],
      async () => {
        const r = await repo({ "a.yaml": cm("timed-a", { k: "1" }) });
        await sim({ knobs: { refreshIntervalMs: 400 } });
        await createApp("timed", r.url, { syncPolicy: { automated: {} } });
        const first = (await finished("timed")).syncResult.revision;
        const next = await r.push("a.yaml", cm("timed-a", { k: "2" }));
        // Timed refreshes come and go (CompareWithLatest), each at the cached resolution of main.
        for (let i = 0; i < 2; i++) {
          const before = (await getApp("timed")).status.reconciledAt;
          await until(async () => (await getApp("timed")).status.reconciledAt !== before, "a timed refresh");
        }
        const app = await getApp("timed");
        expect(app.status.sync.revision).toBe(first);
        expect(app.status.operationState.syncResult.revision).toBe(first);
        expect((await readCm("timed-a"))?.data).toEqual({ k: "1" });
        // A refresh request resolves the branch again (CompareWithLatestForceResolve).
        await mergeApp("timed", { metadata: { annotations: { "argocd.argoproj.io/refresh": "normal" } } });
        const state = await until(async () => {
          const s = await opState("timed");
          return s?.phase === "Succeeded" && s.syncResult?.revision === next ? s : undefined;
        }, "the requested refresh to sync the new commit");
        expect(state.operation.initiatedBy).toEqual({ automated: true });
        expect((await readCm("timed-a"))?.data).toEqual({ k: "2" });
      },
    );

    fact(
      "a refresh annotation makes a refresh, is removed after it, and automated sync syncs what it found",
      [],
      async () => {
        const r = await repo({ "a.yaml": cm("annot-a", { k: "1" }) });
        await sim();
        await createApp("annot", r.url, { syncPolicy: { automated: {} } });
        await finished("annot");
        const next = await r.push("a.yaml", cm("annot-a", { k: "2" }));
        await mergeApp("annot", { metadata: { annotations: { "argocd.argoproj.io/refresh": "hard" } } });
        const app = await until(async () => {
          const a = await getApp("annot");
          return a.status?.operationState?.syncResult?.revision === next && !a.operation ? a : undefined;
        }, "the annotated refresh to sync the new commit");
        expect(app.metadata.annotations?.["argocd.argoproj.io/refresh"]).toBeUndefined();
        expect(app.status.sync.revision).toBe(next);
      },
    );

    fact(
      "status.sync.revision and status.sync.status (Synced/OutOfSync) are kept by refresh",
      [],
      async () => {
        const r = await repo({ "a.yaml": cm("status-a", { k: "1" }) });
        const refresh = () =>
          mergeApp("status", { metadata: { annotations: { "argocd.argoproj.io/refresh": "normal" } } });
        await sim();
        await createApp("status", r.url);
        const first = await until(async () => (await getApp("status")).status?.sync, "first refresh");
        expect(first).toMatchObject({ status: "OutOfSync", revision: await r.tip() });
        await startOperation("status", manualSync());
        await finished("status");
        await until(
          async () => (await getApp("status")).status?.sync?.status === "Synced",
          "Synced after the sync",
        );
        // Drift on the live object, seen by the next refresh.
        await core.patchNamespacedConfigMap(
          { name: "status-a", namespace: "apps", body: { data: { k: "drifted" } } },
          k8s.setHeaderOptions("Content-Type", k8s.PatchStrategy.MergePatch),
        );
        await refresh();
        await until(
          async () => (await getApp("status")).status?.sync?.status === "OutOfSync",
          "OutOfSync on drift",
        );
        // A new commit moves the revision at the next refresh.
        const next = await r.push("b.yaml", cm("status-b", { k: "1" }));
        await refresh();
        await until(async () => (await getApp("status")).status?.sync?.revision === next, "revision moves");
      },
    );

    fact(
      "a change to a managed object refreshes at once against the revision compared last (CompareWithRecent): self-heal syncs it back even when a newer commit holds the change",
      [],
      async () => {
        const r = await repo({ "a.yaml": cm("recent-a", { k: "1" }) });
        await sim();
        await createApp("recent", r.url, { syncPolicy: { automated: { selfHeal: true } } });
        const first = (await finished("recent")).syncResult.revision;
        await until(async () => {
          const s = (await getApp("recent")).status?.sync;
          return s?.status === "Synced" && s.revision === first;
        }, "the refresh after the sync");
        // The newer commit holds the edit; no timed refresh (an hour away) resolves it.
        await r.push("a.yaml", cm("recent-a", { k: "2" }));
        await core.patchNamespacedConfigMap(
          { name: "recent-a", namespace: "apps", body: { data: { k: "2" } } },
          k8s.setHeaderOptions("Content-Type", k8s.PatchStrategy.MergePatch),
        );
        const healed = await until(async () => {
          const s = await opState("recent");
          return s?.phase === "Succeeded" && s.operation.sync?.autoHealAttemptsCount === 1 ? s : undefined;
        }, "self-heal to sync the revision compared last");
        expect(healed.syncResult.revision).toBe(first);
        // It applied the object back to the revision compared last. (What the object holds a moment
        // later is not asserted: on real Argo CD a later refresh may resolve the branch anew and
        // automated sync then applies the newer commit; seen once in three runs.)
        expect(healed.operation.sync.resources).toEqual([{ kind: "ConfigMap", name: "recent-a" }]);
        expect(healed.syncResult.resources).toMatchObject([{ name: "recent-a", status: "Synced" }]);
      },
    );

    // ---- Operations -------------------------------------------------------------------------------

    fact("an operation is processed only while operation is set", [], async () => {
      const r = await repo({ "a.yaml": cm("gate-a", { k: "1" }) });
      const s = await sim();
      await createApp("gate", r.url);
      await until(async () => (await getApp("gate")).status?.sync, "refresh");
      await s.idle();
      expect((await getApp("gate")).status.operationState).toBeUndefined();
      expect(await readCm("gate-a")).toBeUndefined();
      await startOperation("gate", manualSync());
      expect((await finished("gate")).phase).toBe("Succeeded");
      expect((await readCm("gate-a"))?.data).toEqual({ k: "1" });
    });

    fact(
      "a new operation writes operationState with the operation copied (info included), phase Running and startedAt",
      ["hold", "syncs"],
      async () => {
        const r = await repo({ "a.yaml": cm("new-a", { k: "1" }) });
        const s = await sim();
        await createApp("new", r.url);
        const hold = s.holdSync({ namespace: "argocd", name: "new" });
        const op = manualSync(await r.tip(), {
          info: [
            { name: "applygate.dev/operation-token", value: "tok-1" },
            { name: "Reason", value: "ForeignCommit" },
          ],
          retry: { limit: 2 },
        });
        await startOperation("new", op);
        const state = await until(async () => {
          const st = await opState("new");
          return st?.phase === "Running" ? st : undefined;
        }, "Running");
        // Copied as the controller's Go types write it: prune: false (omitempty) left out.
        expect(state.operation).toEqual({ ...op, sync: { revision: op.sync.revision } });
        expect(Date.parse(state.startedAt)).toBeGreaterThan(0);
        expect(state.finishedAt).toBeUndefined();
        hold.release();
        await finished("new");
        expect(s.syncs({ namespace: "argocd", name: "new" })).toMatchObject([
          { revision: await r.tip(), token: "tok-1", initiatedBy: { username: "tester" } },
        ]);
      },
    );

    fact(
      "objects at the pinned revision are applied as field manager argocd-controller with the tracking annotation",
      [],
      async () => {
        const r = await repo({ "a.yaml": cm("pin-a", { k: "old" }) });
        const old = await r.tip();
        await r.push("a.yaml", cm("pin-a", { k: "new" }));
        await sim();
        await createApp("pin", r.url);
        await createApp("pin", r.url, {}, "team");
        await startOperation("pin", manualSync(old));
        const state = await finished("pin");
        expect(state.syncResult.revision).toBe(old);
        const live = await readCm("pin-a");
        expect(live?.data).toEqual({ k: "old" });
        expect(live?.metadata?.annotations?.["argocd.argoproj.io/tracking-id"]).toBe(
          "pin:/ConfigMap:apps/pin-a",
        );
        expect(live?.metadata?.managedFields?.map((m) => m.manager)).toEqual(["argocd-controller"]);
        // An Application outside Argo CD's namespace tracks as <namespace>_<name>.
        await startOperation("pin", manualSync(old), "team");
        await finished("pin", "team");
        expect((await readCm("pin-a"))?.metadata?.annotations?.["argocd.argoproj.io/tracking-id"]).toBe(
          "team_pin:/ConfigMap:apps/pin-a",
        );
      },
    );

    fact("the revision is resolved through the Git server from a SHA, a branch or HEAD", [], async () => {
      const r = await repo({ "a.yaml": cm("resolve-a", { k: "main" }) });
      const mainTip = await r.tip();
      const peer = await GitPeer.clone(r.url);
      await gitOkIn(peer.dir, ["checkout", "-q", "-b", "feature"]);
      await peer.writeFile("deploy/a.yaml", cm("resolve-a", { k: "feature" }));
      const featureTip = await peer.commit("feature change");
      await gitOkIn(peer.dir, ["push", "-q", "origin", "feature"]);
      await sim();
      await createApp("resolve", r.url);
      for (const [revision, want] of [
        ["feature", featureTip],
        ["HEAD", mainTip],
        [featureTip, featureTip],
        ["main", mainTip],
      ] as const) {
        await startOperation("resolve", manualSync(revision));
        const state = await finished("resolve");
        expect(state.phase).toBe("Succeeded");
        expect(state.syncResult.revision).toBe(want);
        expect(state.operation.sync.revision).toBe(revision);
      }
    });

    fact("ServerSideApply=true applies server-side as field manager argocd-controller", [], async () => {
      const r = await repo({ "a.yaml": cm("ssa-a", { k: "1" }) });
      await sim();
      await createApp("ssa", r.url);
      await startOperation("ssa", manualSync(undefined, { sync: { syncOptions: ["ServerSideApply=true"] } }));
      expect((await finished("ssa")).phase).toBe("Succeeded");
      const entries = (await readCm("ssa-a"))?.metadata?.managedFields?.map((m) => [m.manager, m.operation]);
      expect(entries).toEqual([["argocd-controller", "Apply"]]);
    });

    fact(
      "Replace=true writes with no field manager, so the API server records the user agent argocd-application-controller",
      [],
      async () => {
        const r = await repo({ "a.yaml": cm("replace-a", { k: "1" }) });
        await sim();
        await createApp("replace", r.url);
        await startOperation("replace", manualSync(undefined, { sync: { syncOptions: ["Replace=true"] } }));
        await finished("replace");
        expect(
          (await readCm("replace-a"))?.metadata?.managedFields?.map((m) => [m.manager, m.operation]),
        ).toEqual([["argocd-application-controller", "Update"]]);
        // Replacing an object that exists keeps the manager the user agent's.
        await r.push("a.yaml", cm("replace-a", { k: "2" }));
        await startOperation("replace", manualSync(undefined, { sync: { syncOptions: ["Replace=true"] } }));
        await finished("replace");
        const live = await readCm("replace-a");
        expect(live?.data).toEqual({ k: "2" });
        expect(live?.metadata?.managedFields?.map((m) => m.manager)).toEqual([
          "argocd-application-controller",
        ]);
      },
    );

    fact(
      "on completion operation is cleared and operationState is finished with syncResult.revision the resolved SHA",
      [],
      async () => {
        const r = await repo({ "a.yaml": cm("done-a", { k: "1" }) });
        await sim();
        await createApp("done", r.url);
        await startOperation("done", manualSync("main"));
        const state = await finished("done");
        const app = await getApp("done");
        expect(app.operation).toBeUndefined();
        expect(state).toMatchObject({ phase: "Succeeded", message: "successfully synced (all tasks run)" });
        expect(Date.parse(state.finishedAt)).toBeGreaterThanOrEqual(Date.parse(state.startedAt));
        // The operation copied as the controller's Go types write it: a false field left out
        // (omitempty), and retry, a struct, there even when the request had none.
        expect(state.operation).toEqual({
          sync: { revision: "main" },
          initiatedBy: { username: "tester" },
          retry: {},
        });
        expect(state.syncResult.revision).toBe(await r.tip());
        expect(state.syncResult.resources).toMatchObject([
          { kind: "ConfigMap", name: "done-a", status: "Synced" },
        ]);
        expect(app.status.history.at(-1)).toMatchObject({ revision: await r.tip(), id: 0 });
      },
    );

    fact(
      "a failed operation with retries left stays Running with finishedAt and retryCount, and is retried with backoff",
      ["fail", "syncs"],
      async () => {
        const r = await repo({ "a.yaml": cm("retry-a", { k: "1" }) });
        const s = await sim();
        await createApp("retry", r.url);
        const ref = { namespace: "argocd", name: "retry" };
        s.failNextSync(ref);
        s.failNextSync(ref, "Error");
        await startOperation(
          "retry",
          manualSync(undefined, {
            retry: { limit: 3, backoff: { duration: "150ms", factor: 2, maxDuration: "1s" } },
          }),
        );
        const waiting = await until(async () => {
          const st = await opState("retry");
          return st?.phase === "Running" && st.finishedAt ? st : undefined;
        }, "a pending retry");
        expect(waiting.retryCount).toBe(1);
        expect(waiting.message).toMatch(
          /^one or more objects failed to apply, reason: .*\. Retrying attempt #1 at \d{1,2}:\d{2}(AM|PM)\.$/,
        );
        expect((await getApp("retry")).operation).toBeDefined();
        const state = await finished("retry");
        expect(state).toMatchObject({ phase: "Succeeded", retryCount: 2 });
        // The second retry waited duration × factor: at least 300 ms after the second failure.
        expect(s.syncs(ref)).toHaveLength(1);

        // Out of retries: the operation ends with the count in its message.
        s.failNextSync(ref);
        s.failNextSync(ref);
        await startOperation(
          "retry",
          manualSync(undefined, { retry: { limit: 1, backoff: { duration: "20ms" } } }),
        );
        await until(async () => (await opState("retry"))?.retryCount === 1, "the retry");
        const failed = await finished("retry");
        expect(failed.phase).toBe("Failed");
        expect(failed.message).toMatch(/\(retried 1 times\)\.$/);
      },
    );

    fact(
      "a retry stays pinned, and retry.refresh: true drops the pinned revision so the retry syncs the newest",
      ["hold", "fail"],
      async () => {
        const r = await repo({ "a.yaml": cm("rr-a", { k: "1" }) });
        const pinned = await r.tip();
        const s = await sim();
        await createApp("rr", r.url);
        const ref = { namespace: "argocd", name: "rr" };
        const hold = s.holdSync(ref);
        s.failNextSync(ref);
        await startOperation(
          "rr",
          manualSync(pinned, { retry: { limit: 2, backoff: { duration: "50ms" } } }),
        );
        await until(async () => (await opState("rr"))?.phase === "Running", "Running");
        const newer = await r.push("a.yaml", cm("rr-a", { k: "2" }));
        hold.release();
        const stayed = await finished("rr");
        expect(stayed.syncResult.revision).toBe(pinned);
        expect(stayed.operation.sync.revision).toBe(pinned);

        s.failNextSync(ref);
        await startOperation(
          "rr",
          manualSync(pinned, { retry: { limit: 2, refresh: true, backoff: { duration: "50ms" } } }),
        );
        const refreshed = await finished("rr");
        expect(refreshed.phase).toBe("Succeeded");
        expect(refreshed.syncResult.revision).toBe(newer);
        // The state is written with a JSON merge patch (Argo CD <= 3.5.x), so the dropped revision
        // is left out of the patch and the stored copy still shows the pin: only syncResult tells.
        expect(refreshed.operation.sync.revision).toBe(pinned);
        expect((await readCm("rr-a"))?.data).toEqual({ k: "2" });
      },
    );

    fact(
      "phase Terminating written by someone ends the operation Failed with no retry",
      ["hold", "syncs"],
      async () => {
        const r = await repo({ "a.yaml": cm("term-a", { k: "1" }) });
        const s = await sim();
        await createApp("term", r.url);
        const ref = { namespace: "argocd", name: "term" };
        const hold = s.holdSync(ref);
        await startOperation(
          "term",
          manualSync(undefined, { retry: { limit: 5, backoff: { duration: "10ms" } } }),
        );
        await until(async () => {
          const st = await opState("term");
          return st?.phase === "Running" && st.syncResult;
        }, "the held attempt's state");
        // Let the controller's pass end first: a terminate written while a pass runs can be
        // overwritten by that pass's Running, in Argo CD as here.
        await s.idle();
        // What TerminateOperation does: phase Terminating through an update of the main resource.
        const app = await getApp("term");
        app.status.operationState.phase = "Terminating";
        await custom.replaceNamespacedCustomObject({
          group: GROUP,
          version: VERSION,
          namespace: "argocd",
          plural: "applications",
          name: "term",
          body: app,
        });
        const state = await finished("term");
        expect(state).toMatchObject({ phase: "Failed", message: "Operation terminated" });
        expect(state.retryCount).toBeUndefined();
        hold.release();
        await s.idle();
        expect(s.syncs(ref)).toEqual([]);
        expect(await readCm("term-a")).toBeUndefined();
        expect((await opState("term")).phase).toBe("Failed");
      },
    );

    fact(
      "phase Terminating written while the operation waits for its retry ends it at once, the wait skipped, with no retry",
      ["fail", "syncs"],
      async () => {
        const r = await repo({ "a.yaml": cm("term-wait-a", { k: "1" }) });
        const s = await sim();
        await createApp("term-wait", r.url);
        const ref = { namespace: "argocd", name: "term-wait" };
        for (let i = 0; i < 4; i++) s.failNextSync(ref);
        // A wait far longer than the test: only the terminate can end it in time.
        await startOperation(
          "term-wait",
          manualSync(undefined, { retry: { limit: 3, backoff: { duration: "10m", maxDuration: "1h" } } }),
        );
        await until(async () => {
          const st = await opState("term-wait");
          return st?.phase === "Running" && st.finishedAt && st.retryCount === 1;
        }, "the operation waiting for its retry");
        // What TerminateOperation does: phase Terminating through an update of the main resource.
        const app = await getApp("term-wait");
        app.status.operationState.phase = "Terminating";
        await custom.replaceNamespacedCustomObject({
          group: GROUP,
          version: VERSION,
          namespace: "argocd",
          plural: "applications",
          name: "term-wait",
          body: app,
        });
        // processRequestedAppOperation skips the retry wait when terminating (FinishedAt != nil && !terminating).
        const state = await finished("term-wait");
        expect(state).toMatchObject({ phase: "Failed", retryCount: 1 });
        expect(state.message).toBe("Operation terminated (retried 1 times).");
        expect((await getApp("term-wait")).operation).toBeUndefined();
        await s.idle();
        expect(s.syncs(ref)).toEqual([]);
      },
    );

    fact(
      "an operation whose operation field was removed while running stays Running for good",
      ["hold", "syncs"],
      async () => {
        const r = await repo({ "a.yaml": cm("orphan-a", { k: "1" }) });
        const s = await sim({ knobs: { refreshIntervalMs: 100 } });
        await createApp("orphan", r.url);
        const ref = { namespace: "argocd", name: "orphan" };
        const hold = s.holdSync(ref);
        await startOperation("orphan", manualSync());
        await until(async () => (await opState("orphan"))?.phase === "Running", "Running");
        await mergeApp("orphan", { operation: null });
        hold.release();
        // Several timed refreshes later, nothing has moved the state.
        for (let i = 0; i < 2; i++) {
          const before = (await getApp("orphan")).status.reconciledAt;
          await until(
            async () => (await getApp("orphan")).status.reconciledAt !== before,
            "another timed refresh",
          );
        }
        const app = await getApp("orphan");
        expect(app.operation).toBeUndefined();
        expect(app.status.operationState.phase).toBe("Running");
        expect(app.status.operationState.finishedAt).toBeUndefined();
        expect(s.syncs(ref)).toEqual([]);
      },
    );

    // ---- Sync windows, hooks, prune -------------------------------------------------------------

    const project = (name: string, syncWindows: unknown[]) =>
      custom.createNamespacedCustomObject({
        group: GROUP,
        version: VERSION,
        namespace: "argocd",
        plural: "appprojects",
        body: {
          apiVersion: `${GROUP}/${VERSION}`,
          kind: "AppProject",
          metadata: { name, namespace: "argocd" },
          spec: { sourceRepos: ["*"], destinations: [{ server: "*", namespace: "*" }], syncWindows },
        },
      });

    fact(
      "a deny sync window keeps a blocked automated operation Running with Argo CD's message, and a manual one runs when manualSync allows it",
      [],
      async () => {
        const r = await repo({ "a.yaml": cm("deny-a", { k: "1" }) });
        await project("frozen", [
          { kind: "deny", schedule: "* * * * *", duration: "1h", applications: ["deny-*"], manualSync: true },
        ]);
        const s = await sim();
        await createApp("deny-auto", r.url, { project: "frozen" });
        await createApp("deny-manual", r.url, { project: "frozen" });
        await startOperation("deny-auto", {
          sync: {},
          initiatedBy: { username: "applygate", automated: true },
        });
        await startOperation("deny-manual", { sync: {}, initiatedBy: { username: "someone" } });
        expect((await finished("deny-manual")).phase).toBe("Succeeded");
        const blocked = await until(async () => {
          const st = await opState("deny-auto");
          return st?.message === "Sync operation blocked by sync window" ? st : undefined;
        }, "the blocked message");
        expect(blocked.phase).toBe("Running");
        if (backend.handles.has("syncs"))
          expect(s.syncs({ namespace: "argocd", name: "deny-auto" })).toEqual([]);
        // The window is lifted. A change of its project does not bring an Application back to the
        // controller: the operation stays blocked until the Application's next pass (a change of
        // it, or its timed refresh), which a refresh request makes now.
        await custom.patchNamespacedCustomObject(
          {
            group: GROUP,
            version: VERSION,
            namespace: "argocd",
            plural: "appprojects",
            name: "frozen",
            body: { spec: { syncWindows: [] } },
          },
          k8s.setHeaderOptions("Content-Type", k8s.PatchStrategy.MergePatch),
        );
        await s.idle();
        expect(await opState("deny-auto")).toMatchObject({
          phase: "Running",
          message: "Sync operation blocked by sync window",
        });
        await mergeApp("deny-auto", {
          metadata: { annotations: { "argocd.argoproj.io/refresh": "normal" } },
        });
        // It runs, still pinned as it was asked.
        expect((await finished("deny-auto")).phase).toBe("Succeeded");
      },
    );

    fact(
      "an inactive allow window blocks an automated operation until its schedule opens (injected clock)",
      ["clock", "syncs"],
      async () => {
        const r = await repo({ "a.yaml": cm("allow-a", { k: "1" }) });
        await project("office", [
          { kind: "allow", schedule: "0 9 * * *", duration: "1h", namespaces: ["apps"] },
        ]);
        let now = Date.parse("2026-10-20T08:30:00Z");
        const clock = {
          now: () => now,
          setTimeout: (fn: () => void, ms: number) => setTimeout(fn, ms),
          clearTimeout: (h: unknown) => clearTimeout(h as NodeJS.Timeout),
        };
        const s = await sim({ clock });
        await createApp("allow", r.url, { project: "office" });
        await startOperation("allow", { sync: {}, initiatedBy: { automated: true } });
        await until(
          async () => (await opState("allow"))?.message === "Sync operation blocked by sync window",
          "blocked",
        );
        expect(s.syncs({ namespace: "argocd", name: "allow" })).toEqual([]);
        now = Date.parse("2026-10-20T09:10:00Z");
        // The controller looks again at its next pass; a refresh request makes one now.
        await mergeApp("allow", { metadata: { annotations: { "argocd.argoproj.io/refresh": "normal" } } });
        const state = await finished("allow");
        expect(state.phase).toBe("Succeeded");
      },
    );

    fact(
      "hooks with hook-delete-policy BeforeHookCreation are deleted and recreated on each sync",
      [],
      async () => {
        const r = await repo({
          "a.yaml": cm("hook-app", { k: "1" }),
          "pre.yaml": cm("hook-pre", { k: "1" }, { "argocd.argoproj.io/hook": "PreSync" }),
          "post.yaml": cm(
            "hook-post",
            { k: "1" },
            {
              "argocd.argoproj.io/hook": "PostSync",
              "argocd.argoproj.io/hook-delete-policy": "BeforeHookCreation",
            },
          ),
        });
        await sim();
        await createApp("hooks", r.url);
        await startOperation("hooks", manualSync());
        const first = await finished("hooks");
        expect(first.syncResult.resources.map((x: any) => [x.name, x.hookType ?? ""])).toEqual([
          ["hook-pre", "PreSync"],
          ["hook-app", ""],
          ["hook-post", "PostSync"],
        ]);
        const uids1 = [(await readCm("hook-pre"))?.metadata?.uid, (await readCm("hook-post"))?.metadata?.uid];
        const app1 = (await readCm("hook-app"))?.metadata?.uid;
        await startOperation("hooks", manualSync());
        await finished("hooks");
        const uids2 = [(await readCm("hook-pre"))?.metadata?.uid, (await readCm("hook-post"))?.metadata?.uid];
        expect(uids2[0]).toBeDefined();
        expect(uids2[0]).not.toBe(uids1[0]);
        expect(uids2[1]).not.toBe(uids1[1]);
        // The ordinary resource is applied in place.
        expect((await readCm("hook-app"))?.metadata?.uid).toBe(app1);
      },
    );

    fact("prune deletes only objects that carry the Application's tracking annotation", [], async () => {
      const r = await repo({ "a.yaml": cm("prune-a", { k: "1" }), "b.yaml": cm("prune-b", { k: "1" }) });
      await sim();
      await createApp("prune", r.url);
      await startOperation("prune", manualSync());
      await finished("prune");
      await core.createNamespacedConfigMap({
        namespace: "apps",
        body: { metadata: { name: "prune-untracked" } },
      });
      const peer = await GitPeer.clone(r.url);
      await gitOkIn(peer.dir, ["rm", "-q", "deploy/b.yaml"]);
      await peer.commit("drop b");
      await peer.push();
      await startOperation("prune", manualSync(undefined, { sync: { prune: false } }));
      const skipped = await finished("prune");
      expect(skipped.syncResult.resources).toContainEqual(
        expect.objectContaining({ name: "prune-b", status: "PruneSkipped" }),
      );
      expect(await readCm("prune-b")).toBeDefined();
      await startOperation("prune", { sync: { prune: true }, initiatedBy: { username: "tester" } });
      await finished("prune");
      expect(await readCm("prune-b")).toBeUndefined();
      expect(await readCm("prune-untracked")).toBeDefined();
      expect(await readCm("prune-a")).toBeDefined();
    });

    fact("perObjectApplyMs and syncDelayMs lengthen an operation", ["knobs"], async () => {
      const files = Object.fromEntries(
        Array.from({ length: 5 }, (_, i) => [`c${i}.yaml`, cm(`slow-${i}`, { k: "1" })]),
      );
      const r = await repo(files);
      const s = await sim({ knobs: { perObjectApplyMs: 40, syncDelayMs: 100 } });
      await createApp("slow", r.url);
      const t0 = Date.now();
      await startOperation("slow", manualSync());
      await finished("slow");
      expect(Date.now() - t0).toBeGreaterThanOrEqual(100 + 5 * 40);
      expect(s.knobs.perObjectApplyMs).toBe(40);
    });

    // ---- ApplicationSet ---------------------------------------------------------------------------

    const appSet = (name: string, elements: Record<string, string>[], url: string) =>
      custom.createNamespacedCustomObject({
        group: GROUP,
        version: VERSION,
        namespace: "argocd",
        plural: "applicationsets",
        body: {
          apiVersion: `${GROUP}/${VERSION}`,
          kind: "ApplicationSet",
          metadata: { name, namespace: "argocd" },
          spec: {
            generators: [{ list: { elements } }],
            template: {
              metadata: { name: "{{name}}", labels: { team: "{{team}}" } },
              spec: {
                project: "default",
                destination: { server: "https://kubernetes.default.svc", namespace: "apps" },
                source: { repoURL: url, path: "deploy", targetRevision: "main" },
                syncPolicy: { automated: { prune: true } },
              },
            },
          },
        },
      }) as Promise<any>;

    fact(
      "the ApplicationSet controller is the controller ownerReference of each Application it generates",
      ["appsets"],
      async () => {
        const r = await repo({ "a.yaml": cm("set-a", { k: "1" }) });
        await sim();
        const set = await appSet(
          "fleet",
          [
            { name: "fleet-one", team: "a" },
            { name: "fleet-two", team: "b" },
          ],
          r.url,
        );
        for (const name of ["fleet-one", "fleet-two"]) {
          const app = await until(() => getApp(name), name);
          expect(app.metadata.ownerReferences).toEqual([
            {
              apiVersion: `${GROUP}/${VERSION}`,
              kind: "ApplicationSet",
              name: "fleet",
              uid: set.metadata.uid,
              controller: true,
              blockOwnerDeletion: true,
            },
          ]);
        }
        expect((await getApp("fleet-two")).metadata.labels).toEqual({ team: "b" });
      },
    );

    fact(
      "the ApplicationSet controller rewrites the whole spec from its template on every reconcile",
      ["appsets"],
      async () => {
        const r = await repo({ "a.yaml": cm("rewrite-a", { k: "1" }) });
        await sim();
        await appSet("rewrite", [{ name: "rewrite-one", team: "a" }], r.url);
        await until(() => getApp("rewrite-one"), "generated");
        // Somebody switches automated sync off and adds a retry; the template has neither.
        await custom.patchNamespacedCustomObject(
          {
            group: GROUP,
            version: VERSION,
            namespace: "argocd",
            plural: "applications",
            name: "rewrite-one",
            body: {
              apiVersion: `${GROUP}/${VERSION}`,
              kind: "Application",
              metadata: { name: "rewrite-one", namespace: "argocd" },
              spec: { syncPolicy: { automated: { enabled: false }, retry: { limit: 1 } } },
            },
            fieldManager: "gitops-reverser",
            force: true,
          },
          k8s.setHeaderOptions("Content-Type", k8s.PatchStrategy.ServerSideApply),
        );
        const app = await until(async () => {
          const a = await getApp("rewrite-one");
          return a.spec.syncPolicy.automated.enabled === undefined && !a.spec.syncPolicy.retry
            ? a
            : undefined;
        }, "the template put back");
        expect(app.spec.syncPolicy).toEqual({ automated: { prune: true } });
      },
    );

    // ---- Argo CD before 3.1 ------------------------------------------------------------------------

    fact(
      "before 3.1 the schema has no automated.enabled: a strict server-side apply of it is refused, and a present automated block syncs",
      ["versions"],
      async () => {
        const old = await startApiServer({ bookmarkIntervalMs: 50 });
        try {
          await old.installCrdFile(argocdApplicationCrd("pre-3.1"));
          await old.installCrdFile(crd("argocd-appproject.yaml"));
          const okc = old.kubeConfig();
          const ocustom = okc.makeApiClient(k8s.CustomObjectsApi);
          const ocore = okc.makeApiClient(k8s.CoreV1Api);
          for (const name of ["argocd", "apps"])
            await ocore.createNamespace({ body: { metadata: { name } } });
          const r = await repo({ "a.yaml": cm("old-a", { k: "1" }) });
          const body = {
            apiVersion: `${GROUP}/${VERSION}`,
            kind: "Application",
            metadata: { name: "old", namespace: "argocd" },
            spec: {
              project: "default",
              destination: { server: "https://kubernetes.default.svc", namespace: "apps" },
              source: { repoURL: r.url, path: "deploy", targetRevision: "main" },
              syncPolicy: { automated: { enabled: false } },
            },
          };
          const apply = (fieldValidation: string) =>
            ocustom.patchNamespacedCustomObject(
              {
                group: GROUP,
                version: VERSION,
                namespace: "argocd",
                plural: "applications",
                name: "old",
                body,
                fieldManager: "gitops-reverser",
                fieldValidation,
              },
              k8s.setHeaderOptions("Content-Type", k8s.PatchStrategy.ServerSideApply),
            );
          const refused = await apply("Strict").catch((e) => e);
          expect(refused.code).toBe(400);
          expect(String(refused.body)).toContain("spec.syncPolicy.automated.enabled");
          // Applied leniently the field is pruned, and an Argo CD before 3.1 syncs automatically.
          await apply("Ignore");
          const oldSim = await startArgoSim({
            kubeConfig: okc,
            version: "pre-3.1",
            knobs: { refreshIntervalMs: 3_600_000 },
          });
          try {
            const state = await until(async () => {
              const a = (await ocustom.getNamespacedCustomObject({
                group: GROUP,
                version: VERSION,
                namespace: "argocd",
                plural: "applications",
                name: "old",
              })) as any;
              expect(a.spec.syncPolicy.automated).toEqual({});
              return a.status?.operationState?.phase === "Succeeded" ? a.status.operationState : undefined;
            }, "an automated sync");
            expect(state.operation.initiatedBy).toEqual({ automated: true });
          } finally {
            await oldSim.stop();
          }
        } finally {
          await old.close();
        }
      },
    );

    fact("stop() leaves nothing running", ["stop"], async () => {
      const r = await repo({ "a.yaml": cm("stop-a", { k: "1" }) });
      const s = await startArgoSim({ kubeConfig: kc, knobs: { refreshIntervalMs: 200 } });
      onTestFinished(() => s.stop());
      await createApp("stop", r.url);
      await until(async () => (await getApp("stop")).status?.sync, "refresh");
      await s.stop();
      const rv = (await getApp("stop")).metadata.resourceVersion;
      await startOperation("stop", manualSync());
      const after = (await getApp("stop")).metadata.resourceVersion;
      // An absence after the stop, so it is waited out: a controller still running would act within this.
      await new Promise((res) => setTimeout(res, 200));
      const app = await getApp("stop");
      expect(app.metadata.resourceVersion).toBe(after);
      expect(after).not.toBe(rv);
      expect(app.status.operationState).toBeUndefined();
    });
  });
}

async function gitOkIn(dir: string, args: string[]): Promise<void> {
  const { gitOk } = await import("../../git/cli.js");
  await gitOk(args, { cwd: dir });
}
