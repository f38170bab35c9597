/**
 * The mirror process under its own ServiceAccount and the RBAC the manifests grant, against the
 * simulated API server (CRD schemas and RBAC enforced) and a private Redis prefix: a kind whose CRD
 * is not installed is reported on the WatchRule and retried; once installed, and once the
 * administrator lets the mirror watch it, the rule is Ready and its objects reach the inbox. One
 * informer per kind however many rules select it; a namespace editor's rule reaches no further
 * than its namespace.
 */
import * as k8s from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { crdFiles } from "../../queue/crds/files.js";
import { Mirror } from "../../sidecar/mirror/mirror.js";
import { type ApiServer, startApiServer } from "../cluster/apiserver/index.js";
import { until } from "../playground/actors.js";
import { deployedIdentities } from "../playground/identities.js";
import { type IsolatedRedis, isolatedRedis } from "../redis/isolated.js";
import { capturingLogger } from "../support/log-lines.js";
import { until as waitUntil } from "../support/wait.js";

let api: ApiServer;
let redis: IsolatedRedis;
let mirror: Mirror;
let custom: k8s.CustomObjectsApi;
const logged = capturingLogger({ name: "mirror" });

const WIDGET_CRD = {
  apiVersion: "apiextensions.k8s.io/v1",
  kind: "CustomResourceDefinition",
  metadata: { name: "widgets.example.com" },
  spec: {
    group: "example.com",
    names: { kind: "Widget", plural: "widgets", singular: "widget", listKind: "WidgetList" },
    scope: "Namespaced",
    versions: [
      {
        name: "v1",
        served: true,
        storage: true,
        schema: { openAPIV3Schema: { type: "object", "x-kubernetes-preserve-unknown-fields": true } },
      },
    ],
  },
};

const yaml = (...objs: object[]) => objs.map((o) => JSON.stringify(o)).join("\n---\n");

beforeAll(async () => {
  api = await startApiServer({ bookmarkIntervalMs: 200 });
  for (const f of crdFiles()) await api.installCrdFile(f);
  const deployed = deployedIdentities();
  await api.applyYaml(
    yaml(
      ...["applygate-system", "team", "other"].map((name) => ({
        apiVersion: "v1",
        kind: "Namespace",
        metadata: { name },
      })),
    ),
  );
  await api.applyYaml(yaml(...deployed.rbac));
  const sa = deployed.serviceAccounts.mirror;
  const kc = api.kubeConfig(api.addServiceAccount(sa.namespace, sa.name));
  await api.applyYaml(
    yaml(
      {
        apiVersion: "applygate.dev/v1alpha1",
        kind: "GitProvider",
        metadata: { name: "p", namespace: "team" },
        spec: {
          url: "https://git.example/team/site.git",
          type: "github",
          webhookSecretRef: { name: "hook" },
        },
      },
      {
        apiVersion: "applygate.dev/v1alpha1",
        kind: "GitTarget",
        metadata: { name: "site", namespace: "team" },
        spec: { providerRef: { name: "p" }, branch: "main", path: "site" },
      },
      {
        apiVersion: "applygate.dev/v1alpha1",
        kind: "WatchRule",
        metadata: { name: "widgets", namespace: "team" },
        spec: {
          targetRef: { name: "site" },
          kinds: [{ group: "example.com", version: "v1", kind: "Widget" }],
        },
      },
      {
        apiVersion: "applygate.dev/v1alpha1",
        kind: "WatchRule",
        metadata: { name: "cms", namespace: "team" },
        spec: { targetRef: { name: "site" }, kinds: [{ group: "", version: "v1", resource: "configmaps" }] },
      },
      {
        apiVersion: "applygate.dev/v1alpha1",
        kind: "WatchRule",
        metadata: { name: "cms-too", namespace: "team" },
        spec: {
          targetRef: { name: "site" },
          kinds: [{ group: "", version: "v1", kind: "ConfigMap" }],
          namespaces: ["other"],
        },
      },
    ),
  );
  redis = await isolatedRedis("mirror");
  mirror = new Mirror({
    kubeConfig: kc,
    redisUrl: redis.url,
    redisPrefix: redis.prefix,
    log: logged.log,
    resolveIntervalMs: 100,
    statusIntervalMs: 50,
  });
  await mirror.start();
  custom = api.kubeConfig().makeApiClient(k8s.CustomObjectsApi);
});

afterAll(async () => {
  await mirror?.stop();
  await redis?.cleanup();
  await api?.close();
});

type Status = {
  conditions?: { type: string; status: string; reason: string; message: string }[];
  unresolvedKinds?: string[];
  forbiddenKinds?: string[];
  outOfScope?: string[];
  mirrored?: number;
  refused?: number;
  lastError?: string;
};
const status = async (name: string) =>
  (
    (await custom.getNamespacedCustomObject({
      group: "applygate.dev",
      version: "v1alpha1",
      namespace: "team",
      plural: "watchrules",
      name,
    })) as { status?: Status }
  ).status ?? {};
const cond = (s: Status, type: string) => s.conditions?.find((c) => c.type === type);

describe("the mirror as deployed", () => {
  it("starts without a reconcile failing on caches not built yet", () => {
    // Informers report their initial objects while they sync, before the caches exist.
    expect(logged.lines.filter((l) => l.includes("reconciling WatchRules failed"))).toEqual([]);
  });

  it("reports a kind not served yet, retries, and watches it once its CRD is installed and granted", async () => {
    await until(
      async () => cond(await status("widgets"), "Ready")?.reason === "KindsNotResolved",
      "unresolved reported",
    );
    const s = await status("widgets");
    expect(s.unresolvedKinds).toEqual(["example.com/v1 Widget"]);
    expect(cond(s, "KindsResolved")).toMatchObject({ status: "False", reason: "KindNotServed" });
    await api.applyYaml(
      yaml(WIDGET_CRD, {
        apiVersion: "rbac.authorization.k8s.io/v1",
        kind: "ClusterRole",
        metadata: {
          name: "applygate-mirror-watch-widgets",
          labels: { "applygate.dev/aggregate-to-mirror": "true" },
        },
        rules: [{ apiGroups: ["example.com"], resources: ["widgets"], verbs: ["get", "list", "watch"] }],
      }),
    );
    await until(
      async () => cond(await status("widgets"), "Ready")?.status === "True",
      "the rule Ready once served",
    );
    await api.applyYaml(
      yaml({
        apiVersion: "example.com/v1",
        kind: "Widget",
        metadata: { name: "w", namespace: "team" },
        spec: { size: 3 },
      }),
    );
    await until(
      () => mirror.sent.some((w) => w.changes[0]?.op === "upsert" && w.changes[0].object.kind === "Widget"),
      "the Widget handed to the inbox",
    );
    const w = mirror.sent.find(
      (x) => x.changes[0]?.op === "upsert" && x.changes[0].object.kind === "Widget",
    )!;
    expect(w).toMatchObject({
      target: { namespace: "team", name: "site" },
      path: "site",
      branchKey: "team/p:git.example/team/site@main",
    });
    expect(
      await redis.client.xlen(`${redis.prefix}:branch:team/p:git.example/team/site@main:inbox`),
    ).toBeGreaterThan(0);
  });

  it("one informer per kind for every rule that selects it; another namespace only with a ScopeGrant", async () => {
    const core = api.kubeConfig().makeApiClient(k8s.CoreV1Api);
    await core.createNamespacedConfigMap({
      namespace: "team",
      body: { metadata: { name: "mine" }, data: { a: "1" } },
    });
    await core.createNamespacedConfigMap({
      namespace: "other",
      body: { metadata: { name: "theirs", labels: { tier: "secret-project" } }, data: { a: "1" } },
    });
    await until(
      () =>
        mirror.sent.some(
          (w) => w.changes[0]?.op === "upsert" && w.changes[0].object.metadata.name === "mine",
        ),
      "own namespace mirrored",
    );
    expect(mirror.watchedPaths().filter((p) => p.endsWith("/configmaps"))).toEqual(["/api/v1/configmaps"]);
    // Two rules of one GitTarget select "mine": one write.
    expect(
      mirror.sent.filter(
        (w) => w.changes[0]?.op === "upsert" && w.changes[0].object.metadata.name === "mine",
      ),
    ).toHaveLength(1);
    // The rule's status says, by namespace alone, that it may not hold "other"; it never names an
    // object there nor counts one, so it tells nothing of what "other" holds or how it is labelled.
    await until(
      async () => ((await status("cms-too")).outOfScope ?? []).some((l) => l.includes("namespace other")),
      "the other namespace reported out of scope",
    );
    await mirror.idle();
    const told = await status("cms-too");
    expect(told.refused ?? 0).toBe(0);
    expect(JSON.stringify(told)).not.toContain("theirs");
    expect(JSON.stringify(told)).not.toContain("secret-project");
    expect(
      mirror.sent.some(
        (w) => w.changes[0]?.op === "upsert" && w.changes[0].object.metadata.name === "theirs",
      ),
    ).toBe(false);
    // A cluster administrator's ScopeGrant lets it.
    await api.applyYaml(
      yaml({
        apiVersion: "applygate.dev/v1alpha1",
        kind: "ScopeGrant",
        metadata: { name: "g" },
        spec: { targets: [{ namespace: "team", name: "site" }], namespaces: ["other"] },
      }),
    );
    await until(
      () =>
        mirror.sent.some(
          (w) => w.changes[0]?.op === "upsert" && w.changes[0].object.metadata.name === "theirs",
        ),
      "the granted namespace mirrored",
    );
    await until(async () => ((await status("cms-too")).outOfScope ?? []).length === 0, "in scope now");
  });

  it("names each edit's change: the object as the watch last saw it is the write's base", async () => {
    const core = api.kubeConfig().makeApiClient(k8s.CoreV1Api);
    const upserts = (name: string) =>
      mirror.sent.flatMap((w) =>
        w.changes.flatMap((c) => (c.op === "upsert" && c.object.metadata.name === name ? [c] : [])),
      );
    await core.createNamespacedConfigMap({
      namespace: "team",
      body: { metadata: { name: "based" }, data: { greeting: "p1" } },
    });
    await until(() => upserts("based").length === 1, "the create mirrored");
    // A create has nothing before it: the object is written whole.
    expect(upserts("based")[0]?.base).toBeUndefined();
    await core.patchNamespacedConfigMap(
      { name: "based", namespace: "team", body: { data: { note: "n3" } } },
      k8s.setHeaderOptions("Content-Type", k8s.PatchStrategy.MergePatch),
    );
    await until(() => upserts("based").length === 2, "the edit mirrored");
    const edit = upserts("based")[1];
    if (!edit) throw new Error("no edit mirrored");
    expect((edit.base as { data?: unknown } | undefined)?.data).toEqual({ greeting: "p1" });
    expect((edit.object as { data?: unknown }).data).toEqual({ greeting: "p1", note: "n3" });
  });
});

describe("a rule naming a kind the mirror may not watch", () => {
  const watchRuleObject = (name: string, target: string, kinds: object[]) => ({
    apiVersion: "applygate.dev/v1alpha1",
    kind: "WatchRule",
    metadata: { name, namespace: "team" },
    spec: { targetRef: { name: target }, kinds },
  });
  const CONFIGMAPS = { group: "", version: "v1", kind: "ConfigMap" };

  it("is KindForbidden on that rule alone: a rule made while it exists gets its status and snapshot, and so does one made after it is deleted", async () => {
    // Deployments: not aggregated to the mirror's role, so its list is refused (403).
    await api.applyYaml(
      yaml(
        watchRuleObject("deploys", "site", [
          { group: "apps", version: "v1", kind: "Deployment" },
          CONFIGMAPS,
        ]),
      ),
    );
    await until(
      async () => cond(await status("deploys"), "Ready")?.reason === "KindForbidden",
      "the forbidden kind reported on its rule",
    );
    const forbidden = await status("deploys");
    expect(forbidden.forbiddenKinds).toEqual([
      expect.stringContaining("apps/v1 Deployment: the mirror may not list deployments.apps (403)"),
    ]);
    expect(cond(forbidden, "KindsResolved")).toMatchObject({ status: "False", reason: "KindForbidden" });
    // Its watch is not kept running: the mirror stays ready.
    expect((await mirror.checks()).unsyncedWatches.filter((p) => p.includes("deployments"))).toEqual([]);

    // A rule of another GitTarget, made while it exists, is reconciled: status and snapshot.
    const core = api.kubeConfig().makeApiClient(k8s.CoreV1Api);
    await core.createNamespacedConfigMap({ namespace: "team", body: { metadata: { name: "for-late" } } });
    await api.applyYaml(
      yaml(
        {
          apiVersion: "applygate.dev/v1alpha1",
          kind: "GitTarget",
          metadata: { name: "late", namespace: "team" },
          spec: { providerRef: { name: "p" }, branch: "main", path: "late" },
        },
        watchRuleObject("late", "late", [CONFIGMAPS]),
      ),
    );
    await until(async () => cond(await status("late"), "Ready")?.status === "True", "the later rule Ready");
    await until(
      () =>
        mirror.sent.some(
          (w) =>
            w.target.name === "late" &&
            w.changes[0]?.op === "upsert" &&
            w.changes[0].object.metadata.name === "for-late",
        ),
      "the later rule's snapshot",
    );

    // Deleted, the forbidden rule leaves the others reconciling.
    await custom.deleteNamespacedCustomObject({
      group: "applygate.dev",
      version: "v1alpha1",
      namespace: "team",
      plural: "watchrules",
      name: "deploys",
    });
    await api.applyYaml(
      yaml(
        {
          apiVersion: "applygate.dev/v1alpha1",
          kind: "GitTarget",
          metadata: { name: "later", namespace: "team" },
          spec: { providerRef: { name: "p" }, branch: "main", path: "later" },
        },
        watchRuleObject("later", "later", [CONFIGMAPS]),
      ),
    );
    await until(
      async () => cond(await status("later"), "Ready")?.status === "True",
      "a rule made after it Ready",
    );
    await until(
      () => mirror.sent.some((w) => w.target.name === "later" && w.changes[0]?.op === "upsert"),
      "its snapshot",
    );
  });

  it("a kind whose first list does not land is waited for a bounded time: a rule made after it is reconciled meanwhile", async () => {
    await api.applyYaml(
      yaml(
        {
          ...WIDGET_CRD,
          metadata: { name: "gadgets.example.com" },
          spec: {
            ...WIDGET_CRD.spec,
            names: { kind: "Gadget", plural: "gadgets", singular: "gadget", listKind: "GadgetList" },
          },
        },
        {
          apiVersion: "rbac.authorization.k8s.io/v1",
          kind: "ClusterRole",
          metadata: {
            name: "applygate-mirror-watch-gadgets",
            labels: { "applygate.dev/aggregate-to-mirror": "true" },
          },
          rules: [{ apiGroups: ["example.com"], resources: ["gadgets"], verbs: ["get", "list", "watch"] }],
        },
      ),
    );
    // The Gadgets' list hangs for a minute, far past the mirror's bound on a first list (5 s).
    api.faults.latency(60_000, { method: "GET", pathPrefix: "/apis/example.com/v1/gadgets" });
    try {
      await api.applyYaml(
        yaml(watchRuleObject("gadgets", "site", [{ group: "example.com", version: "v1", kind: "Gadget" }])),
      );
      await api.applyYaml(
        yaml(
          {
            apiVersion: "applygate.dev/v1alpha1",
            kind: "GitTarget",
            metadata: { name: "quick", namespace: "team" },
            spec: { providerRef: { name: "p" }, branch: "main", path: "quick" },
          },
          watchRuleObject("quick", "quick", [CONFIGMAPS]),
        ),
      );
      await waitUntil(
        async () => cond(await status("quick"), "Ready")?.status === "True",
        "the later rule Ready",
        {
          timeoutMs: 25_000,
          everyMs: 50,
          retryErrors: true,
        },
      );
      const waiting = await status("gadgets");
      expect(cond(waiting, "Ready")?.reason).toBe("KindsNotResolved");
      expect(waiting.unresolvedKinds).toEqual(["example.com/v1 Gadget"]);
    } finally {
      api.faults.latency(0);
    }
  });
});
