/**
 * The Argo CD executor against argosim (Argo CD 3.5 semantics) over HTTP and the real Git server:
 * one pinned sync per attempt, followed by its token; waiting out another operation; the lost
 * update; sync windows; an operation removed mid-run; restart recovery; seed 002's stale table.
 */
import { describe, expect, it } from "vitest";
import {
  applicationAutomatedOf,
  applicationOperationOf,
  Kube,
  KubeError,
  operationStateOf,
  RESOURCES,
} from "../../queue/kube/index.js";
import { cloneAncestry } from "../../sidecar/argocd/ancestry.js";
import { APPLICATION, tokenOf } from "../../sidecar/argocd/application.js";
import type { ArgoCDExecutor, ArgoCDExecutorOptions } from "../../sidecar/argocd/executor.js";
import { buildSyncOperation, startSyncUpdate } from "../../sidecar/argocd/sync.js";
import { readOperation, recordOperation } from "../../sidecar/operation-record.js";
import { fileWorld } from "../support/file-world.js";
import { type Held, type Repo, recorder, startCluster, until } from "./harness.js";

let repo: Repo;
/** c1 ← c2 ← c3 on main: values v1, v2, v3. */
let c1: string;
let c2: string;
let c3: string;
const FAST: ArgoCDExecutorOptions = { pollMs: 20, busyWaitMs: 10_000, budgetMs: 10_000, maxPollMs: 100 };

const c = fileWorld(async () => {
  const c = await startCluster({ argo: {} });
  [repo, c1, c2, c3] = await c.history("v1", "v2", "v3");
  return c;
});

const executor = (options: ArgoCDExecutorOptions = {}, kube?: Kube) =>
  c.executor({ ...FAST, ...options }, kube ? { kube } : {});

/**
 * Waits until the executor's watch shows the Application with an operation set: a test about an
 * operation being waited out starts only once the watch has delivered it.
 */
async function watched(e: ArgoCDExecutor, ref: { namespace: string; name: string }) {
  await e.applications.serve(ref.namespace);
  await until(async () => !!e.applications.cached(ref)?.operation, "the watch to show the operation");
  return e;
}

/** A fresh Application held off (automated enabled: false, prune on) with its claim. */
const setup = (spec: Record<string, unknown> = {}) => c.held("app", repo, spec);

const configValue = async (namespace: string) => {
  const res = (await c.kube.core
    .readNamespacedConfigMap({ name: "settings", namespace })
    .catch(() => undefined)) as { data?: Record<string, string> } | undefined;
  return res?.data?.value;
};

describe("one sync per attempt", () => {
  it("syncs the checked commit, pinned, as automated sync would, and follows the token to Succeeded", async () => {
    const { name, ns, ref, claim } = await setup();
    const hold = c.argo!.holdSync(ref);
    const r = c.start(executor(), c.attempt(name, c1));
    await until(async () => r.phases().includes("Running"), "Running reported");
    expect((await readOperation(c.kube, claim))?.phase).toBe("Running");
    hold.release();
    await r.done;
    expect(r.phases()).toEqual(["Requested", "Running", "Succeeded"]);
    const syncs = c.argo!.syncs(ref);
    expect(syncs).toHaveLength(1);
    expect(syncs[0]).toMatchObject({
      revision: c1,
      token: `t-${name}`,
      initiatedBy: { username: "applygate", automated: true },
    });
    expect(await configValue(ns)).toBe("v1"); // the branch moved on to v3: the sync stayed pinned
    const op = await readOperation(c.kube, claim);
    expect(op).toMatchObject({ phase: "Succeeded", commit: c1 });
    const app = await c.getApp(name);
    expect(applicationAutomatedOf(app)).toEqual({ enabled: false, prune: true });
    expect(app.operation ?? undefined).toBeUndefined();
  });

  it("a claim waiting in line (HeldByAnotherClaim) is never synced, and its record is withdrawn", async () => {
    const { name, ref, claim } = await setup();
    await c.kube.patchStatus(
      RESOURCES.argoCDClaim,
      "argocd",
      name,
      {
        conditions: [
          {
            type: "InControl",
            status: "False",
            reason: "HeldByAnotherClaim",
            message: "claim argocd/first holds the applier",
            lastTransitionTime: new Date().toISOString(),
          },
        ],
      },
      undefined,
    );
    const r = await c.run(executor(), c.attempt(name, c1));
    expect(r.phases().at(-1)).toBe("RequestFailed");
    expect(r.reports.at(-1)?.extra.reason).toBe("HeldByAnotherClaim");
    expect(c.argo!.syncs(ref)).toEqual([]);
    expect((await c.getApp(name)).operation ?? undefined).toBeUndefined();
    expect(await readOperation(c.kube, claim)).toBeUndefined();
  });

  it("an attempt whose GitTargets no longer stand (recreated) is Dropped, nothing synced", async () => {
    const { name, ref } = await setup();
    const attempt = c.attempt(name, c1);
    await c.kube.delete(RESOURCES.gitTarget, "argocd", `${name}-target`);
    await c.createClaim(name, name); // the GitTarget is made again: another uid
    const r = await c.run(executor(), attempt);
    expect(r.phases().at(-1)).toBe("Dropped");
    expect(r.reports.at(-1)?.extra.reason).toBe("NoTargetStands");
    expect(c.argo!.syncs(ref)).toEqual([]);
    expect((await c.getApp(name)).operation ?? undefined).toBeUndefined();
  });

  it("opens the apply window before the update that starts the sync, and closes it at the end", async () => {
    const { name } = await setup();
    const calls: string[] = [];
    const kube = Object.create(c.kube) as Kube;
    kube.replace = (t, o) => {
      calls.push("replace");
      return c.kube.replace(t, o);
    };
    const windows = {
      open: async (w: { token: string }) => void calls.push(`opened ${w.token}`),
      close: (t: string) => void calls.push(`closed ${t}`),
    };
    const r = await c.run(c.executor(FAST, { kube, windows }), c.attempt(name, c1));
    expect(r.phases().at(-1)).toBe("Succeeded");
    // Argo CD may apply before the update's answer arrives: the window is already open then. (An
    // update that conflicts is made again from a fresh read; the window stays open meanwhile.)
    expect(calls[0]).toBe(`opened t-${name}`);
    expect(calls).toContain("replace");
    expect(calls.filter((x) => x.startsWith("closed"))).toEqual([`closed t-${name}`]);
    expect(calls.at(-1)).toBe(`closed t-${name}`);
  });

  it("keeps a retry pinned (retry.refresh dropped) and reports Failed when retries run out", async () => {
    const { name, ref, claim } = await setup({
      syncPolicy: {
        // A backoff long enough for a poll on a loaded machine to see the retry waiting.
        retry: { limit: 1, refresh: true, backoff: { duration: "2s", factor: 1, maxDuration: "2s" } },
      },
    });
    c.argo!.failNextSync(ref);
    c.argo!.failNextSync(ref);
    const r = await c.run(executor(), c.attempt(name, c1));
    expect(r.phases().at(-1)).toBe("Failed");
    expect(r.reports.at(-1)?.extra.reason).toBe("SyncFailed");
    // the retry was still running (Running with finishedAt) until it failed too
    expect(r.reports.some((x) => x.phase === "Running" && x.extra.reason === "Retrying")).toBe(true);
    // with retry.refresh the retry would have dropped the revision and synced the tip
    const app = await c.getApp(name);
    expect(operationStateOf(app)).toMatchObject({
      phase: "Failed",
      retryCount: 1,
      operation: { sync: { revision: c1 } },
    });
    expect(app).not.toHaveProperty("status.operationState.operation.retry.refresh");
    expect(c.argo!.syncs(ref)).toEqual([]); // both attempts failed before any write
    expect((await readOperation(c.kube, claim))?.phase).toBe("Failed");
  });

  it("waits out another operation, never replacing it, then syncs", async () => {
    const { name, ref } = await setup();
    const hold = await c.syncRunning(name, { commit: c1, token: "x", foreign: true });
    const r = c.start(executor(), c.attempt(name, c1));
    // An absence while the other operation runs, so it is waited out: the executor must not act.
    await new Promise((res) => setTimeout(res, 200));
    expect(r.phases()).toEqual([]);
    expect(applicationOperationOf(await c.getApp(name))?.initiatedBy?.username).toBe("admin");
    hold.release();
    await r.done;
    expect(r.phases().at(-1)).toBe("Succeeded");
    expect(c.argo!.syncs(ref).map((s) => s.initiatedBy?.username)).toEqual(["admin", "applygate"]);
  });

  it("fails the attempt after the wait (RequestFailed, record taken back) when the operation does not end", async () => {
    const { name, ref, claim } = await setup();
    const hold = c.argo!.holdSync(ref);
    const app = await c.getApp(name);
    await c.setOperation(name, {
      ...buildSyncOperation(app, { commit: c1, token: "x" }),
      initiatedBy: { username: "admin" },
      info: [],
    });
    const r = await c.run(await watched(executor({ busyWaitMs: 300 }), ref), c.attempt(name, c1));
    expect(r.reports).toEqual([
      {
        phase: "RequestFailed",
        extra: { reason: "OperationInProgress", message: expect.stringContaining("admin") },
      },
    ]);
    expect(await readOperation(c.kube, claim)).toBeUndefined();
    hold.release();
  });

  it("a stop before the sync started says so (RequestFailed, SidecarStopping): no record is left for a restart to find", async () => {
    const { name, ref, claim } = await setup();
    const hold = await c.syncRunning(name, { commit: c1, token: "x", foreign: true });
    const stop = new AbortController();
    let reads = 0;
    // The watch's safety net short, so the wait reads the API server again and again.
    const e = await watched(executor({ resyncMs: 50 }), ref);
    const read = e.applications.read.bind(e.applications);
    e.applications.read = (ref) => {
      reads++;
      return read(ref);
    };
    const r = c.start(e, c.attempt(name, c1), { signal: stop.signal });
    // Waiting out the other operation (reading the Application again and again): nothing recorded.
    await until(() => reads >= 3, "the executor to wait out the other operation");
    stop.abort();
    await r.done;
    expect(r.reports).toEqual([
      { phase: "RequestFailed", extra: { reason: "SidecarStopping", message: expect.any(String) } },
    ]);
    expect(await readOperation(c.kube, claim)).toBeUndefined();
    hold.release();
    await until(async () => c.argo!.syncs(ref).length === 1, "the other sync to end");
    expect(c.argo!.syncs(ref).map((s) => s.initiatedBy?.username)).toEqual(["admin"]);
  });
});

describe("sync windows", () => {
  it("a blocked sync stays Running, reported with the window's message, and runs pinned once the window ends", async () => {
    const { name, ref } = await setup({ project: "windowed" });
    await c.kube.apply(
      { group: "argoproj.io", version: "v1alpha1", plural: "appprojects", kind: "AppProject" },
      {
        apiVersion: "argoproj.io/v1alpha1",
        kind: "AppProject",
        metadata: { name: "windowed", namespace: "argocd" },
        spec: {
          sourceRepos: ["*"],
          destinations: [{ server: "*", namespace: "*" }],
          syncWindows: [
            { kind: "deny", schedule: "* * * * *", duration: "1h", applications: ["*"], manualSync: true },
          ],
        },
      },
    );
    const r = c.start(executor(), c.attempt(name, c1));
    await until(async () => r.reports.find((x) => x.extra.reason === "SyncWindow"), "blocked reported");
    const blocked = r.reports.find((x) => x.extra.reason === "SyncWindow")!;
    expect(blocked.phase).toBe("Running");
    expect(blocked.extra.message).toBe("Sync operation blocked by sync window");
    // manualSync: true does not let ours through: we initiate as automated sync does
    expect(c.argo!.syncs(ref)).toHaveLength(0);
    await c.kube.mergePatch(
      { group: "argoproj.io", version: "v1alpha1", plural: "appprojects", kind: "AppProject" },
      "argocd",
      "windowed",
      { spec: { syncWindows: null } },
    );
    // A change of the project brings no Application back to Argo CD's controller: the blocked
    // operation runs at the Application's next pass (its timed refresh, an hour away here), which
    // a refresh request makes now.
    await c.kube.mergePatch(
      { group: "argoproj.io", version: "v1alpha1", plural: "applications", kind: "Application" },
      ref.namespace,
      ref.name,
      { metadata: { annotations: { "argocd.argoproj.io/refresh": "normal" } } },
    );
    await r.done;
    expect(r.phases().at(-1)).toBe("Succeeded");
    expect(c.argo!.syncs(ref).map((s) => s.revision)).toEqual([c1]);
  });
});

describe("the lost update", () => {
  /** A client whose update lands but whose answer is lost, once. */
  class LosingAnswer extends Kube {
    lost = 0;
    override async replace<T>(...args: Parameters<Kube["replace"]>): Promise<T> {
      const out = await super.replace<T>(...args);
      if (this.lost++ === 0) throw new KubeError("update", { message: "socket hang up" });
      return out;
    }
  }
  /** A client whose update is held back: its answer is lost and the request lands only later. */
  class LateUpdate extends Kube {
    held: Parameters<Kube["replace"]> | undefined;
    override async replace<T>(...args: Parameters<Kube["replace"]>): Promise<T> {
      if (!this.held) {
        this.held = args;
        throw new KubeError("update", { message: "context deadline exceeded" });
      }
      return super.replace<T>(...args);
    }
  }

  it("follows an update whose answer was lost by its token when it landed", async () => {
    const { name, ref } = await setup();
    const kube = new LosingAnswer(c.kc);
    const r = await c.run(executor({}, kube), c.attempt(name, c1));
    expect(kube.lost).toBe(1);
    expect(r.phases().at(-1)).toBe("Succeeded");
    expect(c.argo!.syncs(ref).map((s) => s.revision)).toEqual([c1]);
  });

  it("fences an update that did not land with a refresh write at the version read, so it never lands, and fails", async () => {
    const { name, ref, claim } = await setup();
    const kube = new LateUpdate(c.kc);
    const r = await c.run(executor({}, kube), c.attempt(name, c1));
    expect(r.reports.at(-1)).toMatchObject({ phase: "Failed", extra: { reason: "UpdateLost" } });
    expect(await readOperation(c.kube, claim)).toMatchObject({ phase: "Failed", outcome: "UpdateLost" });
    // the update arrives late: it was made from the version read, which the refresh write moved past
    const late = await kube.replace(...kube.held!).catch((e: KubeError) => e);
    expect((late as KubeError).code).toBe(409);
    await c.argo!.idle();
    expect(c.argo!.syncs(ref)).toHaveLength(0);
    expect((await c.getApp(name)).operation ?? undefined).toBeUndefined();
  });

  it("treats an update refused outright (no landing possible) as RequestFailed, record taken back", async () => {
    const { name, claim } = await setup();
    c.api.faults.failNext(1, {
      method: "PUT",
      pathPrefix: `/apis/argoproj.io/v1alpha1/namespaces/argocd/applications/${name}`,
      status: 422,
      message: "invalid",
    });
    const r = await c.run(executor(), c.attempt(name, c1));
    expect(r.phases()).toEqual(["Requested", "RequestFailed"]);
    expect(await readOperation(c.kube, claim)).toBeUndefined();
  });
});

describe("an operation removed mid-run", () => {
  it("is Unresolved after the budget and then Failed, since Argo CD never finishes it", async () => {
    const { name, ref, claim } = await setup();
    const hold = c.argo!.holdSync(ref);
    const r = c.start(executor({ budgetMs: 400 }), c.attempt(name, c1));
    await until(async () => r.phases().includes("Running"), "Running");
    await c.kube.mergePatch(APPLICATION, "argocd", name, { operation: null }); // the stuck-hook workaround
    await r.done;
    expect(r.phases()).toEqual(["Requested", "Running", "Unresolved", "Failed"]);
    expect(r.reports.at(-1)?.extra.reason).toBe("OperationRemoved");
    expect((await readOperation(c.kube, claim))?.phase).toBe("Failed");
    hold.release();
  });
});

describe("restart recovery", () => {
  /** An operation of ours (token `t-<name>`, for c1) recorded on the claim, as a process that died left it. */
  const recorded = (h: Held) =>
    recordOperation(c.kube, h.claim, {
      token: `t-${h.name}`,
      commit: c1,
      targets: [{ uid: "gt", reason: "CatchUp" }],
    });
  /** A new process's restart recovery of that operation: what it reported. */
  async function recover(e: ArgoCDExecutor, h: Held, rec: Awaited<ReturnType<typeof recorded>>) {
    const r = recorder();
    await e.recover!(
      { claim: h.claim, applier: h.ref, operation: rec.operation, branchKey: "git/r@main" },
      r.report,
      new AbortController().signal,
    );
    return r;
  }

  it("follows a recorded operation that reached the Application, asking for nothing new", async () => {
    const held = await setup();
    const { name, ref } = held;
    const token = `t-${name}`;
    const rec = await recorded(held);
    await c.setOperation(name, buildSyncOperation(await c.getApp(name), { commit: c1, token }));
    const opened: Array<{ token: string; missedSince?: string }> = [];
    const recovering = c.executor(FAST, {
      windows: { open: async (w) => void opened.push(w), close: () => {} },
    });
    const r = await recover(recovering, held, rec);
    expect(r.phases().at(-1)).toBe("Succeeded");
    expect(c.argo!.syncs(ref).map((s) => s.token)).toEqual([token]);
    // Its window opens again from the operation's start: Argo CD's writes while nobody watched count.
    expect(opened).toMatchObject([
      { token, missedSince: rec.operation.startedAt ?? rec.operation.requestedAt },
    ]);
  });

  it("fails a recorded operation that never reached the Application, fencing any update still on its way", async () => {
    const held = await setup();
    const { name, ref } = held;
    const token = `t-${name}`;
    const rec = await recorded(held);
    const before = await c.getApp(name);
    const r = await recover(executor(), held, rec);
    expect(r.reports.at(-1)).toMatchObject({ phase: "Failed", extra: { reason: "UpdateLost" } });
    const late = await c.kube
      .replace(APPLICATION, startSyncUpdate(before, buildSyncOperation(before, { commit: c1, token })))
      .catch((e: KubeError) => e);
    expect((late as KubeError).code).toBe(409);
    expect(c.argo!.syncs(ref)).toHaveLength(0);
  });
});

describe("seed 002: stale operations of ours", () => {
  /** Our earlier sync of `revision`, held Running by argosim. */
  const ourRunning = (name: string, revision: string) =>
    c.syncRunning(name, { commit: revision, token: "old" });
  const state = async (name: string) => operationStateOf(await c.getApp(name));

  let ancestryOf: ReturnType<typeof cloneAncestry> | undefined;
  async function history() {
    ancestryOf ??= cloneAncestry(await repo.clone());
    return { c1, c2, c3, ancestry: ancestryOf };
  }

  it("terminates our running operation for a proven ancestor, then syncs the newer commit", async () => {
    const { name, ref } = await setup();
    const h = await history();
    const hold = await ourRunning(name, h.c1);
    const r = await c.run(executor({ ancestry: h.ancestry }), c.attempt(name, h.c2));
    expect(r.phases().at(-1)).toBe("Succeeded");
    expect(c.argo!.syncs(ref).map((s) => [s.token, s.revision])).toEqual([[`t-${name}`, h.c2]]);
    expect(
      c.events.events.some((e) => e.reason === "StaleOperationTerminated" && e.regarding.name === name),
    ).toBe(true);
    hold.release();
  });

  // With the watch running, a terminate that conflicted changed nothing on the Application: no
  // event would end the wait, which lasted the resync (30 s) past the busy wait, so the attempt
  // failed (OperationInProgress) instead of terminating (seen in a clean-clone run). The watch is
  // synced first here, so the retry must come from the poll interval.
  it("retries a conflicting terminate on the next poll, the watch running", async () => {
    const { name, ref } = await setup();
    const h = await history();
    const hold = await ourRunning(name, h.c1.slice(0, 10)); // abbreviated, proven through the clone
    c.api.faults.failNext(1, {
      method: "PATCH",
      pathPrefix: `/apis/argoproj.io/v1alpha1/namespaces/argocd/applications/${name}`,
      status: 409,
    });
    const e = await watched(executor({ ancestry: h.ancestry }), ref);
    // The cache holds the Application as the server does now: no event is still on its way.
    const version = (await c.getApp(name)).metadata.resourceVersion;
    await until(
      async () => e.applications.cached(ref)?.metadata.resourceVersion === version,
      "the watch to catch up",
    );
    const r = await c.run(e, c.attempt(name, h.c2));
    expect(r.phases().at(-1)).toBe("Succeeded");
    hold.release();
  });

  const never: [
    string,
    (h: Awaited<ReturnType<typeof history>>) => { revision: string; commit: string; foreign?: boolean },
  ][] = [
    ["released (the same commit)", (h) => ({ revision: h.c2, commit: h.c2 })],
    ["symbolic", (h) => ({ revision: "main", commit: h.c2 })],
    ["newer (a descendant)", (h) => ({ revision: h.c3, commit: h.c2 })],
    ["unknown to the clone", (h) => ({ revision: "9".repeat(40), commit: h.c2 })],
    ["foreign", (h) => ({ revision: h.c1, commit: h.c2, foreign: true })],
  ];
  for (const [what, pick] of never) {
    it(`never terminates ${what}: waits it out and fails the attempt`, async () => {
      const { name, ref } = await setup();
      const h = await history();
      const { revision, commit, foreign } = pick(h);
      const hold = await c.syncRunning(name, { commit: revision, token: "old", foreign });
      const r = await c.run(
        await watched(executor({ ancestry: h.ancestry, busyWaitMs: 300 }), ref),
        c.attempt(name, commit),
      );
      expect(r.reports.map((x) => [x.phase, x.extra.reason])).toEqual([
        ["RequestFailed", "OperationInProgress"],
      ]);
      expect((await state(name))?.phase).toBe("Running");
      hold.release();
    });
  }

  it("never terminates one already terminating", async () => {
    const { name } = await setup();
    const h = await history();
    const hold = await ourRunning(name, h.c1);
    await c.argo!.idle();
    await c.kube.mergePatch(APPLICATION, "argocd", name, {
      status: { operationState: { phase: "Terminating" } },
    });
    // Argo CD's pass that ends it writes slowly: the state stays Terminating meanwhile
    c.api.faults.latency(1500, {
      method: "PATCH",
      pathPrefix: `/apis/argoproj.io/v1alpha1/namespaces/argocd/applications/${name}`,
    });
    const patches: string[] = [];
    const replacedStates: string[] = [];
    const kube = new (class extends Kube {
      override mergePatch<T>(...args: Parameters<Kube["mergePatch"]>): Promise<T> {
        patches.push(JSON.stringify(args[3]));
        return super.mergePatch<T>(...args);
      }
      // The state our update replaces: the update lands only on the version it was made from.
      override async replace<T>(...args: Parameters<Kube["replace"]>): Promise<T> {
        const now = await c.getApp(name);
        if (now.metadata?.resourceVersion === args[1].metadata?.resourceVersion)
          replacedStates.push(operationStateOf(now)?.phase ?? "none");
        return super.replace<T>(...args);
      }
    })(c.kc);
    const r = c.start(executor({ ancestry: h.ancestry }, kube), c.attempt(name, h.c2));
    // Argo CD's Failed stands only until our sync replaces it (SetAppOperation clears the state),
    // which can be a few milliseconds: either one shows the terminating operation ended.
    await until(async () => {
      const app = await c.getApp(name);
      const s = operationStateOf(app);
      return s?.phase === "Failed" || tokenOf(applicationOperationOf(app)) === `t-${name}`;
    }, "terminated by Argo CD, or our sync set after its end");
    c.api.faults.latency(0);
    hold.release();
    await r.done;
    expect(patches.filter((p) => p.includes("Terminating"))).toEqual([]);
    // Set only once Argo CD had ended the old one (a 409 and a second try may come between).
    expect(new Set(replacedStates)).toEqual(new Set(["Failed"]));
    expect((await state(name))?.message).not.toBe("Operation terminated"); // ours ran after it
    expect(r.phases().at(-1)).toBe("Succeeded");
  });

  it("treats Forbidden on the terminate as fatal, reported", async () => {
    const { name, ref } = await setup();
    const h = await history();
    const hold = await ourRunning(name, h.c1);
    c.api.addUser("no-patch", "no-patch-token", [
      { verbs: ["get", "list", "watch", "update"], groups: ["argoproj.io"], resources: ["applications"] },
      { verbs: ["*"], groups: ["applygate.dev"], resources: ["*"] },
    ]);
    const kube = new Kube(c.api.kubeConfig("no-patch"));
    const r = await c.run(
      await watched(executor({ ancestry: h.ancestry }, kube), ref),
      c.attempt(name, h.c2),
    );
    expect(r.reports).toEqual([
      {
        phase: "Rejected",
        extra: { reason: "TerminateForbidden", message: expect.stringContaining("forbidden") },
      },
    ]);
    expect((await state(name))?.phase).toBe("Running");
    hold.release();
  });
});
