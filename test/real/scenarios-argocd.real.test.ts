// applygate beside real Argo CD (test/real/argocd.ts) on the real control plane, every component as
// deployed (test/real/deployed.ts): a Git push synced exactly once with its revision on the
// Application's status and history, the two-edit race with and without applygate, a sidecar killed
// mid-sync and a worker restart. After each test the audit check: no 403 and no 422 for any
// product component. The same scenarios beside real Flux: scenarios-flux.real.test.ts.
import { describe, expect, it } from "vitest";
import { untilWith } from "../support/wait.js";
import { startSidecar } from "./applygate.js";
import { ARGOCD_NAMESPACE } from "./argocd.js";
import { ARGOCD_BINARIES, CONTROL_PLANE, findRealBinaries } from "./binaries.js";
import { applierScenes, type Scene as TenantScene } from "./scenes.js";
import { heldYaml } from "./tenant.js";

const bins = findRealBinaries([...CONTROL_PLANE, ...ARGOCD_BINARIES]);
if (!bins.built) console.warn(`\n!!! SKIPPED test/real/scenarios-argocd.real.test.ts: ${bins.message}\n`);

const until = untilWith({ timeoutMs: 90_000, everyMs: 100, retryErrors: true });
const APPLICATIONS = { group: "argoproj.io", version: "v1alpha1", plural: "applications" } as const;
const TOKEN_INFO = "applygate.dev/operation-token";

interface Application {
  metadata: { name: string; annotations?: Record<string, string> };
  spec: { syncPolicy?: { automated?: { enabled?: boolean; selfHeal?: boolean } } };
  operation?: { info?: { name: string; value: string }[] };
  status?: {
    sync?: { status?: string; revision?: string };
    history?: { id: number; revision?: string; initiatedBy?: { username?: string; automated?: boolean } }[];
    operationState?: {
      phase?: string;
      operation?: { info?: { name: string; value: string }[] };
      syncResult?: { revision?: string };
    };
  };
}

interface Claim {
  status?: {
    conditions?: { type: string; status: string; reason: string }[];
    operation?: { token?: string; commit?: string; phase?: string; completedAt?: string };
    history?: { token?: string; commit: string; phase: string; outcome?: string }[];
  };
}

interface Scene extends TenantScene {
  /** How many entries the Application's history held when the scene was ready. */
  historyAtStart: number;
}

describe.skipIf(!bins.built)("applygate beside real Argo CD", () => {
  /**
   * The namespace's repository synced by an Application in argocd with automated sync on (prune,
   * selfHeal off, as users run it) and, `held`, an ArgoCDClaim holding it (with argocd's
   * ApplierGrant).
   */
  const scene = applierScenes(
    "argocd",
    ({
      ns,
      repoUrl,
      folder,
      held,
    }) => `${held ? `${heldYaml(ns, ARGOCD_NAMESPACE, "ArgoCDClaim")}---\n` : ""}apiVersion: argoproj.io/v1alpha1
kind: Application
metadata: {name: ${ns}, namespace: ${ARGOCD_NAMESPACE}}
spec:
  project: default
  destination: {server: "https://kubernetes.default.svc", namespace: ${ns}}
  # recurse: applygate writes each object under <group>/<kind>/<namespace>/ of the folder.
  source: {repoURL: "${repoUrl}", path: ${folder}, targetRevision: main, directory: {recurse: true}}
  syncPolicy:
    automated: {prune: true, selfHeal: false}
`,
  );
  const { d } = scene;
  const { running } = d;
  const { greeting, commitsSince, clusterEdit, report, edit, record, foreignPush, attemptsSent } = scene;

  /** A scene (tenant.ts); `held`, once the claim holds the Application and its converge ended. */
  async function open(held: boolean): Promise<Scene> {
    const s = { ...(await scene.open(held)), historyAtStart: 0 };
    if (held) {
      await until(
        async () =>
          (await claim(s)).status?.conditions?.find((x) => x.type === "InControl")?.status === "True",
        "the claim to hold the Application",
      );
      // Settled: the claim's converge of the tip ended and nothing runs on the Application.
      await until(async () => {
        const c = await claim(s);
        const a = await app(s);
        return (
          c.status?.history?.some((h) => h.commit === s.start && h.phase === "Succeeded") &&
          c.status.operation?.completedAt &&
          !a.operation
        );
      }, "the claim's converge of the tip");
    } else {
      await until(async () => (await app(s)).status?.sync?.status === "Synced", "the Application Synced");
    }
    s.historyAtStart = (await history(s)).length;
    return s;
  }

  const app = async (s: TenantScene) => (await scene.read(s, APPLICATIONS)) as Application;
  const claim = async (s: TenantScene) => (await scene.claim(s)) as Claim;
  /** The revision of each sync that succeeded, oldest first (Argo CD's status.history). */
  const history = async (s: TenantScene) => ((await app(s)).status?.history ?? []).map((h) => h.revision);
  /** The syncs that succeeded since the scene was ready. */
  const syncedSince = async (s: Scene) => (await history(s)).slice(s.historyAtStart);
  /** Whether Argo CD last compared the Application with `revision`, and found it `status` (if given). */
  const comparedAt = async (s: Scene, revision: string, status?: "Synced" | "OutOfSync") => {
    const sync = (await app(s)).status?.sync;
    return sync?.revision === revision && (status === undefined || sync.status === status);
  };
  /**
   * Asks Argo CD to compare the Application now with its branch resolved anew, as its Git webhook
   * or `argocd app get --refresh` does (the annotation; the controller removes it).
   */
  const refreshNow = (s: Scene) =>
    scene.annotate(s, APPLICATIONS, { "argocd.argoproj.io/refresh": "normal" });

  /** The claim's history entries for `commit`. */
  const claimHistory = async (s: Scene, commit: string) =>
    ((await claim(s)).status?.history ?? []).filter((h) => h.commit === commit);
  const automatedOff = async (s: Scene) => (await app(s)).spec.syncPolicy?.automated?.enabled === false;

  // -------------------------------------------------------------------------------------------

  it("syncs a Git push exactly once through the held Application, its revision on Argo CD's status and history", async () => {
    const s = await open(true);
    const pushed = await foreignPush(s, "pushed");
    await until(async () => (await greeting(s.ns)) === "pushed", "Argo CD to sync the push");
    await until(
      async () => (await app(s)).status?.operationState?.syncResult?.revision === pushed,
      "the operation's syncResult.revision",
    );
    // Argo CD's own view agrees once the sidecar's refresh after the sync resolved the branch.
    await until(async () => comparedAt(s, pushed, "Synced"), "the Application Synced at the push");
    // A few seconds more: nothing syncs it again, automated sync stays off.
    await new Promise((r) => setTimeout(r, 5_000));
    const a = await app(s);
    expect(a.status?.operationState?.phase).toBe("Succeeded");
    expect(a.spec.syncPolicy?.automated?.enabled).toBe(false);
    expect(await syncedSince(s)).toEqual([pushed]);
    expect((await claimHistory(s, pushed)).map((h) => h.phase)).toEqual(["Succeeded"]);
    expect(attemptsSent(pushed)).toHaveLength(1);
    expect(await commitsSince(s)).toEqual([pushed]);
  });

  it("the two-edit race held by applygate: the later edit wins, one commit per save, no sync", async () => {
    const s = await open(true);
    const rec = record(s);
    const first = await edit(s, "blue");
    // Argo CD compares with the first commit (the moment the race needs); held, nothing syncs it.
    await refreshNow(s);
    await until(async () => comparedAt(s, first), "Argo CD to compare the first commit");
    // The later edit lands on the cluster before its commit is in Git, and Argo CD compares the
    // branch again meanwhile: the first commit, OutOfSync with the live edit (where Argo CD's own
    // automated sync reverts it, below). Held, nothing syncs it.
    const editedAt = await clusterEdit(s, "green");
    await refreshNow(s);
    await until(
      async () => comparedAt(s, first, "OutOfSync"),
      "Argo CD to find the first commit OutOfSync with the later edit",
    );
    const second = await report(s, "green", editedAt);
    await refreshNow(s);
    await until(async () => comparedAt(s, second, "Synced"), "Argo CD to compare the second commit");
    // As long again as an automated sync of either commit takes several times over.
    await new Promise((r) => setTimeout(r, 6_000));
    await rec.stop();
    expect(rec.revertedBy(), JSON.stringify(rec.seen)).toEqual([]);
    expect(await greeting(s.ns)).toBe("green");
    expect(await commitsSince(s)).toEqual([second, first]);
    expect(await syncedSince(s)).toEqual([]);
    expect([...attemptsSent(first), ...attemptsSent(second)]).toEqual([]);
    expect(await automatedOff(s)).toBe(true);
  });

  it("the two-edit race on Argo CD's own automated sync, selfHeal off: a refresh before the later edit's commit reverts it", async () => {
    // What real Argo CD v3.5.3 does, asserted below (the rules in its source: autoSync and
    // alreadyAttemptedSync in controller/appcontroller.go, evaluateRevisionChanges in
    // controller/state.go): automated sync syncs a revision it has not synced yet whenever a
    // comparison that resolves the branch finds the Application OutOfSync. A first commit that
    // only records what an API edit made live compares Synced, so it is never synced. A comparison
    // that only re-reads the cluster (a managed object changed: at the revision compared last)
    // counts as no new revision, and selfHeal off leaves the later edit alone. The next comparison
    // that resolves the branch while it still names the first commit syncs the first commit over
    // the later edit: a refresh (driven here, as Argo CD's webhook for the first push does), or,
    // read in the source and not driven here, a timed refresh, which resolves the branch from the
    // repo-server's cache (up to 3 minutes old) even after the second commit was pushed.
    const s = await open(false);
    const rec = record(s);
    const first = await edit(s, "blue");
    // The first commit holds what the edit made live: Argo CD finds it Synced and syncs nothing.
    await refreshNow(s);
    await until(async () => comparedAt(s, first, "Synced"), "Argo CD to find the first commit Synced");
    expect(await syncedSince(s)).toEqual([]);
    // The later edit lands on the cluster; its commit is not in Git yet (a tool reports it after
    // the edit, and the branch worker's commit window gathers it). Argo CD compares again at once,
    // at the first commit: OutOfSync, which selfHeal off leaves alone.
    const editedAt = await clusterEdit(s, "green");
    await until(
      async () => comparedAt(s, first, "OutOfSync"),
      "Argo CD to find the later edit OutOfSync with the first commit",
    );
    await new Promise((r) => setTimeout(r, 3_000));
    expect(rec.revertedBy(), JSON.stringify(rec.seen)).toEqual([]);
    // A comparison that resolves the branch before the later edit's commit lands (driven here, as
    // Argo CD's webhook for the first push would be): automated sync syncs the first commit.
    await refreshNow(s);
    await until(async () => rec.revertedBy().length > 0, "a revert of the later edit", 30_000);
    const second = await report(s, "green", editedAt);
    await refreshNow(s);
    await until(async () => (await syncedSince(s)).includes(second), "Argo CD to sync the second commit");
    await until(async () => (await greeting(s.ns)) === "green", "green back on the cluster");
    await rec.stop();
    expect(rec.revertedBy(), JSON.stringify(rec.seen)).toEqual(["argocd-controller"]);
    expect(await syncedSince(s)).toEqual([first, second]);
    expect(await commitsSince(s)).toEqual([second, first]);
  });

  it("an Argo CD sidecar killed while its sync runs: the next one follows the operation to Succeeded, once", async () => {
    const s = await open(true);
    const pushed = await foreignPush(s, "while-killed");
    // The sync started: the Application's operation carries the claim's token.
    const token = await until(
      async () => (await app(s)).operation?.info?.find((i) => i.name === TOKEN_INFO)?.value,
      "the sidecar to start the sync",
      30_000,
      10,
    );
    // SIGKILL, as an OOM kill ends the container: its follow of the sync ends with it.
    await running.argocd!.kill();
    const atKill = await claim(s);
    expect(atKill.status?.operation?.token).toBe(token);
    expect(atKill.status?.history?.some((h) => h.token === token) ?? false).toBe(false);
    running.argocd = await startSidecar(d.installed, "argocd");
    await until(async () => (await claimHistory(s, pushed)).length > 0, "the operation for the push to end");
    // Long enough for a second attempt to be sent and to end, were one sent.
    await new Promise((r) => setTimeout(r, 5_000));
    expect(await claimHistory(s, pushed)).toEqual([expect.objectContaining({ token, phase: "Succeeded" })]);
    expect(attemptsSent(pushed).map((a) => a.token)).toEqual([token]);
    expect(await greeting(s.ns)).toBe("while-killed");
    expect(await syncedSince(s)).toEqual([pushed]);
    expect(await automatedOff(s)).toBe(true);
  });

  it("a worker restart: a push made while no worker runs is synced exactly once by the next", async () => {
    const s = await open(true);
    const pushed = await scene.pushWhileNoWorker(s, "while-down");
    await until(async () => (await greeting(s.ns)) === "while-down", "the new worker's sync of the push");
    await until(async () => (await claimHistory(s, pushed)).length > 0, "the operation for the push to end");
    await new Promise((r) => setTimeout(r, 5_000));
    expect(await syncedSince(s)).toEqual([pushed]);
    expect((await claimHistory(s, pushed)).map((h) => h.phase)).toEqual(["Succeeded"]);
    expect(attemptsSent(pushed)).toHaveLength(1);
  });
});
