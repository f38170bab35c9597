// applygate beside real Argo CD (test/real/argocd.ts) on the real control plane, every component as
// deployed (test/real/applygate.ts): a Git push synced exactly once with its revision on the
// Application's status and history, the two-edit race with and without applygate, a sidecar killed
// mid-sync and a worker restart. After each test the audit check: no 403 and no 422 for any
// product component. The same scenarios beside real Flux: scenarios-flux.real.test.ts.
import { randomBytes } from "node:crypto";
import { readdirSync, readFileSync } from "node:fs";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  CoreV1Api,
  CustomObjectsApi,
  PatchStrategy,
  setHeaderOptions,
  type V1ConfigMap,
} from "@kubernetes/client-node";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { objectPath, objectYaml } from "../../queue/git/layout.js";
import { connectRedis, type EmbeddedRedis, resolveEmbeddedRedis } from "../../queue/redis.js";
import { gitOk } from "../git/cli.js";
import { type GitServer, startGitServer } from "../git/server.js";
import { ensureRedisServer } from "../redis/install.js";
import { untilWith } from "../support/wait.js";
import {
  auditByComponent,
  auditProblems,
  auditTable,
  type ComponentName,
  type Installed,
  identitiesOf,
  installApplygate,
  kubectl,
  type Running,
  readAudit,
  type SidecarKind,
  startComponent,
  startSidecar,
} from "./applygate.js";
import { ARGOCD_BINARIES, ARGOCD_NAMESPACE, type RealArgoCD, startRealArgoCD } from "./argocd.js";
import { findRealBinaries } from "./binaries.js";
import { type RealCluster, startRealCluster } from "./cluster.js";

const bins = findRealBinaries(["etcd", "kube-apiserver", "kube-controller-manager", ...ARGOCD_BINARIES]);
if (!bins.built) console.warn(`\n!!! SKIPPED test/real/scenarios-argocd.real.test.ts: ${bins.message}\n`);

const until = untilWith({ timeoutMs: 90_000, everyMs: 100, retryErrors: true });
const COMPONENTS: ComponentName[] = ["gateway", "worker"];
const SIDECARS: SidecarKind[] = ["argocd"];
const MERGE = setHeaderOptions("Content-Type", PatchStrategy.MergePatch);
const APPLY = setHeaderOptions("Content-Type", PatchStrategy.ServerSideApply);
const USER = "user";
const api = "applygate.dev/v1alpha1";
const APPLICATIONS = { group: "argoproj.io", version: "v1alpha1", plural: "applications" } as const;
const CLAIMS = { group: "applygate.dev", version: "v1alpha1", plural: "argocdclaims" } as const;
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

describe.skipIf(!bins.built)("applygate beside real Argo CD", () => {
  let cluster: RealCluster;
  let redis: EmbeddedRedis;
  let git: GitServer;
  let argocd: RealArgoCD;
  let installed: Installed;
  let identities: Record<string, string>;
  let custom: CustomObjectsApi;
  let core: CoreV1Api;
  let auditMark = 0;
  let work: string;
  const running: Partial<Record<ComponentName | SidecarKind, Running>> = {};
  const cleanups: (() => Promise<void>)[] = [];

  beforeAll(async () => {
    redis = await resolveEmbeddedRedis(process.env, { ensureServer: ensureRedisServer });
    git = await startGitServer();
    cluster = await startRealCluster({ keep: Boolean(process.env.REAL_KEEP) });
    if (process.env.REAL_KEEP) console.log(`keeping ${cluster.dir}`);
    custom = cluster.kubeConfig().makeApiClient(CustomObjectsApi);
    core = cluster.kubeConfig().makeApiClient(CoreV1Api);
    // applygate first: its install makes the argocd namespace with the Secret its sidecar reads.
    // Argo CD as installed (install.yaml's defaults: a timed refresh every 120 s, a minute of
    // jitter, the repo-server's branch resolutions cached 3 minutes).
    installed = await installApplygate(cluster, { redisUrl: redis.url, appliers: SIDECARS });
    argocd = await startRealArgoCD(cluster);
    for (const c of COMPONENTS) running[c] = await startComponent(installed, c);
    for (const k of SIDECARS) running[k] = await startSidecar(installed, k);
    identities = await identitiesOf(installed, [...COMPONENTS, ...SIDECARS]);
    work = await mkdtemp(join(tmpdir(), "applygate-real-argocd-"));
  }, 420_000);

  afterAll(async () => {
    for (const r of Object.values(running)) await r?.stop();
    await argocd?.stop();
    await cluster?.stop();
    await git?.close();
    if (redis && installed) {
      const client = connectRedis(redis.url);
      let cursor = "0";
      do {
        const [next, keys] = await client.scan(cursor, "MATCH", `${installed.prefix}*`, "COUNT", 1000);
        cursor = next;
        if (keys.length) await client.del(...keys);
      } while (cursor !== "0");
      client.disconnect();
    }
    await redis?.stop();
    if (work) await rm(work, { recursive: true, force: true });
  }, 120_000);

  beforeEach(() => {
    auditMark = readAudit(cluster.auditLogPath).end;
  });

  afterEach(async (ctx) => {
    for (const c of cleanups.splice(0).reverse()) await c();
    const audit = auditByComponent(readAudit(cluster.auditLogPath, auditMark).events, identities);
    console.log(`API requests per component during "${ctx.task.name}":\n${auditTable(audit)}`);
    const problems = auditProblems(audit);
    expect(problems, `the audit log shows refusals of product components:\n${problems.join("\n")}`).toEqual(
      [],
    );
    for (const [name, r] of Object.entries(running))
      expect(r!.exitCodeNow(), `${name} is still running`).toBeNull();
  }, 180_000);

  async function kubectlOk(args: string[], input?: string) {
    const r = await kubectl(cluster, args, input === undefined ? {} : { input });
    if (r.code !== 0) throw new Error(`kubectl ${args.join(" ")}: ${r.out}${r.err}`);
    return r.out;
  }

  interface Scene {
    ns: string;
    repo: string;
    repoUrl: string;
    /** Name of the Application in argocd. */
    applier: string;
    intakeToken: string;
    file: string;
    /** The tip when the scene was ready. */
    start: string;
    /** How many entries the Application's history held when the scene was ready. */
    historyAtStart: number;
  }

  /**
   * A namespace's repository synced by an Application in argocd with automated sync on (prune,
   * selfHeal off, as users run it), applygate's GitTarget on its folder and, `held`, an ArgoCDClaim
   * holding the Application (with argocd's ApplierGrant).
   */
  async function scene(held: boolean): Promise<Scene> {
    const ns = `race-${randomBytes(3).toString("hex")}`;
    const repo = ns;
    const folder = "apps/web";
    const file = objectPath(folder, { apiVersion: "v1", kind: "ConfigMap", namespace: ns, name: "web" });
    const repoUrl = await git.createRepo(repo, {
      [file]: objectYaml({
        apiVersion: "v1",
        kind: "ConfigMap",
        metadata: { name: "web", namespace: ns },
        data: { greeting: "hello" },
      }),
    });
    const hookToken = randomBytes(12).toString("hex");
    const intakeToken = randomBytes(12).toString("hex");
    await kubectlOk(["create", "namespace", ns]);
    cleanups.push(async () => {
      await kubectl(cluster, ["-n", ns, "delete", "argocdclaims", "--all", "--wait=true", "--timeout=60s"]);
      for (const kind of ["application", "appliergrant"])
        await kubectl(cluster, [
          "-n",
          ARGOCD_NAMESPACE,
          "delete",
          kind,
          ns,
          "--ignore-not-found",
          "--wait=true",
        ]);
      await kubectl(cluster, ["delete", "namespace", ns, "--wait=true", "--timeout=90s"]);
    });
    for (const [role, sa] of [
      ["applygate-secret-reader", "applygate-gateway"],
      ["applygate-secret-watcher", "applygate-worker"],
    ])
      await kubectlOk([
        "-n",
        ns,
        "create",
        "rolebinding",
        role!,
        `--clusterrole=${role}`,
        `--serviceaccount=applygate-system:${sa}`,
      ]);
    await kubectlOk(
      ["apply", "-f", "-"],
      `
apiVersion: v1
kind: Secret
metadata: {name: hook, namespace: ${ns}}
stringData: {token: ${hookToken}}
---
apiVersion: v1
kind: Secret
metadata: {name: intake, namespace: ${ns}}
stringData: {token: ${intakeToken}}
---
apiVersion: ${api}
kind: GitProvider
metadata: {name: repo, namespace: ${ns}}
spec: {url: "${repoUrl}", type: gitea, webhookSecretRef: {name: hook}}
---
apiVersion: ${api}
kind: GitTarget
metadata: {name: web, namespace: ${ns}}
spec:
  providerRef: {name: repo}
  branch: main
  path: ${folder}
  claimRef: {kind: ArgoCDClaim, name: web}
  intakeSecretRef: {name: intake}
  commitWindow: {idleSeconds: 1, maxSeconds: 10}
${
  held
    ? `---
apiVersion: ${api}
kind: ApplierGrant
metadata: {name: ${ns}, namespace: ${ARGOCD_NAMESPACE}}
spec:
  from: [{namespace: ${ns}, kind: ArgoCDClaim}]
  to: [{name: ${ns}}]
---
apiVersion: ${api}
kind: ArgoCDClaim
metadata: {name: web, namespace: ${ns}}
spec: {applicationRef: {name: ${ns}, namespace: ${ARGOCD_NAMESPACE}}}
`
    : ""
}---
apiVersion: argoproj.io/v1alpha1
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
    const webhookPath = await until(async () => {
      const p = (await custom.getNamespacedCustomObject({
        group: "applygate.dev",
        version: "v1alpha1",
        plural: "gitproviders",
        namespace: ns,
        name: "repo",
      })) as { status?: { webhookPath?: string } };
      return p.status?.webhookPath;
    }, "the GitProvider's webhook path");
    const remove = git.addWebhook({
      url: `${running.gateway!.url("http")}${webhookPath}`,
      secret: hookToken,
    });
    cleanups.push(async () => remove());
    await until(async () => (await greeting(ns)) === "hello", "the first sync of the tip");
    const start = (await git.tip(repo))!;
    const s = { ns, repo, repoUrl, applier: ns, intakeToken, file, start, historyAtStart: 0 };
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
          c.status?.history?.some((h) => h.commit === start && h.phase === "Succeeded") &&
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

  const greeting = async (ns: string) =>
    (await core.readNamespacedConfigMap({ name: "web", namespace: ns }).catch(() => undefined))?.data
      ?.greeting;
  const app = async (s: Scene) =>
    (await custom.getNamespacedCustomObject({
      ...APPLICATIONS,
      namespace: ARGOCD_NAMESPACE,
      name: s.applier,
    })) as Application;
  const claim = async (s: Scene) =>
    (await custom.getNamespacedCustomObject({ ...CLAIMS, namespace: s.ns, name: "web" })) as Claim;
  /** The revision of each sync that succeeded, oldest first (Argo CD's status.history). */
  const history = async (s: Scene) => ((await app(s)).status?.history ?? []).map((h) => h.revision);
  /** The syncs that succeeded since the scene was ready. */
  const syncedSince = async (s: Scene) => (await history(s)).slice(s.historyAtStart);
  /** What the Application was last compared with, and how it stood. */
  const compared = async (s: Scene) => (await app(s)).status?.sync;
  /**
   * Asks Argo CD to compare the Application now with its branch resolved anew, as its Git webhook
   * or `argocd app get --refresh` does (the annotation; the controller removes it).
   */
  const refreshNow = (s: Scene) =>
    custom.patchNamespacedCustomObject(
      {
        ...APPLICATIONS,
        namespace: ARGOCD_NAMESPACE,
        name: s.applier,
        body: { metadata: { annotations: { "argocd.argoproj.io/refresh": "normal" } } },
      },
      MERGE,
    );
  const commitsSince = async (s: Scene) =>
    (await gitOk(["--git-dir", join(git.root, `${s.repo}.git`), "log", "--format=%H", `${s.start}..main`]))
      .split("\n")
      .filter(Boolean);

  /** The API edit itself: the ConfigMap's greeting set by "user"; answers when it was made. */
  async function clusterEdit(s: Scene, value: string): Promise<string> {
    const written: V1ConfigMap = await core.patchNamespacedConfigMap(
      {
        name: "web",
        namespace: s.ns,
        body: {
          apiVersion: "v1",
          kind: "ConfigMap",
          metadata: { name: "web", namespace: s.ns },
          data: { greeting: value },
        },
        fieldManager: USER,
        force: true,
      },
      APPLY,
    );
    const time = written.metadata?.managedFields?.find((m) => m.manager === USER)?.time;
    return time ? new Date(time).toISOString() : new Date().toISOString();
  }

  /** The tool that made an edit reports it to the intake API as a save; answers its commit. */
  async function report(s: Scene, value: string, editedAt: string): Promise<string> {
    const res = await fetch(
      `${running.gateway!.url("http")}/v1/targets/${s.ns}/web/writes?wait=published&timeout=30`,
      {
        method: "POST",
        headers: { authorization: `Bearer ${s.intakeToken}`, "content-type": "application/json" },
        body: JSON.stringify({
          changes: [
            {
              op: "upsert",
              object: {
                apiVersion: "v1",
                kind: "ConfigMap",
                metadata: { name: "web", namespace: s.ns },
                data: { greeting: value },
              },
            },
          ],
          author: { name: USER, email: `${USER}@example.com` },
          message: `web: greeting ${value}`,
          save: true,
          editedAt,
        }),
      },
    );
    const body = (await res.json()) as { commit?: string; published?: boolean };
    expect({ status: res.status, published: body.published }).toEqual({ status: 200, published: true });
    return body.commit!;
  }

  /** An API edit reported to the intake API as a save at once; answers its commit. */
  const edit = async (s: Scene, value: string) => report(s, value, await clusterEdit(s, value));

  /** Every value the ConfigMap's greeting takes, with the manager of its field, until stopped. */
  function record(s: Scene) {
    const seen: { value: string | undefined; manager: string | undefined }[] = [];
    let on = true;
    const loop = (async () => {
      while (on) {
        const cm = await core
          .readNamespacedConfigMap({ name: "web", namespace: s.ns })
          .catch(() => undefined);
        const value = cm?.data?.greeting;
        const manager = cm?.metadata?.managedFields?.find((m) =>
          JSON.stringify(m.fieldsV1 ?? {}).includes('"f:greeting"'),
        )?.manager;
        if (seen.at(-1)?.value !== value || seen.at(-1)?.manager !== manager) seen.push({ value, manager });
        await new Promise((r) => setTimeout(r, 50));
      }
    })();
    return {
      seen,
      async stop() {
        on = false;
        await loop;
      },
      /** Whether "green" was replaced by something an applier wrote. */
      revertedBy: () => {
        const i = seen.findIndex((x) => x.value === "green");
        return i < 0
          ? []
          : seen
              .slice(i + 1)
              .filter((x) => x.value !== "green")
              .map((x) => x.manager);
      },
    };
  }

  /** A commit by somebody else, pushed with git to the branch. */
  async function foreignPush(s: Scene, value: string): Promise<string> {
    const dir = join(work, `${s.ns}-${randomBytes(2).toString("hex")}`);
    await gitOk(["clone", "-q", s.repoUrl, dir]);
    const path = join(dir, s.file);
    await writeFile(path, (await readFile(path, "utf8")).replace(/greeting: \S+/, `greeting: ${value}`));
    await gitOk(
      ["-c", "user.name=Bob", "-c", "user.email=bob@example.com", "commit", "-qam", `greeting ${value}`],
      { cwd: dir },
    );
    await gitOk(["push", "-q", "origin", "HEAD:main"], { cwd: dir });
    return (await gitOk(["rev-parse", "HEAD"], { cwd: dir })).trim();
  }

  /** The claim's history entries for `commit`. */
  const claimHistory = async (s: Scene, commit: string) =>
    ((await claim(s)).status?.history ?? []).filter((h) => h.commit === commit);
  /** The apply attempts every worker process sent for `commit`, read from their logs. */
  const attemptsSent = (commit: string) =>
    readdirSync(installed.dir)
      .filter((f) => /^worker-.*\.log$/.test(f))
      // Whole lines only: the last one may be half written.
      .flatMap((f) => readFileSync(join(installed.dir, f), "utf8").split("\n").slice(0, -1))
      .filter((l) => l.includes('"msg":"apply attempt sent"'))
      .map((l) => JSON.parse(l) as { commit?: string; token?: string })
      .filter((l) => l.commit === commit);
  const automatedOff = async (s: Scene) => (await app(s)).spec.syncPolicy?.automated?.enabled === false;

  // -------------------------------------------------------------------------------------------

  it("syncs a Git push exactly once through the held Application, its revision on Argo CD's status and history", async () => {
    const s = await scene(true);
    const pushed = await foreignPush(s, "pushed");
    await until(async () => (await greeting(s.ns)) === "pushed", "Argo CD to sync the push");
    await until(
      async () => (await app(s)).status?.operationState?.syncResult?.revision === pushed,
      "the operation's syncResult.revision",
    );
    // Argo CD's own view agrees once the sidecar's refresh after the sync resolved the branch.
    await until(async () => {
      const sync = await compared(s);
      return sync?.status === "Synced" && sync.revision === pushed;
    }, "the Application Synced at the push");
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
    const s = await scene(true);
    const rec = record(s);
    const first = await edit(s, "blue");
    // Argo CD compares with the first commit (the moment the race needs); held, nothing syncs it.
    await refreshNow(s);
    await until(async () => (await compared(s))?.revision === first, "Argo CD to compare the first commit");
    // The later edit lands on the cluster before its commit is in Git, and Argo CD compares the
    // branch again meanwhile: the first commit, OutOfSync with the live edit (where Argo CD's own
    // automated sync reverts it, below). Held, nothing syncs it.
    const editedAt = await clusterEdit(s, "green");
    await refreshNow(s);
    await until(async () => {
      const sync = await compared(s);
      return sync?.revision === first && sync.status === "OutOfSync";
    }, "Argo CD to find the first commit OutOfSync with the later edit");
    const second = await report(s, "green", editedAt);
    await refreshNow(s);
    await until(async () => {
      const sync = await compared(s);
      return sync?.revision === second && sync.status === "Synced";
    }, "Argo CD to compare the second commit");
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
    const s = await scene(false);
    const rec = record(s);
    const first = await edit(s, "blue");
    // The first commit holds what the edit made live: Argo CD finds it Synced and syncs nothing.
    await refreshNow(s);
    await until(async () => {
      const sync = await compared(s);
      return sync?.revision === first && sync.status === "Synced";
    }, "Argo CD to find the first commit Synced");
    expect(await syncedSince(s)).toEqual([]);
    // The later edit lands on the cluster; its commit is not in Git yet (a tool reports it after
    // the edit, and the branch worker's commit window gathers it). Argo CD compares again at once,
    // at the first commit: OutOfSync, which selfHeal off leaves alone.
    const editedAt = await clusterEdit(s, "green");
    await until(async () => {
      const sync = await compared(s);
      return sync?.revision === first && sync.status === "OutOfSync";
    }, "Argo CD to find the later edit OutOfSync with the first commit");
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
    const s = await scene(true);
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
    running.argocd = await startSidecar(installed, "argocd");
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
    const s = await scene(true);
    // SIGTERM, as a rollout stops the pod: the branch is given back.
    expect(await running.worker!.stop()).toBe(0);
    const pushed = await foreignPush(s, "while-down");
    // The gateway acknowledges the push notice with no worker running; nothing syncs it yet.
    await new Promise((r) => setTimeout(r, 3_000));
    expect(await greeting(s.ns)).toBe("hello");
    running.worker = await startComponent(installed, "worker");
    await until(async () => (await greeting(s.ns)) === "while-down", "the new worker's sync of the push");
    await until(async () => (await claimHistory(s, pushed)).length > 0, "the operation for the push to end");
    await new Promise((r) => setTimeout(r, 5_000));
    expect(await syncedSince(s)).toEqual([pushed]);
    expect((await claimHistory(s, pushed)).map((h) => h.phase)).toEqual(["Succeeded"]);
    expect(attemptsSent(pushed)).toHaveLength(1);
  });
});
