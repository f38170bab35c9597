/**
 * The watch plane end to end, every component under its own ServiceAccount: a `kubectl edit` of
 * the demo ConfigMap becomes exactly one commit in Git with no intake call, authored by the edit's
 * field manager; the apply that follows (a push to Git that Flux applies) is the applier's own
 * write, judged by the worker as the apply landing, and is not mirrored back.
 */
import * as k8s from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { objectPath } from "../../queue/git/layout.js";
import { branchKeys, writePublishedKey } from "../../queue/keys.js";
import { connectRedis } from "../../queue/redis.js";
import { readAuditLog } from "../cluster/apiserver/index.js";
import { clusterValue, commitsSince, foreignPush, gitValue, until } from "../playground/actors.js";
import { DEMO_APPS, DEMO_NAMESPACE } from "../playground/demo.js";
import { operationsOf, type Scene, startScene, unique } from "./harness.js";

const git = async (args: string[]) => {
  const { execFile } = await import("node:child_process");
  return new Promise<string>((resolve, reject) =>
    execFile("git", args, (err, out) => (err ? reject(err) : resolve(out))),
  );
};

describe("the watch plane", () => {
  let s: Scene;
  beforeAll(async () => {
    s = await startScene({ withMirror: true });
  });
  afterAll(async () => s?.stop());

  const inboxEmpty = async () => {
    const r = connectRedis(s.a.redis.url);
    try {
      return (await r.xlen(branchKeys(s.a.prefix, s.a.demo.key).inbox)) === 0;
    } finally {
      r.disconnect();
    }
  };

  it("mirrors a kubectl edit as one commit with no intake call, and not the apply that follows", async () => {
    const mirror = s.a.mirror!;
    // The start's snapshot changed nothing: the cluster holds what Git holds.
    await until(inboxEmpty, "the start's snapshot settled");
    expect(await commitsSince(s.a, s.start)).toEqual([]);

    // kubectl edit: a read, then an update (PUT) of the whole object under kubectl-edit.
    const core = s.a.kubeConfig.makeApiClient(k8s.CoreV1Api);
    const app = DEMO_APPS.flux;
    const cm = await core.readNamespacedConfigMap({ name: app.name, namespace: app.namespace });
    cm.data = { ...cm.data, greeting: "edited" };
    await core.replaceNamespacedConfigMap({
      name: app.name,
      namespace: app.namespace,
      body: cm,
      fieldManager: "kubectl-edit",
    });

    await until(async () => (await gitValue(s.a, "flux")) === "edited", "the edit to reach Git");
    const [edit, ...more] = await commitsSince(s.a, s.start);
    expect(more).toEqual([]);
    const author = await git([
      "--git-dir",
      `${s.a.git.root}/demo.git`,
      "log",
      "-1",
      "--format=%an <%ae>",
      edit!.sha,
    ]);
    expect(author.trim()).toBe("kubectl-edit <kubectl-edit@cluster.local>");
    // No intake call: the gateway counted none. Its metrics are on a port of their own, as
    // deployed; the receivers' port answers /metrics with the uniform miss.
    expect(s.a.gateway.metricsUrl).toBeDefined();
    expect(s.a.gateway.metricsUrl).not.toBe(s.a.gateway.url);
    expect((await fetch(`${s.a.gateway.url}/metrics`)).status).toBe(404);
    const metrics = await (await fetch(`${s.a.gateway.metricsUrl}/metrics`)).text();
    expect(metrics).toContain("# TYPE applygate_gateway_intake_total counter");
    expect(metrics.split("\n").filter((l) => l.startsWith("applygate_gateway_intake_total{"))).toEqual([]);
    const handed = mirror.sent.filter((w) => w.author.name === "kubectl-edit");
    expect(handed).toHaveLength(1);
    expect(handed[0]).toMatchObject({
      target: { namespace: DEMO_NAMESPACE, name: "flux-app" },
      path: "apps/flux",
    });
    const trailer = await git([
      "--git-dir",
      `${s.a.git.root}/demo.git`,
      "log",
      "-1",
      "--format=%B",
      edit!.sha,
    ]);
    expect(trailer).toContain(handed[0]!.id);

    // A push to Git that Flux applies: kustomize-controller writes the ConfigMap, the mirror sees
    // the applier's own write, and the worker keeps it out of Git (Git already holds its content).
    const sentBefore = mirror.sent.length;
    const pushed = await foreignPush(s.a, "flux", "pushed");
    await until(
      async () => (await clusterValue(s.a, "flux")).greeting === "pushed",
      "Flux to apply the push",
    );
    await until(
      () => mirror.sent.slice(sentBefore).some((w) => w.applierAuthored?.manager === "kustomize-controller"),
      "the mirror to see the applier's write",
    );
    await until(inboxEmpty, "the worker to settle the applier's write");
    // Judged the apply landing: settled without a publication, where an edit (even one that
    // changes nothing) is recorded as published in the tip that carries it.
    const echo = mirror.sent
      .slice(sentBefore)
      .find((w) => w.applierAuthored?.manager === "kustomize-controller")!;
    const r = connectRedis(s.a.redis.url);
    try {
      expect(await r.get(writePublishedKey(s.a.prefix, handed[0]!.id))).toBe(edit!.sha);
      expect(await r.get(writePublishedKey(s.a.prefix, echo.id))).toBeNull();
    } finally {
      r.disconnect();
    }
    const after = await commitsSince(s.a, s.start);
    expect(after.map((c) => c.sha)).toEqual([edit!.sha, pushed]);
    expect(await gitValue(s.a, "flux")).toBe("pushed");
  });

  const gitFile = async (path: string) =>
    git(["--git-dir", `${s.a.git.root}/demo.git`, "show", `${s.a.demo.branch}:${path}`]).catch(
      () => undefined,
    );
  const core = () => s.a.kubeConfig.makeApiClient(k8s.CoreV1Api);
  const ruleStatus = async () =>
    (
      (await s.a.kubeConfig.makeApiClient(k8s.CustomObjectsApi).getNamespacedCustomObject({
        group: "applygate.dev",
        version: "v1alpha1",
        namespace: DEMO_NAMESPACE,
        plural: "watchrules",
        name: "flux-app",
      })) as { status?: { mirrored?: number; refused?: number; excluded?: number } }
    ).status ?? {};

  it("publishes an API create and adopts it: one CatchUp apply stamps it as Flux's", async () => {
    const name = `created-${unique()}`;
    const ns = DEMO_APPS.flux.namespace;
    await core().createNamespacedConfigMap({
      namespace: ns,
      body: { metadata: { name, namespace: ns }, data: { made: "by the API" } },
      fieldManager: "kubectl-create",
    });
    const path = objectPath("apps/flux", { apiVersion: "v1", kind: "ConfigMap", namespace: ns, name });
    await until(async () => (await gitFile(path)) !== undefined, "the created ConfigMap to reach Git");
    expect(await gitFile(path)).toContain("made: by the API");
    await until(
      () => operationsOf(s, "flux").some((o) => o.attempt.targets.some((t) => t.reason === "CatchUp")),
      "an adopt of the created object",
    );
    await until(async () => {
      const cm = await core().readNamespacedConfigMap({ name, namespace: ns });
      return cm.metadata?.labels?.["kustomize.toolkit.fluxcd.io/name"] === "flux-app";
    }, "Flux to stamp the adopted object as its own");
    // The stamp is the applier's write: Git's file holds no owner label.
    await until(inboxEmpty, "the worker to settle the stamp");
    expect(await gitFile(path)).not.toContain("kustomize.toolkit.fluxcd.io");
  });

  it("excludes another applier's object from the folder, counted on the rule", async () => {
    const name = `other-${unique()}`;
    const ns = DEMO_APPS.flux.namespace;
    const excludedBefore = (await ruleStatus()).excluded ?? 0;
    await core().createNamespacedConfigMap({
      namespace: ns,
      body: {
        metadata: {
          name,
          namespace: ns,
          labels: {
            "kustomize.toolkit.fluxcd.io/name": "other",
            "kustomize.toolkit.fluxcd.io/namespace": "flux-system",
          },
        },
        data: { owner: "another Kustomization" },
      },
      fieldManager: "kustomize-controller",
    });
    await until(
      async () => ((await ruleStatus()).excluded ?? 0) > excludedBefore,
      "the exclusion to be counted",
    );
    await until(inboxEmpty, "nothing left in the inbox");
    const path = objectPath("apps/flux", { apiVersion: "v1", kind: "ConfigMap", namespace: ns, name });
    expect(await gitFile(path)).toBeUndefined();
  });

  it("never watches Secrets, even once an administrator lets it: a rule naming them is refused at admission, and the mirror lists none", async () => {
    // The administrator widens what the mirror may watch through the aggregated ClusterRole.
    await s.a.api.applyYaml(
      JSON.stringify({
        apiVersion: "rbac.authorization.k8s.io/v1",
        kind: "ClusterRole",
        metadata: {
          name: "applygate-mirror-watch-secrets",
          labels: { "applygate.dev/aggregate-to-mirror": "true" },
        },
        rules: [{ apiGroups: [""], resources: ["secrets"], verbs: ["get", "list", "watch"] }],
      }),
    );
    const custom = s.a.kubeConfig.makeApiClient(k8s.CustomObjectsApi);
    const refused = await custom
      .patchNamespacedCustomObject(
        {
          group: "applygate.dev",
          version: "v1alpha1",
          namespace: DEMO_NAMESPACE,
          plural: "watchrules",
          name: "flux-app",
          body: {
            spec: {
              kinds: [
                { group: "", version: "v1", kind: "ConfigMap" },
                { group: "", version: "v1", kind: "Secret" },
              ],
            },
          },
        },
        k8s.setHeaderOptions("Content-Type", k8s.PatchStrategy.MergePatch),
      )
      .then(
        () => undefined,
        (e: { code?: number; body?: unknown }) => e,
      );
    expect(refused?.code).toBe(422);
    expect(String(refused?.body)).toContain("Secrets are never mirrored");
    const ns = DEMO_APPS.flux.namespace;
    await core().createNamespacedSecret({
      namespace: ns,
      body: { metadata: { name: `creds-${unique()}`, namespace: ns }, stringData: { password: "hunter2" } },
      fieldManager: "kubectl-create",
    });
    // The mirror goes on mirroring its ConfigMaps, and never lists or watches a Secret.
    const before = s.a.mirror!.sent.length;
    const app = DEMO_APPS.flux;
    await core().patchNamespacedConfigMap(
      { name: app.name, namespace: app.namespace, body: { data: { note: `n-${unique()}` } } },
      k8s.setHeaderOptions("Content-Type", k8s.PatchStrategy.MergePatch),
    );
    await until(() => s.a.mirror!.sent.length > before, "the ConfigMap edit mirrored");
    expect(s.a.mirror!.watchedPaths()).not.toContain("/api/v1/secrets");
    const mirrorUser = s.a.identities.mirror.username;
    const secretReads = readAuditLog(s.a.auditLogPath).filter(
      (e) => e.user.username === mirrorUser && e.objectRef?.resource === "secrets",
    );
    expect(secretReads).toEqual([]);
    const tree = await git([
      "--git-dir",
      `${s.a.git.root}/demo.git`,
      "ls-tree",
      "-r",
      "--name-only",
      s.a.demo.branch,
    ]);
    expect(tree).not.toMatch(/Secret/i);
  });

  it("reports the WatchRules Ready with their counts", async () => {
    const custom = s.a.kubeConfig.makeApiClient(k8s.CustomObjectsApi);
    await until(async () => {
      const r = (await custom.getNamespacedCustomObject({
        group: "applygate.dev",
        version: "v1alpha1",
        namespace: DEMO_NAMESPACE,
        plural: "watchrules",
        name: "flux-app",
      })) as { status?: { mirrored?: number; conditions?: { type: string; status: string }[] } };
      return (
        (r.status?.mirrored ?? 0) >= 2 &&
        r.status?.conditions?.find((c) => c.type === "Ready")?.status === "True"
      );
    }, "the flux-app WatchRule to be Ready and count what it mirrored");
  });
});
