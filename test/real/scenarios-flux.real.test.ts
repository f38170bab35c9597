// applygate beside real Flux (test/real/flux.ts) on the real control plane, every component as
// deployed (test/real/applygate.ts): a Git push applied exactly once with the right revision on the
// Kustomization's status, and the two-edit race with and without applygate, commits counted. After
// each test the audit check: no 403 and no 422 for any product component.
import { randomBytes } from "node:crypto";
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
import { findRealBinaries } from "./binaries.js";
import { type RealCluster, startRealCluster } from "./cluster.js";
import { FLUX_NAMESPACE, GIT_REPOSITORIES, KUSTOMIZATIONS, type RealFlux, startRealFlux } from "./flux.js";
import { readFluxLog } from "./flux-log.js";

const bins = findRealBinaries([
  "etcd",
  "kube-apiserver",
  "kube-controller-manager",
  "kubectl",
  "source-controller",
  "kustomize-controller",
]);
if (!bins.built) console.warn(`\n!!! SKIPPED test/real/scenarios-flux.real.test.ts: ${bins.message}\n`);

const until = untilWith({ timeoutMs: 90_000, everyMs: 100, retryErrors: true });
const COMPONENTS: ComponentName[] = ["gateway", "worker"];
const SIDECARS: SidecarKind[] = ["flux"];
const MERGE = setHeaderOptions("Content-Type", PatchStrategy.MergePatch);
const APPLY = setHeaderOptions("Content-Type", PatchStrategy.ServerSideApply);
const USER = "user";
const api = "applygate.dev/v1alpha1";

type Obj = {
  metadata: { name: string; annotations?: Record<string, string> };
  spec?: Record<string, unknown>;
  status?: Record<string, unknown> & { conditions?: { type: string; status: string; reason: string }[] };
};

describe.skipIf(!bins.built)("applygate beside real Flux", () => {
  let cluster: RealCluster;
  let redis: EmbeddedRedis;
  let git: GitServer;
  let flux: RealFlux;
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
    flux = await startRealFlux(cluster);
    installed = await installApplygate(cluster, { redisUrl: redis.url, appliers: SIDECARS });
    for (const c of COMPONENTS) running[c] = await startComponent(installed, c);
    for (const k of SIDECARS) running[k] = await startSidecar(installed, k);
    identities = await identitiesOf(installed, [...COMPONENTS, ...SIDECARS]);
    work = await mkdtemp(join(tmpdir(), "applygate-real-flux-"));
  }, 300_000);

  afterAll(async () => {
    for (const r of Object.values(running)) await r?.stop();
    await flux?.stop();
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
    /** Name of the GitRepository and Kustomization in flux-system. */
    applier: string;
    intakeToken: string;
    file: string;
    /** The tip when the scene was ready. */
    start: string;
  }

  /**
   * A namespace's repository applied by a Kustomization in flux-system on Flux's own timers
   * (Kustomization every second, GitRepository every 20 s), applygate's GitTarget on its folder,
   * and, `held`, a FluxClaim holding the Kustomization (with flux-system's ApplierGrant).
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
      await kubectl(cluster, ["-n", ns, "delete", "fluxclaims", "--all", "--wait=true", "--timeout=60s"]);
      for (const kind of ["kustomization", "gitrepository", "appliergrant"])
        await kubectl(cluster, [
          "-n",
          FLUX_NAMESPACE,
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
  claimRef: {kind: FluxClaim, name: web}
  intakeSecretRef: {name: intake}
  commitWindow: {idleSeconds: 1, maxSeconds: 10}
---
apiVersion: source.toolkit.fluxcd.io/v1
kind: GitRepository
metadata: {name: ${ns}, namespace: ${FLUX_NAMESPACE}}
spec: {interval: 20s, url: "${repoUrl}", ref: {branch: main}}
---
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {name: ${ns}, namespace: ${FLUX_NAMESPACE}}
spec:
  interval: 1s
  prune: true
  path: ./${folder}
  sourceRef: {kind: GitRepository, name: ${ns}}
${
  held
    ? `---
apiVersion: ${api}
kind: ApplierGrant
metadata: {name: ${ns}, namespace: ${FLUX_NAMESPACE}}
spec:
  from: [{namespace: ${ns}, kind: FluxClaim}]
  to: [{name: ${ns}}]
---
apiVersion: ${api}
kind: FluxClaim
metadata: {name: web, namespace: ${ns}}
spec: {kustomizationRef: {name: ${ns}, namespace: ${FLUX_NAMESPACE}}}
`
    : ""
}`,
    );
    const webhookPath = await until(async () => {
      const p = (await custom.getNamespacedCustomObject({
        group: "applygate.dev",
        version: "v1alpha1",
        plural: "gitproviders",
        namespace: ns,
        name: "repo",
      })) as Obj;
      return typeof p.status?.webhookPath === "string" && (p.status.webhookPath as string);
    }, "the GitProvider's webhook path");
    const remove = git.addWebhook({
      url: `${running.gateway!.url("http")}${webhookPath}`,
      secret: hookToken,
    });
    cleanups.push(async () => remove());
    await until(async () => (await greeting(ns)) === "hello", "the first apply of the tip");
    if (held)
      await until(async () => {
        const c = (await custom.getNamespacedCustomObject({
          group: "applygate.dev",
          version: "v1alpha1",
          plural: "fluxclaims",
          namespace: ns,
          name: "web",
        })) as Obj;
        return c.status?.conditions?.find((x) => x.type === "InControl")?.status === "True";
      }, "the claim to hold the Kustomization");
    const start = (await git.tip(repo))!;
    return { ns, repo, repoUrl, applier: ns, intakeToken, file, start };
  }

  const greeting = async (ns: string) =>
    (await core.readNamespacedConfigMap({ name: "web", namespace: ns }).catch(() => undefined))?.data
      ?.greeting;
  const ks = async (s: Scene) =>
    (await custom.getNamespacedCustomObject({
      ...KUSTOMIZATIONS,
      namespace: FLUX_NAMESPACE,
      name: s.applier,
    })) as Obj;
  const artifactRevision = async (s: Scene) =>
    (
      (
        (await custom.getNamespacedCustomObject({
          ...GIT_REPOSITORIES,
          namespace: FLUX_NAMESPACE,
          name: s.applier,
        })) as Obj
      ).status?.artifact as { revision?: string } | undefined
    )?.revision;
  /** Asks source-controller to fetch now, as `flux reconcile source git` does. */
  const fetchNow = (s: Scene) =>
    custom.patchNamespacedCustomObject(
      {
        ...GIT_REPOSITORIES,
        namespace: FLUX_NAMESPACE,
        name: s.applier,
        body: { metadata: { annotations: { "reconcile.fluxcd.io/requestedAt": new Date().toISOString() } } },
      },
      MERGE,
    );
  const appliedRevisions = (s: Scene) =>
    readFluxLog(flux.logPaths).appliedRevisions({ namespace: FLUX_NAMESPACE, name: s.applier });
  const commitsSince = async (s: Scene) =>
    (await gitOk(["--git-dir", join(git.root, `${s.repo}.git`), "log", "--format=%H", `${s.start}..main`]))
      .split("\n")
      .filter(Boolean);

  /** An API edit: the ConfigMap's greeting set by "user", reported to the intake API as a save. */
  async function edit(s: Scene, value: string): Promise<string> {
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
          editedAt: time ? new Date(time).toISOString() : new Date().toISOString(),
        }),
      },
    );
    const body = (await res.json()) as { commit?: string; published?: boolean };
    expect({ status: res.status, published: body.published }).toEqual({ status: 200, published: true });
    return body.commit!;
  }

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
      {
        cwd: dir,
      },
    );
    await gitOk(["push", "-q", "origin", "HEAD:main"], { cwd: dir });
    return (await gitOk(["rev-parse", "HEAD"], { cwd: dir })).trim();
  }

  // -------------------------------------------------------------------------------------------

  it("applies a Git push exactly once through the held Kustomization, its revision on Flux's status", async () => {
    const s = await scene(true);
    const before = appliedRevisions(s).length;
    const pushed = await foreignPush(s, "pushed");
    await until(async () => (await greeting(s.ns)) === "pushed", "Flux to apply the push");
    await until(
      async () => (await ks(s)).status?.lastAppliedRevision === `main@sha1:${pushed}`,
      "the Kustomization's lastAppliedRevision",
    );
    // The sidecar resumed it for the operation and holds it again once the operation ended.
    await until(async () => (await ks(s)).spec?.suspend === true, "the Kustomization held again");
    // A few of the Kustomization's one-second intervals more: nothing applies it again.
    await new Promise((r) => setTimeout(r, 5_000));
    const applied = appliedRevisions(s).slice(before);
    expect(applied).toEqual([`main@sha1:${pushed}`]);
    expect(await commitsSince(s)).toEqual([pushed]);
  });

  it("the two-edit race held by applygate: the later edit wins, one commit per save, no apply", async () => {
    const s = await scene(true);
    const before = appliedRevisions(s).length;
    const rec = record(s);
    const first = await edit(s, "blue");
    // Flux fetches the first commit (the moment the race needs); held, nothing applies it.
    await fetchNow(s);
    await until(
      async () => (await artifactRevision(s))?.endsWith(first),
      "source-controller to fetch the first commit",
    );
    const second = await edit(s, "green");
    await fetchNow(s);
    await until(
      async () => (await artifactRevision(s))?.endsWith(second),
      "source-controller to fetch the second commit",
    );
    // As long again as the Kustomization's interval would have reverted it several times over.
    await new Promise((r) => setTimeout(r, 6_000));
    await rec.stop();
    expect(rec.revertedBy(), JSON.stringify(rec.seen)).toEqual([]);
    expect(await greeting(s.ns)).toBe("green");
    expect(await commitsSince(s)).toEqual([second, first]);
    expect(appliedRevisions(s).slice(before)).toEqual([]);
  });

  it("the two-edit race on Flux's own timers: the first commit reverts the later edit", async () => {
    const s = await scene(false);
    const rec = record(s);
    const first = await edit(s, "blue");
    await fetchNow(s);
    await until(
      async () => appliedRevisions(s).includes(`main@sha1:${first}`),
      "Flux to apply the first commit",
    );
    const second = await edit(s, "green");
    // The source still holds the first commit; the Kustomization's next interval applies it.
    await until(async () => rec.revertedBy().length > 0, "a revert of the later edit", 30_000);
    await fetchNow(s);
    await until(
      async () => appliedRevisions(s).includes(`main@sha1:${second}`),
      "Flux to apply the second commit",
    );
    await until(async () => (await greeting(s.ns)) === "green", "green back on the cluster");
    await rec.stop();
    expect(rec.revertedBy()).toContain("kustomize-controller");
    expect(await commitsSince(s)).toEqual([second, first]);
  });

  it("a Flux sidecar killed while the Kustomization is resumed: the next one follows the operation to Succeeded, once", async () => {
    const s = await scene(true);
    const pushed = await foreignPush(s, "while-killed");
    await until(
      async () => (await ks(s)).spec?.suspend === false,
      "the sidecar to resume the Kustomization",
      30_000,
      10,
    );
    // SIGKILL, as an OOM kill ends the container: nothing suspends the Kustomization, which Flux
    // reconciles every second meanwhile (each reconcile shows Ready Unknown while it runs).
    await running.flux!.kill();
    running.flux = await startSidecar(installed, "flux");
    const ended = async () =>
      (
        (
          (await custom.getNamespacedCustomObject({
            group: "applygate.dev",
            version: "v1alpha1",
            plural: "fluxclaims",
            namespace: s.ns,
            name: "web",
          })) as Obj
        ).status?.history as { commit: string; phase: string; outcome?: string }[] | undefined
      )?.filter((h) => h.commit === pushed) ?? [];
    await until(async () => (await ended()).length > 0, "the operation for the push to end");
    await until(async () => (await ks(s)).spec?.suspend === true, "the Kustomization held again");
    // Long enough for a second attempt to be sent and to end, were one sent.
    await new Promise((r) => setTimeout(r, 5_000));
    expect((await ended()).map((h) => h.phase)).toEqual(["Succeeded"]);
    expect(await greeting(s.ns)).toBe("while-killed");
    expect(appliedRevisions(s).filter((r) => !r.endsWith(pushed) && !r.endsWith(s.start))).toEqual([]);
  });

  it("a worker restart: a push made while no worker runs is applied exactly once by the next", async () => {
    const s = await scene(true);
    const before = appliedRevisions(s).length;
    // SIGTERM, as a rollout stops the pod: the branch is given back.
    expect(await running.worker!.stop()).toBe(0);
    const pushed = await foreignPush(s, "while-down");
    // The gateway acknowledges the push notice with no worker running; nothing applies it yet.
    await new Promise((r) => setTimeout(r, 3_000));
    expect(await greeting(s.ns)).toBe("hello");
    running.worker = await startComponent(installed, "worker");
    await until(async () => (await greeting(s.ns)) === "while-down", "the new worker's apply of the push");
    await until(async () => (await ks(s)).spec?.suspend === true, "the Kustomization held again");
    await new Promise((r) => setTimeout(r, 5_000));
    expect(appliedRevisions(s).slice(before)).toEqual([`main@sha1:${pushed}`]);
  });
});
