// Real Flux (test/real/flux.ts) on the real control plane: installed as Flux installs itself, it
// applies a push to our Git server, and suspend and requestedAt behave as seed 000 says.
import { readFile } from "node:fs/promises";
import { CoreV1Api, CustomObjectsApi, PatchStrategy, setHeaderOptions } from "@kubernetes/client-node";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { GitPeer } from "../git/peer.js";
import { type GitServer, startGitServer } from "../git/server.js";
import { processAlive } from "../support/machine-lock.js";
import { until } from "../support/wait.js";
import { CONTROL_PLANE, FLUX_BINARIES, findRealBinaries } from "./binaries.js";
import { type RealCluster, startRealCluster } from "./cluster.js";
import { createGitSource, GIT_REPOSITORIES, KUSTOMIZATIONS, type RealFlux, startRealFlux } from "./flux.js";
import { readFluxLog } from "./flux-log.js";

const bins = findRealBinaries([...CONTROL_PLANE, ...FLUX_BINARIES]);
if (!bins.built) console.warn(`\n!!! SKIPPED test/real/flux.real.test.ts: ${bins.message}\n`);

const MERGE = setHeaderOptions("Content-Type", PatchStrategy.MergePatch);
const REQUESTED_AT = "reconcile.fluxcd.io/requestedAt";
const patience = { timeoutMs: 60_000, everyMs: 100 };
const configMap = (name: string, v: string) =>
  `apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ${name}\ndata:\n  v: "${v}"\n`;

interface AuditEvent {
  verb: string;
  user: { username: string };
  objectRef?: { resource?: string; subresource?: string; namespace?: string };
  requestURI: string;
  responseStatus?: { code?: number; details?: { causes?: { reason?: string }[] } };
}

describe.skipIf(!bins.built)("real Flux on the real control plane", () => {
  let cluster: RealCluster;
  let flux: RealFlux;
  let git: GitServer;
  let custom: CustomObjectsApi;
  let core: CoreV1Api;
  let made: string[] = [];
  let seq = 0;

  beforeAll(async () => {
    cluster = await startRealCluster();
    git = await startGitServer();
    flux = await startRealFlux(cluster);
    custom = cluster.kubeConfig().makeApiClient(CustomObjectsApi);
    core = cluster.kubeConfig().makeApiClient(CoreV1Api);
  }, 240_000);
  afterEach(async () => {
    // Each test has namespaces of its own; they go in the background.
    await Promise.all(made.map((name) => core.deleteNamespace({ name }).catch(() => undefined)));
    made = [];
  });
  afterAll(async () => {
    await flux?.stop();
    await cluster?.stop();
    await git?.close();
  }, 60_000);

  /** A namespace, a repository holding apps/a.yaml, and a GitRepository + Kustomization over it. */
  async function source(opts: { suspend?: boolean } = {}) {
    const namespace = `flux-${++seq}`;
    await core.createNamespace({ body: { metadata: { name: namespace } } });
    made.push(namespace);
    const url = await git.createRepo(namespace, { "apps/a.yaml": configMap("a", "1") });
    await createGitSource(cluster.kubeConfig(), {
      namespace,
      url,
      path: "./apps",
      targetNamespace: namespace,
      suspend: opts.suspend,
    });
    return { namespace, url, peer: await GitPeer.clone(url) };
  }
  const get = async (kind: typeof KUSTOMIZATIONS, namespace: string) =>
    (await custom.getNamespacedCustomObject({ ...kind, namespace, name: "apps" })) as any;
  const stamp = async (kind: typeof KUSTOMIZATIONS, namespace: string) => {
    const token = `${Date.now()}-${++seq}`;
    await custom.patchNamespacedCustomObject(
      { ...kind, namespace, name: "apps", body: { metadata: { annotations: { [REQUESTED_AT]: token } } } },
      MERGE,
    );
    return token;
  };
  const value = async (namespace: string) =>
    (await core.readNamespacedConfigMap({ namespace, name: "a" })).data?.v;
  /** Asks source-controller to fetch now (the interval is 100h) and waits for the artifact of `sha`. */
  const fetched = async (namespace: string, sha: string) => {
    const token = await stamp(GIT_REPOSITORIES, namespace);
    await until(
      async () => {
        const src = await get(GIT_REPOSITORIES, namespace);
        return (
          src.status?.lastHandledReconcileAt === token &&
          src.status?.artifact?.revision === `main@sha1:${sha}`
        );
      },
      `artifact of ${sha}`,
      patience,
    );
  };

  it("applies a push to the Git server: the ConfigMap, and main@sha1:<commit> as lastAppliedRevision", async () => {
    const { namespace, peer } = await source();
    const first = await git.tip(namespace);
    await until(
      async () => (await get(KUSTOMIZATIONS, namespace)).status?.lastAppliedRevision === `main@sha1:${first}`,
      "first commit applied",
      patience,
    );
    expect(await value(namespace)).toBe("1");

    const sha = await peer.commitAndPush("apps/a.yaml", configMap("a", "2"), "two");
    await fetched(namespace, sha);
    const ks = await until(
      async () => {
        const o = await get(KUSTOMIZATIONS, namespace);
        return o.status?.lastAppliedRevision === `main@sha1:${sha}` && o;
      },
      "the push applied",
      patience,
    );
    expect(ks.status.lastAppliedRevision).toMatch(/^main@sha1:[0-9a-f]{40}$/);
    expect(ks.status.conditions.find((c: any) => c.type === "Ready")).toMatchObject({
      status: "True",
      reason: "ReconciliationSucceeded",
      message: `Applied revision: main@sha1:${sha}`,
    });
    expect(await value(namespace)).toBe("2");
    const cm = await core.readNamespacedConfigMap({ namespace, name: "a" });
    expect(cm.metadata?.managedFields?.map((f) => [f.manager, f.operation])).toEqual([
      ["kustomize-controller", "Apply"],
    ]);
  });

  it("suspended: a new artifact is not applied, a requestedAt is handled without an apply, a resume applies the latest", async () => {
    const { namespace, peer } = await source();
    const first = `main@sha1:${await git.tip(namespace)}`;
    const ref = { namespace, name: "apps" };
    await until(
      async () => (await get(KUSTOMIZATIONS, namespace)).status?.lastAppliedRevision === first,
      "first commit applied",
      patience,
    );
    await custom.patchNamespacedCustomObject(
      { ...KUSTOMIZATIONS, namespace, name: "apps", body: { spec: { suspend: true } } },
      MERGE,
    );
    const sha = await peer.commitAndPush("apps/a.yaml", configMap("a", "2"), "two");
    await fetched(namespace, sha);
    const token = await stamp(KUSTOMIZATIONS, namespace);
    const handled = await until(
      async () => {
        const o = await get(KUSTOMIZATIONS, namespace);
        return o.status?.lastHandledReconcileAt === token && o;
      },
      "the request handled while suspended",
      patience,
    );
    expect(handled.status.lastAppliedRevision).toBe(first);
    expect(await value(namespace)).toBe("1");
    expect(readFluxLog(flux.logPaths).appliedRevisions(ref)).toEqual([first]);

    await custom.patchNamespacedCustomObject(
      { ...KUSTOMIZATIONS, namespace, name: "apps", body: { spec: { suspend: false } } },
      MERGE,
    );
    await until(
      async () => (await get(KUSTOMIZATIONS, namespace)).status?.lastAppliedRevision === `main@sha1:${sha}`,
      "the resume applied the artifact's commit",
      patience,
    );
    expect(await value(namespace)).toBe("2");
    expect(readFluxLog(flux.logPaths).appliedRevisions(ref)).toEqual([first, `main@sha1:${sha}`]);
  });

  it("each controller works under its own ServiceAccount, refused nothing", async () => {
    const events = (await readFile(cluster.auditLogPath, "utf8"))
      .split("\n")
      .filter(Boolean)
      .map((line) => JSON.parse(line) as AuditEvent);
    for (const controller of ["source-controller", "kustomize-controller"]) {
      const mine = events.filter(
        (e) => e.user.username === `system:serviceaccount:flux-system:${controller}`,
      );
      expect(mine.length, controller).toBeGreaterThan(0);
      const refused = mine.filter(
        (e) =>
          e.responseStatus?.code === 403 &&
          // An Event for an object of a test namespace already being removed: not a matter of RBAC.
          !e.responseStatus.details?.causes?.some((c) => c.reason === "NamespaceTerminating") &&
          // fluxcd/cli-utils asks whether API priority and fairness is on with HEAD /livez/ping and
          // reads the answer's headers; no Flux install grants that verb, so every cluster says 403.
          !(e.verb === "head" && e.requestURI === "/livez/ping"),
      );
      expect(
        refused.map((e) => `${e.verb} ${e.requestURI}`),
        controller,
      ).toEqual([]);
    }
    // Nothing of Flux ran as the admin: the harness's own installs aside, every write is theirs.
    const fluxWritesAsAdmin = events.filter(
      (e) =>
        e.user.username === "admin" &&
        ["patch", "update"].includes(e.verb) &&
        e.objectRef?.subresource === "status",
    );
    expect(fluxWritesAsAdmin).toEqual([]);
  });

  it("stops cleanly: both controllers end", async () => {
    expect(flux.processes.map((p) => p.name)).toEqual(["source-controller", "kustomize-controller"]);
    expect(flux.processes.every((p) => processAlive(p.pid))).toBe(true);
    await flux.stop();
    expect(flux.processes.filter((p) => processAlive(p.pid))).toEqual([]);
  });
});
