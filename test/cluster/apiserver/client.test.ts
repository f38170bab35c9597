/** The real @kubernetes/client-node against the simulated API server. */
import { fileURLToPath } from "node:url";
import * as k8s from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { untilWith } from "../../support/wait.js";
import { type ApiServer, startApiServer } from "./index.js";

const crd = (file: string) => fileURLToPath(new URL(`../crds/${file}`, import.meta.url));

const until = untilWith({ timeoutMs: 5000, everyMs: 10 });

function parseBody(e: unknown): any {
  const body = (e as { body?: unknown }).body;
  return typeof body === "string" ? JSON.parse(body) : body;
}

const ks = (spec: Record<string, unknown>, name = "apps"): k8s.KubernetesObject & { spec: object } => ({
  apiVersion: "kustomize.toolkit.fluxcd.io/v1",
  kind: "Kustomization",
  metadata: { name, namespace: "flux-system" },
  spec: { interval: "10m", prune: true, sourceRef: { kind: "GitRepository", name: "repo" }, ...spec },
});

describe("simulated API server with @kubernetes/client-node", () => {
  let server: ApiServer;
  let kc: k8s.KubeConfig;
  let core: k8s.CoreV1Api;
  let custom: k8s.CustomObjectsApi;
  let objects: k8s.KubernetesObjectApi;

  beforeAll(async () => {
    server = await startApiServer({ bookmarkIntervalMs: 50 });
    for (const f of [
      "flux-gitrepository.yaml",
      "flux-kustomization.yaml",
      "argocd-application.yaml",
      "argocd-appproject.yaml",
      "argocd-applicationset.yaml",
    ])
      await server.installCrdFile(crd(f));
    kc = server.kubeConfig();
    core = kc.makeApiClient(k8s.CoreV1Api);
    custom = kc.makeApiClient(k8s.CustomObjectsApi);
    objects = k8s.KubernetesObjectApi.makeApiClient(kc);
    await core.createNamespace({ body: { metadata: { name: "flux-system" } } });
    await core.createNamespace({ body: { metadata: { name: "argocd" } } });
  });
  afterAll(async () => server.close());

  it("creates, reads, updates with a resourceVersion precondition, and deletes a ConfigMap", async () => {
    const created = await core.createNamespacedConfigMap({
      namespace: "default",
      body: { metadata: { generateName: "cfg-", labels: { app: "web" } }, data: { a: "1" } },
    });
    const name = created.metadata!.name!;
    expect(name).toMatch(/^cfg-[a-z0-9]{5}$/);
    expect(created.metadata!.uid).toMatch(/^[0-9a-f-]{36}$/);
    expect(Number(created.metadata!.resourceVersion)).toBeGreaterThan(0);
    expect(created.metadata!.managedFields?.[0]).toMatchObject({
      operation: "Update",
      fieldsType: "FieldsV1",
    });

    const updated = await core.replaceNamespacedConfigMap({
      namespace: "default",
      name,
      body: { ...created, data: { a: "2" } },
    });
    expect(Number(updated.metadata!.resourceVersion)).toBeGreaterThan(
      Number(created.metadata!.resourceVersion),
    );

    const stale = core.replaceNamespacedConfigMap({
      namespace: "default",
      name,
      body: { ...created, data: { a: "3" } },
    });
    const err = await stale.catch((e) => e);
    expect(err.code).toBe(409);
    expect(parseBody(err)).toMatchObject({ kind: "Status", reason: "Conflict", code: 409 });

    const listed = await core.listNamespacedConfigMap({ namespace: "default", labelSelector: "app=web" });
    expect(listed.items.map((i) => i.metadata!.name)).toEqual([name]);
    const byField = await core.listConfigMapForAllNamespaces({ fieldSelector: `metadata.name=${name}` });
    expect(byField.items).toHaveLength(1);

    await core.deleteNamespacedConfigMap({ namespace: "default", name });
    const gone = await core.readNamespacedConfigMap({ namespace: "default", name }).catch((e) => e);
    expect(gone.code).toBe(404);
  });

  it("folds a Secret's stringData into data on create, update and merge patch, as the real API server does", async () => {
    await core.createNamespacedSecret({
      namespace: "default",
      body: { metadata: { name: "folded" }, stringData: { a: "1", b: "2" } },
    });
    const patched = await core.patchNamespacedSecret(
      { namespace: "default", name: "folded", body: { stringData: { a: "3" } } },
      k8s.setHeaderOptions("Content-Type", k8s.PatchStrategy.MergePatch),
    );
    const b64 = (v: string) => Buffer.from(v).toString("base64");
    expect(patched.data).toEqual({ a: b64("3"), b: b64("2") });
    expect(patched.stringData).toBeUndefined();
    const read = await core.readNamespacedSecret({ namespace: "default", name: "folded" });
    expect(read.data).toEqual({ a: b64("3"), b: b64("2") });
    expect(read.metadata?.resourceVersion).toBe(patched.metadata?.resourceVersion);
    const updated = await core.replaceNamespacedSecret({
      namespace: "default",
      name: "folded",
      body: {
        metadata: { name: "folded", resourceVersion: read.metadata?.resourceVersion },
        data: read.data,
        stringData: { c: "4" },
      },
    });
    expect(updated.data).toEqual({ a: b64("3"), b: b64("2"), c: b64("4") });
  });

  it("pages a list with limit and continue", async () => {
    for (let i = 0; i < 5; i++)
      await core.createNamespacedConfigMap({
        namespace: "argocd",
        body: { metadata: { name: `page-${i}` } },
      });
    const first = await core.listNamespacedConfigMap({ namespace: "argocd", limit: 2 });
    expect(first.items.map((i) => i.metadata!.name)).toEqual(["page-0", "page-1"]);
    expect(first.metadata!._continue).toBeTruthy();
    const names: string[] = first.items.map((i) => i.metadata!.name!);
    let cont = first.metadata!._continue;
    while (cont) {
      const page = await core.listNamespacedConfigMap({ namespace: "argocd", limit: 2, _continue: cont });
      names.push(...page.items.map((i) => i.metadata!.name!));
      cont = page.metadata!._continue;
    }
    expect(names).toEqual(["page-0", "page-1", "page-2", "page-3", "page-4"]);
  });

  it("serves an installed CRD: server-side apply, merge patch, generation, status subresource", async () => {
    const applied = await objects.patch(
      ks({ suspend: true }),
      undefined,
      undefined,
      "applygate",
      true,
      k8s.PatchStrategy.ServerSideApply,
    );
    expect(applied.metadata!.generation).toBe(1);
    expect(applied.metadata!.managedFields).toHaveLength(1);
    expect(applied.metadata!.managedFields![0]).toMatchObject({ manager: "applygate", operation: "Apply" });

    // status through the main resource is ignored when the CRD has a status subresource
    const viaMain = (await custom.patchNamespacedCustomObject(
      {
        group: "kustomize.toolkit.fluxcd.io",
        version: "v1",
        namespace: "flux-system",
        plural: "kustomizations",
        name: "apps",
        body: { status: { observedGeneration: 9 } },
      },
      k8s.setHeaderOptions("Content-Type", k8s.PatchStrategy.MergePatch),
    )) as any;
    expect(viaMain.status).toBeUndefined();

    const withStatus = (await custom.patchNamespacedCustomObjectStatus(
      {
        group: "kustomize.toolkit.fluxcd.io",
        version: "v1",
        namespace: "flux-system",
        plural: "kustomizations",
        name: "apps",
        body: { status: { observedGeneration: 1, conditions: [{ type: "Ready", status: "True" }] } },
        fieldManager: "gotk-kustomize-controller",
      },
      k8s.setHeaderOptions("Content-Type", k8s.PatchStrategy.MergePatch),
    )) as any;
    expect(withStatus.status.observedGeneration).toBe(1);
    expect(withStatus.metadata.generation).toBe(1); // status does not move generation
    const statusOwner = withStatus.metadata.managedFields.find(
      (m: any) => m.manager === "gotk-kustomize-controller",
    );
    expect(statusOwner).toMatchObject({ operation: "Update", subresource: "status" });

    const resumed = (await custom.patchNamespacedCustomObject(
      {
        group: "kustomize.toolkit.fluxcd.io",
        version: "v1",
        namespace: "flux-system",
        plural: "kustomizations",
        name: "apps",
        body: { spec: { suspend: false } },
        fieldManager: "flux",
      },
      k8s.setHeaderOptions("Content-Type", k8s.PatchStrategy.MergePatch),
    )) as any;
    expect(resumed.metadata.generation).toBe(2);
    expect(resumed.status.observedGeneration).toBe(1);
  });

  it("moves generation on status writes when the CRD has no status subresource (Argo CD Application)", async () => {
    const app: k8s.KubernetesObject & { spec: object } = {
      apiVersion: "argoproj.io/v1alpha1",
      kind: "Application",
      metadata: { name: "guestbook", namespace: "argocd" },
      spec: {
        project: "default",
        destination: { server: "https://kubernetes.default.svc", namespace: "guestbook" },
        source: { repoURL: "http://git/repo", path: "guestbook" },
      },
    };
    const created = await objects.create(app);
    expect(created.metadata!.generation).toBe(1);
    const patched = (await custom.patchNamespacedCustomObject(
      {
        group: "argoproj.io",
        version: "v1alpha1",
        namespace: "argocd",
        plural: "applications",
        name: "guestbook",
        body: { status: { sync: { status: "Synced" } } },
      },
      k8s.setHeaderOptions("Content-Type", k8s.PatchStrategy.MergePatch),
    )) as any;
    expect(patched.status.sync.status).toBe("Synced");
    expect(patched.metadata.generation).toBe(2);
    const noStatus = await custom
      .getNamespacedCustomObjectStatus({
        group: "argoproj.io",
        version: "v1alpha1",
        namespace: "argocd",
        plural: "applications",
        name: "guestbook",
      })
      .catch((e) => e);
    expect(noStatus.code).toBe(404);
  });

  it("refuses a field the CRD does not declare under fieldValidation=Strict with a dry run, and prunes it otherwise", async () => {
    const app = {
      apiVersion: "argoproj.io/v1alpha1",
      kind: "Application",
      metadata: { name: "probe", namespace: "argocd" },
      spec: {
        project: "default",
        destination: { server: "https://kubernetes.default.svc" },
        source: { repoURL: "http://git/repo" },
        syncPolicy: { automated: { enabled: false }, bogus: true },
      },
    };
    const path = "/apis/argoproj.io/v1alpha1/namespaces/argocd/applications/probe";
    const auth = { Authorization: `Bearer ${server.token()}` };
    const strict = await fetch(`${server.url}${path}?fieldManager=probe&dryRun=All&fieldValidation=Strict`, {
      method: "PATCH",
      headers: { "Content-Type": "application/apply-patch+yaml", ...auth },
      body: JSON.stringify(app),
    });
    expect(strict.status).toBe(400);
    expect(await strict.text()).toContain('unknown field \\"spec.syncPolicy.bogus\\"');
    // dry run stored nothing
    expect((await fetch(`${server.url}${path}`, { headers: auth })).status).toBe(404);

    const lax = await fetch(`${server.url}${path}?fieldManager=probe`, {
      method: "PATCH",
      headers: { "Content-Type": "application/apply-patch+yaml", ...auth },
      body: JSON.stringify(app),
    });
    expect(lax.status).toBe(201);
    expect(lax.headers.get("warning")).toContain("spec.syncPolicy.bogus");
    const stored = (await lax.json()) as any;
    expect(stored.spec.syncPolicy).toEqual({ automated: { enabled: false } });
  });

  it("tells Argo CD before 3.1 apart: its schema has no syncPolicy.automated.enabled", async () => {
    const old = await startApiServer();
    try {
      await old.installCrdFile(crd("argocd-application-pre-3.1.yaml"));
      const body = {
        apiVersion: "argoproj.io/v1alpha1",
        kind: "Application",
        metadata: { name: "probe", namespace: "default" },
        spec: {
          project: "default",
          destination: {},
          source: { repoURL: "x" },
          syncPolicy: { automated: { enabled: false } },
        },
      };
      const res = await fetch(
        `${old.url}/apis/argoproj.io/v1alpha1/namespaces/default/applications/probe?fieldManager=probe&dryRun=All&fieldValidation=Strict`,
        {
          method: "PATCH",
          headers: { "Content-Type": "application/apply-patch+yaml", Authorization: `Bearer ${old.token()}` },
          body: JSON.stringify(body),
        },
      );
      expect(res.status).toBe(400);
      expect(await res.text()).toContain("spec.syncPolicy.automated.enabled");
    } finally {
      await old.close();
    }
  });

  it("keeps an object with finalizers until they are removed", async () => {
    await objects.create(ks({}, "finalized") as any);
    await custom.patchNamespacedCustomObject(
      {
        group: "kustomize.toolkit.fluxcd.io",
        version: "v1",
        namespace: "flux-system",
        plural: "kustomizations",
        name: "finalized",
        body: { metadata: { finalizers: ["finalizers.fluxcd.io"] } },
      },
      k8s.setHeaderOptions("Content-Type", k8s.PatchStrategy.MergePatch),
    );
    await custom.deleteNamespacedCustomObject({
      group: "kustomize.toolkit.fluxcd.io",
      version: "v1",
      namespace: "flux-system",
      plural: "kustomizations",
      name: "finalized",
    });
    const marked = (await custom.getNamespacedCustomObject({
      group: "kustomize.toolkit.fluxcd.io",
      version: "v1",
      namespace: "flux-system",
      plural: "kustomizations",
      name: "finalized",
    })) as any;
    expect(marked.metadata.deletionTimestamp).toBeTruthy();
    expect(marked.metadata.generation).toBe(2);
    await custom.patchNamespacedCustomObject(
      {
        group: "kustomize.toolkit.fluxcd.io",
        version: "v1",
        namespace: "flux-system",
        plural: "kustomizations",
        name: "finalized",
        body: [{ op: "remove", path: "/metadata/finalizers" }],
      },
      k8s.setHeaderOptions("Content-Type", k8s.PatchStrategy.JsonPatch),
    );
    const gone = await custom
      .getNamespacedCustomObject({
        group: "kustomize.toolkit.fluxcd.io",
        version: "v1",
        namespace: "flux-system",
        plural: "kustomizations",
        name: "finalized",
      })
      .catch((e) => e);
    expect(gone.code).toBe(404);
  });

  it("applies all four patch kinds to a ConfigMap", async () => {
    await core.createNamespacedConfigMap({
      namespace: "default",
      body: { metadata: { name: "patched" }, data: { a: "1" } },
    });
    const target = { namespace: "default", name: "patched" };
    await core.patchNamespacedConfigMap(
      { ...target, body: { data: { b: "2" } } },
      k8s.setHeaderOptions("Content-Type", k8s.PatchStrategy.MergePatch),
    );
    await core.patchNamespacedConfigMap(
      { ...target, body: [{ op: "add", path: "/data/c", value: "3" }] },
      k8s.setHeaderOptions("Content-Type", k8s.PatchStrategy.JsonPatch),
    );
    await core.patchNamespacedConfigMap(
      { ...target, body: { data: { d: "4" } } },
      k8s.setHeaderOptions("Content-Type", k8s.PatchStrategy.StrategicMergePatch),
    );
    const out = await core.patchNamespacedConfigMap(
      {
        ...target,
        body: { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "patched" }, data: { e: "5" } },
        fieldManager: "ssa",
        force: true,
      },
      k8s.setHeaderOptions("Content-Type", k8s.PatchStrategy.ServerSideApply),
    );
    expect(out.data).toEqual({ a: "1", b: "2", c: "3", d: "4", e: "5" });
    const managers = out.metadata!.managedFields!.map((m) => `${m.manager}/${m.operation}`);
    expect(managers).toContain("ssa/Apply");
  });

  it("watches from a resourceVersion, sends bookmarks, and answers 410 for a version too old", async () => {
    const list = await core.listNamespacedConfigMap({ namespace: "default" });
    const from = list.metadata!.resourceVersion!;
    const events: { type: string; name?: string }[] = [];
    const watch = new k8s.Watch(kc);
    const req = await watch.watch(
      "/api/v1/namespaces/default/configmaps",
      { resourceVersion: from, allowWatchBookmarks: true },
      (type, obj) => events.push({ type, name: obj?.metadata?.name }),
      () => {},
    );
    await core.createNamespacedConfigMap({ namespace: "default", body: { metadata: { name: "watched" } } });
    await core.patchNamespacedConfigMap(
      { namespace: "default", name: "watched", body: { data: { x: "1" } } },
      k8s.setHeaderOptions("Content-Type", k8s.PatchStrategy.MergePatch),
    );
    await core.deleteNamespacedConfigMap({ namespace: "default", name: "watched" });
    await until(
      () =>
        events.some((e) => e.type === "BOOKMARK") && events.filter((e) => e.name === "watched").length === 3,
      "events",
    );
    expect(events.filter((e) => e.name === "watched").map((e) => e.type)).toEqual([
      "ADDED",
      "MODIFIED",
      "DELETED",
    ]);
    req.abort();

    server.faults.expireHistory();
    let error: any;
    let doneCalled = false;
    await watch.watch(
      "/api/v1/namespaces/default/configmaps",
      { resourceVersion: from },
      (type, obj) => {
        if (type === "ERROR") error = obj;
      },
      () => {
        doneCalled = true;
      },
    );
    await until(() => doneCalled, "watch end");
    expect(error).toMatchObject({ code: 410, reason: "Expired" });
  });

  it("keeps an informer in step, including a re-list after 410 Gone", async () => {
    const path = "/api/v1/namespaces/argocd/configmaps";
    let lists = 0;
    const informer = k8s.makeInformer(kc, path, () => {
      lists++;
      return core.listNamespacedConfigMap({ namespace: "argocd" });
    });
    const seen: string[] = [];
    informer.on("add", (o) => seen.push(`add:${o.metadata!.name}`));
    informer.on("update", (o) => seen.push(`update:${o.metadata!.name}`));
    informer.on("delete", (o) => seen.push(`delete:${o.metadata!.name}`));
    await informer.start();
    await core.createNamespacedConfigMap({ namespace: "argocd", body: { metadata: { name: "inf" } } });
    await until(() => seen.includes("add:inf"), "add");
    await core.patchNamespacedConfigMap(
      { namespace: "argocd", name: "inf", body: { data: { v: "1" } } },
      k8s.setHeaderOptions("Content-Type", k8s.PatchStrategy.MergePatch),
    );
    await until(() => seen.includes("update:inf"), "update");

    // The stream ends; while the informer's re-watch is held back, a change happens and the
    // history is compacted. Its resourceVersion is now too old: the server answers 410, and the
    // informer must re-list to learn of the change.
    expect(lists).toBe(1);
    server.faults.latency(300, { method: "GET", pathPrefix: path });
    expect(server.faults.dropWatches(path)).toBe(1);
    await core.createNamespacedConfigMap({ namespace: "argocd", body: { metadata: { name: "after-gone" } } });
    server.faults.expireHistory();
    await until(() => lists === 2, "re-list after 410");
    server.faults.latency(0);
    await until(() => seen.includes("add:after-gone"), "add after 410");
    await core.deleteNamespacedConfigMap({ namespace: "argocd", name: "inf" });
    await until(() => seen.includes("delete:inf"), "delete");
    expect(informer.list().map((o) => o.metadata!.name)).toContain("after-gone");
    await informer.stop();
  });

  it("refuses an identity without the right rules with 403 and lets another through", async () => {
    server.addUser("reader", "reader-token", [
      { verbs: ["get", "list", "watch"], groups: [""], resources: ["configmaps"], namespaces: ["default"] },
    ]);
    const reader = server.kubeConfig("reader").makeApiClient(k8s.CoreV1Api);
    await reader.listNamespacedConfigMap({ namespace: "default" });
    const denied = await reader
      .createNamespacedConfigMap({ namespace: "default", body: { metadata: { name: "nope" } } })
      .catch((e) => e);
    expect(denied.code).toBe(403);
    expect(parseBody(denied)).toMatchObject({ kind: "Status", reason: "Forbidden" });
    const otherNs = await reader.listNamespacedConfigMap({ namespace: "argocd" }).catch((e) => e);
    expect(otherNs.code).toBe(403);
  });

  it("injects failures and latency", async () => {
    server.faults.failNext(2, {
      method: "GET",
      pathPrefix: "/api/v1/namespaces/default/configmaps",
      status: 500,
    });
    const a = await core.listNamespacedConfigMap({ namespace: "default" }).catch((e) => e);
    const b = await core.listNamespacedConfigMap({ namespace: "default" }).catch((e) => e);
    expect([a.code, b.code]).toEqual([500, 500]);
    await core.listNamespacedConfigMap({ namespace: "default" });
    server.faults.latency(50);
    const t0 = performance.now();
    await core.listNamespacedConfigMap({ namespace: "default" });
    expect(performance.now() - t0).toBeGreaterThanOrEqual(45);
    server.faults.latency(0);
  });
});
