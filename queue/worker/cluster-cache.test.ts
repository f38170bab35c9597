import { mkdtemp } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import * as k8s from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ApiServer, readAuditLog, startApiServer } from "../../test/cluster/apiserver/index.js";
import { capturingLogger } from "../../test/support/log-lines.js";
import { waitFor } from "../../test/worker/harness.js";
import { KubeObjects, listBranch } from "../apply/index.js";
import { API_VERSION } from "../crds/index.js";
import { silentLogger } from "../log.js";
import { ClusterCache } from "./cluster-cache.js";
import { KubeDirectory } from "./kube.js";

const crd = (f: string) => fileURLToPath(new URL(`../../manifests/base/crds/${f}`, import.meta.url));
const testCrd = (f: string) => fileURLToPath(new URL(`../../test/cluster/crds/${f}`, import.meta.url));

/**
 * An API server (auditing to a file) holding, in namespace `team`, GitProvider `apps`, claim `web`
 * of `claimKind` and its GitTarget `web`, then `rest` (the applier and what it reads).
 */
async function applierWorld(o: {
  claimKind: "FluxClaim" | "ArgoCDClaim";
  claimSpec: string;
  crds: string[];
  namespaces: string[];
  rest: string;
}): Promise<{ server: ApiServer; auditLog: string }> {
  const auditLog = join(await mkdtemp(join(tmpdir(), "applygate-cache-")), "audit.jsonl");
  const server = await startApiServer({ auditLog, bookmarkIntervalMs: 100 });
  const plural = o.claimKind === "FluxClaim" ? "fluxclaims" : "argocdclaims";
  for (const f of [
    "applygate.dev_gittargets.yaml",
    "applygate.dev_gitproviders.yaml",
    `applygate.dev_${plural}.yaml`,
  ])
    await server.installCrdFile(crd(f));
  for (const f of o.crds) await server.installCrdFile(testCrd(f));
  const core = server.kubeConfig().makeApiClient(k8s.CoreV1Api);
  for (const name of ["team", ...o.namespaces]) await core.createNamespace({ body: { metadata: { name } } });
  await server.applyYaml(`apiVersion: ${API_VERSION}
kind: GitProvider
metadata: {name: apps, namespace: team}
spec: {url: "https://git.example.com/org/apps.git", type: github, webhookSecretRef: {name: hook}}
---
apiVersion: ${API_VERSION}
kind: ${o.claimKind}
metadata: {name: web, namespace: team}
spec: ${o.claimSpec}
---
apiVersion: ${API_VERSION}
kind: GitTarget
metadata: {name: web, namespace: team}
spec: {providerRef: {name: apps}, branch: main, path: web, claimRef: {kind: ${o.claimKind}, name: web}}
---
${o.rest}`);
  return { server, auditLog };
}

/** The reads (get, list) of `resource` in an audit log. */
const readsOf = (auditLog: string, resource: string) =>
  readAuditLog(auditLog).filter(
    (e) => (e.verb === "get" || e.verb === "list") && e.objectRef?.resource === resource,
  );
/** A collection of one of our kinds in namespace `team`, as the custom objects API names it. */
const inTeam = (plural: string) => ({
  group: "applygate.dev",
  version: "v1alpha1",
  plural,
  namespace: "team",
});
const BRANCHES = 20;
const keyOf = (i: number) => `team/repo${i}:git.example.com/org/repo${i}@main`;

describe("the worker's cluster cache", () => {
  let server: ApiServer;
  let auditLog: string;
  let cache: ClusterCache;
  beforeAll(async () => {
    auditLog = join(await mkdtemp(join(tmpdir(), "applygate-cache-")), "audit.jsonl");
    server = await startApiServer({ auditLog, bookmarkIntervalMs: 100 });
    await server.installCrdFile(crd("applygate.dev_gittargets.yaml"));
    await server.installCrdFile(crd("applygate.dev_gitproviders.yaml"));
    await server.installCrdFile(crd("applygate.dev_scopegrants.yaml"));
    await server
      .kubeConfig()
      .makeApiClient(k8s.CoreV1Api)
      .createNamespace({ body: { metadata: { name: "team" } } });
    const docs: string[] = [];
    for (let i = 0; i < BRANCHES; i++)
      docs.push(`apiVersion: ${API_VERSION}
kind: GitProvider
metadata: {name: repo${i}, namespace: team}
spec: {url: "https://git.example.com/org/repo${i}.git", type: github, webhookSecretRef: {name: hook}, credentialsSecretRef: {name: creds${i}}}
---
apiVersion: ${API_VERSION}
kind: GitTarget
metadata: {name: site${i}, namespace: team}
spec: {providerRef: {name: repo${i}}, branch: main, path: clusters/dev}`);
    await server.applyYaml(docs.join("\n---\n"));
    cache = new ClusterCache(server.kubeConfig());
  });
  afterAll(async () => {
    await cache.close();
    await server.close();
  });

  it("answers every branch lookup from its caches: after the first lookups, no list or get, only watches", async () => {
    const directory = new KubeDirectory(cache);
    for (let i = 0; i < BRANCHES; i++) expect((await directory.branch(keyOf(i)))?.key).toBe(keyOf(i));
    const reads = () =>
      readAuditLog(auditLog).filter(
        (e) =>
          (e.verb === "list" || e.verb === "get") &&
          ["gitproviders", "gittargets", "scopegrants", "secrets"].includes(e.objectRef?.resource ?? ""),
      );
    const before = reads().length;
    for (let round = 0; round < 5; round++)
      for (let i = 0; i < BRANCHES; i++) await directory.branch(keyOf(i));
    expect(reads().slice(before)).toEqual([]);
    // Each Secret is watched by name, never a namespace's Secrets.
    const secretWatches = readAuditLog(auditLog).filter(
      (e) => e.objectRef?.resource === "secrets" && (e.verb === "watch" || e.verb === "list"),
    );
    expect(secretWatches.length).toBeGreaterThan(0);
    for (const e of secretWatches) expect(e.requestURI).toMatch(/fieldSelector=metadata\.name%3Dcreds\d+/);
    // A kind the cluster does not serve (no claim CRDs here) holds nothing.
    expect(cache.objects("FluxClaim")?.list("team")).toEqual([]);
  });

  it("answers lookups from one build until a spec changes, never from a build older than the change", async () => {
    const directory = new KubeDirectory(cache);
    expect((await directory.branch(keyOf(7)))?.targets.map((t) => t.suspended)).toEqual([undefined]);
    const version = cache.version;
    // A status write changes nothing a lookup reads: the build is kept.
    await server
      .kubeConfig()
      .makeApiClient(k8s.CustomObjectsApi)
      .patchNamespacedCustomObjectStatus(
        {
          group: "applygate.dev",
          version: "v1alpha1",
          plural: "gittargets",
          namespace: "team",
          name: "site7",
          body: { status: { observedGeneration: 1 } },
        },
        k8s.setHeaderOptions("Content-Type", k8s.PatchStrategy.MergePatch),
      );
    await server.applyYaml(`apiVersion: ${API_VERSION}
kind: GitTarget
metadata: {name: site7, namespace: team}
spec: {providerRef: {name: repo7}, branch: main, path: clusters/dev, suspend: true}`);
    await waitFor("the spec change seen", async () =>
      (await directory.branch(keyOf(7)))?.targets.some((t) => t.suspended === true),
    );
    // One bump for the spec change; the status write made none.
    expect(cache.version).toBe(version + 1);
  });

  it("tells the branch concerned of a GitTarget created, and of its GitProvider's Secret, and no other", async () => {
    await cache.start();
    const told: Array<Set<string> | "all"> = [];
    const off = cache.onChange((keys) => told.push(keys));
    await server.applyYaml(`apiVersion: ${API_VERSION}
kind: GitTarget
metadata: {name: late, namespace: team}
spec: {providerRef: {name: repo3}, branch: main, path: clusters/late}`);
    await waitFor("the new GitTarget told", () => told.length > 0);
    expect(told).toEqual([new Set([keyOf(3)])]);
    told.length = 0;
    // The Secret is watched from the first lookup of its provider's branch on.
    await new KubeDirectory(cache).branch(keyOf(5));
    await server
      .kubeConfig()
      .makeApiClient(k8s.CoreV1Api)
      .createNamespacedSecret({
        namespace: "team",
        body: { metadata: { name: "creds5" }, stringData: { password: "p" } },
      });
    await waitFor("the Secret told", () => told.length > 0);
    expect(told).toEqual([new Set([keyOf(5)])]);
    expect((await new KubeDirectory(cache).branch(keyOf(5)))?.remote.auth).toEqual({
      username: "git",
      password: "p",
    });
    off();
  });

  it("stops watching a Secret once nothing names it (its provider deleted), and watches it again when named again", async () => {
    const watched = () => cache.kube.informers.running().filter((p) => p.endsWith("/secrets")).length;
    const directory = () => new KubeDirectory(cache);
    await directory().branch(keyOf(11));
    const before = watched();
    expect(before).toBeGreaterThan(0);
    const custom = server.kubeConfig().makeApiClient(k8s.CustomObjectsApi);
    const provider = inTeam("gitproviders");
    await custom.deleteNamespacedCustomObject({ ...provider, name: "repo11" });
    await waitFor("the Secret's watch stopped", () => watched() === before - 1);
    // A status write to another provider keeps every Secret still named.
    await custom.patchNamespacedCustomObjectStatus(
      { ...provider, name: "repo12", body: { status: { webhookPath: "/hook/x" } } },
      k8s.setHeaderOptions("Content-Type", k8s.PatchStrategy.MergePatch),
    );
    await new Promise((r) => setImmediate(r));
    expect(watched()).toBe(before - 1);

    await server.applyYaml(`apiVersion: ${API_VERSION}
kind: GitProvider
metadata: {name: repo11, namespace: team}
spec: {url: "https://git.example.com/org/repo11.git", type: github, webhookSecretRef: {name: hook}, credentialsSecretRef: {name: creds11}}`);
    await waitFor("the provider back", async () => (await directory().branch(keyOf(11))) !== undefined);
    expect(watched()).toBe(before);
  });
});

describe("the worker's cache of appliers", () => {
  let server: ApiServer;
  let auditLog: string;
  let cache: ClusterCache;
  const KEY = "team/apps:git.example.com/org/apps@main";
  const kustomization = (source: string, status: string) => `apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {name: web, namespace: team}
spec: {interval: 10m, prune: true, path: ./web, sourceRef: {kind: GitRepository, name: ${source}}}
status: {lastAttemptedRevision: ${status}}`;
  beforeAll(async () => {
    ({ server, auditLog } = await applierWorld({
      claimKind: "FluxClaim",
      claimSpec: "{kustomizationRef: {name: web, namespace: team}}",
      crds: ["flux-kustomization.yaml"],
      namespaces: [],
      rest: kustomization("repo", "a"),
    }));
    cache = new ClusterCache(server.kubeConfig());
  });
  afterAll(async () => {
    await cache.close();
    await server.close();
  });

  it("lists a branch's appliers from the cache, keeps only their source, and tells the branch only when the source changes", async () => {
    const objects = new KubeObjects(cache.kube, silentLogger(), {}, cache);
    const names = [{ namespace: "team", name: "web" }];
    const first = await listBranch(objects, names);
    expect(first.targets[0]?.source).toBe("flux/GitRepository/team/repo");
    const reads = () => readsOf(auditLog, "kustomizations");
    const before = reads().length;
    for (let i = 0; i < 5; i++) await listBranch(objects, names);
    expect(reads().slice(before)).toEqual([]);
    // Only the fields naming the source are kept, never the applier's status.
    expect(cache.objects("Kustomization")?.get("web", "team")).toMatchObject({
      spec: { sourceRef: { kind: "GitRepository", name: "repo" } },
    });
    expect(cache.objects("Kustomization")?.get("web", "team")?.status).toBeUndefined();

    const told: Array<Set<string> | "all"> = [];
    const off = cache.onChange((keys) => told.push(keys));
    // Status moves at every apply: nothing the decisions read changed.
    await server.applyYaml(kustomization("repo", "b"));
    const statusMoved = cache.objects("Kustomization")?.get("web", "team")?.metadata.resourceVersion;
    await waitFor("the status change cached", async () => {
      const rv = (await server.kubeConfig().makeApiClient(k8s.CustomObjectsApi).getNamespacedCustomObject({
        group: "kustomize.toolkit.fluxcd.io",
        version: "v1",
        namespace: "team",
        plural: "kustomizations",
        name: "web",
      })) as { metadata: { resourceVersion: string } };
      return (
        cache.objects("Kustomization")?.get("web", "team")?.metadata.resourceVersion ===
        rv.metadata.resourceVersion
      );
    });
    expect(statusMoved).toBeDefined();
    expect(told).toEqual([]);
    await server.applyYaml(kustomization("other", "b"));
    await waitFor("the source change told", () => told.length > 0);
    expect(told).toEqual([new Set([KEY])]);
    expect((await listBranch(objects, names)).targets[0]?.source).toBe("flux/GitRepository/team/other");
    off();
  });

  it("tells a claim's branch of a status write only when it changes what the listing reads", async () => {
    await cache.start();
    const custom = server.kubeConfig().makeApiClient(k8s.CustomObjectsApi);
    const claim = { ...inTeam("fluxclaims"), name: "web" };
    const writeStatus = async (status: Record<string, unknown>) => {
      const written = (await custom.patchNamespacedCustomObjectStatus(
        { ...claim, body: { status } },
        k8s.setHeaderOptions("Content-Type", k8s.PatchStrategy.MergePatch),
      )) as { metadata: { resourceVersion: string } };
      await waitFor(
        "the write cached",
        () =>
          cache.objects("FluxClaim")?.get("web", "team")?.metadata.resourceVersion ===
          written.metadata.resourceVersion,
      );
    };
    const told: Array<Set<string> | "all"> = [];
    const off = cache.onChange((keys) => told.push(keys));
    const condition = (status: string) => ({
      conditions: [
        {
          type: "Retrying",
          status,
          reason: "Backoff",
          message: "",
          lastTransitionTime: "2026-01-01T00:00:00Z",
        },
      ],
    });
    await writeStatus(condition("True"));
    await writeStatus(condition("False"));
    expect(told).toEqual([]);
    const listed = await listBranch(new KubeObjects(cache.kube, silentLogger(), {}, cache), [
      { namespace: "team", name: "web" },
    ]);
    expect(listed.claims[0]?.operation).toBeUndefined();
    await writeStatus({
      operation: {
        token: "t1",
        phase: "Requested",
        commit: "a".repeat(40),
        targets: [],
        requestedAt: "2026-01-01T00:00:00Z",
      },
    });
    expect(told).toEqual([new Set([KEY])]);
    await writeStatus({ repairPending: true });
    expect(told).toHaveLength(2);
    off();
  });

  it("tells the branch of a claim whose signature approval names a keys Secret, when that Secret changes", async () => {
    await cache.start();
    const told: Array<Set<string> | "all"> = [];
    const off = cache.onChange((keys) => told.push(keys));
    await server.applyYaml(`apiVersion: ${API_VERSION}
kind: FluxClaim
metadata: {name: web, namespace: team}
spec: {kustomizationRef: {name: web, namespace: team}, approval: {signature: {secretRef: {name: release-keys}}}}`);
    await waitFor("the claim's change told", () => told.length > 0);
    // The keys Secret is watched by name from its first read on (the listing reads it).
    expect(await cache.secret("team", "release-keys")).toMatchObject({ ok: false, code: 404 });
    told.length = 0;
    await server
      .kubeConfig()
      .makeApiClient(k8s.CoreV1Api)
      .createNamespacedSecret({
        namespace: "team",
        body: { metadata: { name: "release-keys" }, stringData: { authorized_keys: "ssh-ed25519 AAAA" } },
      });
    await waitFor("the keys Secret told", () => told.length > 0);
    expect(told).toEqual([new Set([KEY])]);
    expect(await cache.secret("team", "release-keys")).toMatchObject({ ok: true });
    off();
  });
});

describe("the worker's cluster cache: Argo CD AppProjects", () => {
  let server: ApiServer;
  let auditLog: string;
  let cache: ClusterCache;
  const project = (duration: string) => `apiVersion: argoproj.io/v1alpha1
kind: AppProject
metadata: {name: shop, namespace: argocd}
spec:
  sourceRepos: ["*"]
  destinations: [{server: "*", namespace: "*"}]
  syncWindows: [{kind: deny, schedule: "0 18 * * *", duration: ${duration}, applications: ["web"]}]`;
  beforeAll(async () => {
    ({ server, auditLog } = await applierWorld({
      claimKind: "ArgoCDClaim",
      claimSpec: "{applicationRef: {name: web, namespace: team}}",
      crds: ["argocd-application.yaml", "argocd-appproject.yaml"],
      namespaces: ["argocd"],
      rest: `apiVersion: argoproj.io/v1alpha1
kind: Application
metadata: {name: web, namespace: team}
spec:
  project: shop
  source: {repoURL: "https://git.example.com/org/apps.git", path: web, targetRevision: main}
  destination: {server: "https://kubernetes.default.svc", namespace: shop}
---
${project("1h")}`,
    }));
    cache = new ClusterCache(server.kubeConfig());
  });
  afterAll(async () => {
    await cache.close();
    await server.close();
  });

  it("lists an Application's sync windows from the cached AppProject, and a change of them tells every branch", async () => {
    const objects = new KubeObjects(cache.kube, silentLogger(), {}, cache);
    const names = [{ namespace: "team", name: "web" }];
    const first = await listBranch(objects, names);
    expect(first.targets[0]?.governance?.syncWindows).toEqual([
      { kind: "deny", schedule: "0 18 * * *", duration: "1h", applications: ["web"] },
    ]);
    const reads = () => readsOf(auditLog, "appprojects");
    const before = reads().length;
    for (let i = 0; i < 3; i++) await listBranch(objects, names);
    expect(reads().slice(before)).toEqual([]);
    // Only the windows are kept of a project.
    expect(Object.keys(cache.objects("AppProject")?.get("shop", "argocd")?.spec ?? {})).toEqual([
      "syncWindows",
    ]);

    const told: Array<Set<string> | "all"> = [];
    const off = cache.onChange((keys) => told.push(keys));
    await server.applyYaml(project("2h"));
    await waitFor("the windows' change told", () => told.includes("all"));
    expect((await listBranch(objects, names)).targets[0]?.governance?.syncWindows?.[0]?.duration).toBe("2h");
    off();
  });
});

describe("the worker's cluster cache: an AppProject kind not served, or not listable", () => {
  const BRANCH_TARGETS = 10;
  const LISTINGS = 5;
  const testCrd = (f: string) => fileURLToPath(new URL(`../../test/cluster/crds/${f}`, import.meta.url));
  const defaultProject = `apiVersion: argoproj.io/v1alpha1
kind: AppProject
metadata: {name: default, namespace: argocd}
spec:
  sourceRepos: ["*"]
  destinations: [{server: "*", namespace: "*"}]
  syncWindows: [{kind: deny, schedule: "0 18 * * *", duration: 1h, applications: ["*"]}]`;
  const names = Array.from({ length: BRANCH_TARGETS }, (_, i) => ({ namespace: "team", name: `web${i}` }));
  /** GETs of one AppProject (never the probes, a `list ?limit=1` of the collection). */
  const projectGets = (requests: string[]) => requests.filter((r) => /^GET .*\/appprojects\/[^/]+$/.test(r));

  async function world() {
    const server = await startApiServer({ bookmarkIntervalMs: 100 });
    for (const f of [
      "applygate.dev_gittargets.yaml",
      "applygate.dev_gitproviders.yaml",
      "applygate.dev_argocdclaims.yaml",
    ])
      await server.installCrdFile(crd(f));
    await server.installCrdFile(testCrd("argocd-application.yaml"));
    const core = server.kubeConfig().makeApiClient(k8s.CoreV1Api);
    for (const name of ["team", "argocd"]) await core.createNamespace({ body: { metadata: { name } } });
    const docs = [
      `apiVersion: ${API_VERSION}
kind: GitProvider
metadata: {name: apps, namespace: team}
spec: {url: "https://git.example.com/org/apps.git", type: github, webhookSecretRef: {name: hook}}`,
    ];
    for (const { name } of names)
      docs.push(`apiVersion: ${API_VERSION}
kind: ArgoCDClaim
metadata: {name: ${name}, namespace: team}
spec: {applicationRef: {name: ${name}, namespace: team}}
---
apiVersion: ${API_VERSION}
kind: GitTarget
metadata: {name: ${name}, namespace: team}
spec: {providerRef: {name: apps}, branch: ${name}, path: ${name}, claimRef: {kind: ArgoCDClaim, name: ${name}}}
---
apiVersion: argoproj.io/v1alpha1
kind: Application
metadata: {name: ${name}, namespace: team}
spec:
  project: default
  source: {repoURL: "https://git.example.com/org/apps.git", path: ${name}, targetRevision: ${name}}
  destination: {server: "https://kubernetes.default.svc", namespace: shop}`);
    await server.applyYaml(docs.join("\n---\n"));
    return server;
  }
  /** Every branch listed `LISTINGS` times, each branch on its own as a branch worker does. */
  async function listAll(objects: KubeObjects) {
    const out = [];
    for (let round = 0; round < LISTINGS; round++)
      for (const n of names) out.push(await listBranch(objects, [n]));
    return out;
  }

  it("without the AppProject CRD reads no project per listing, and sees the windows within the look's period once the CRD and project come", async () => {
    const server = await world();
    server.addUser("worker", "worker-token", "all");
    const cache = new ClusterCache(server.kubeConfig("worker"), silentLogger(), { rediscoverMs: 200 });
    try {
      const objects = new KubeObjects(cache.kube, silentLogger(), {}, cache);
      await cache.start();
      const trace = server.traceRequests("worker");
      const t0 = Date.now();
      const listings = await listAll(objects);
      const elapsed = Date.now() - t0;
      // The claim shows nothing of sync windows: Argo CD holds a sync by itself.
      for (const l of listings) expect(l.targets[0]?.governance?.syncWindows).toBeUndefined();
      expect(listings.every((l) => l.targets[0]?.source === "argocd/git.example.com/org/apps")).toBe(true);
      expect(projectGets(trace.requests)).toEqual([]);
      // The look for the kind: one small list per period, whatever the number of listings.
      const looks = trace.requests.filter((r) => r === "GET /apis/argoproj.io/v1alpha1/appprojects");
      expect(looks.length).toBeLessThanOrEqual(Math.ceil(elapsed / 200) + 1);

      const told: Array<Set<string> | "all"> = [];
      const off = cache.onChange((keys) => told.push(keys));
      await server.installCrdFile(testCrd("argocd-appproject.yaml"));
      await server.applyYaml(defaultProject);
      const created = Date.now();
      await waitFor("the project's windows seen", async () => {
        const l = await listBranch(objects, [names[0] as { namespace: string; name: string }]);
        return l.targets[0]?.governance?.syncWindows?.length === 1;
      });
      // Within the period of the look (200 ms here), with room for a loaded machine.
      expect(Date.now() - created).toBeLessThan(5000);
      expect(told).toContain("all");
      off();
      // Cached from then on: listings read no project.
      const before = projectGets(trace.requests).length;
      const after = await listAll(objects);
      expect(after.every((l) => l.targets[0]?.governance?.syncWindows?.[0]?.kind === "deny")).toBe(true);
      expect(projectGets(trace.requests).length).toBe(before);
      trace.stop();
    } finally {
      await cache.close();
      await server.close();
    }
  });

  it("with a role that may get AppProjects but not list them, reads each project once per TTL and warns once, naming the permission", async () => {
    const server = await world();
    await server.installCrdFile(testCrd("argocd-appproject.yaml"));
    await server.applyYaml(defaultProject);
    server.addUser("old-worker", "old-worker-token", [
      { verbs: ["*"], groups: ["", "applygate.dev", "kustomize.toolkit.fluxcd.io"], resources: ["*"] },
      { verbs: ["*"], groups: ["argoproj.io"], resources: ["applications"] },
      { verbs: ["get"], groups: ["argoproj.io"], resources: ["appprojects"] },
    ]);
    let now = 1_000_000;
    const { log, lines } = capturingLogger();
    const cache = new ClusterCache(server.kubeConfig("old-worker"), log, {
      rediscoverMs: 60_000,
      readTtlMs: 30_000,
      now: () => now,
    });
    try {
      const objects = new KubeObjects(cache.kube, silentLogger(), {}, cache);
      await cache.start();
      const trace = server.traceRequests("old-worker");
      const listings = await listAll(objects);
      // The windows are still shown: the project is read, one read for every listing of the TTL.
      for (const l of listings) expect(l.targets[0]?.governance?.syncWindows?.[0]?.kind).toBe("deny");
      expect(projectGets(trace.requests)).toHaveLength(1);
      now += 30_000;
      await listAll(objects);
      expect(projectGets(trace.requests)).toHaveLength(2);
      const warnings = lines
        .map((l) => JSON.parse(l) as { level: number; permission?: string; msg: string })
        .filter((l) => l.permission !== undefined);
      expect(warnings).toHaveLength(1);
      expect(warnings[0]?.level).toBe(40);
      expect(warnings[0]?.permission).toBe("list, watch appprojects.argoproj.io");
      trace.stop();
    } finally {
      await cache.close();
      await server.close();
    }
  });
});
