/** RBAC enforcement and the audit log of the simulated API server, through the real client. */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as k8s from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { until } from "../../support/wait.js";
import { type ApiServer, readAuditLog, startApiServer } from "./index.js";
import { authorize, type Policy } from "./rbac.js";

const status = (e: unknown) => {
  const body = (e as { body?: unknown }).body;
  return (typeof body === "string" ? JSON.parse(body) : body) as { code: number; message: string };
};

const POLICY = `
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: { name: reader }
rules:
  - apiGroups: [""]
    resources: ["configmaps"]
    verbs: ["get", "list", "watch"]
  - apiGroups: [""]
    resources: ["secrets"]
    resourceNames: ["named"]
    verbs: ["get"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: { name: reader }
roleRef: { apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: reader }
subjects:
  - { kind: ServiceAccount, name: app, namespace: team-a }
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: { name: status-writer, namespace: team-b }
rules:
  - apiGroups: [""]
    resources: ["namespaces/status", "configmaps"]
    verbs: ["patch"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: { name: status-writer, namespace: team-b }
roleRef: { apiGroup: rbac.authorization.k8s.io, kind: Role, name: status-writer }
subjects:
  - { kind: ServiceAccount, name: app, namespace: team-a }
`;

describe("RBAC of the simulated API server", () => {
  let server: ApiServer;
  let dir: string;
  let core: k8s.CoreV1Api;
  let user: string;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "applygate-rbac-"));
    server = await startApiServer({ auditLog: join(dir, "audit.log") });
    const admin = server.kubeConfig().makeApiClient(k8s.CoreV1Api);
    for (const name of ["team-a", "team-b"]) await admin.createNamespace({ body: { metadata: { name } } });
    for (const name of ["named", "other"])
      await admin.createNamespacedSecret({ namespace: "team-a", body: { metadata: { name } } });
    await admin.createNamespacedConfigMap({ namespace: "team-b", body: { metadata: { name: "cm" } } });
    await server.applyYaml(POLICY);
    user = server.addServiceAccount("team-a", "app");
    core = server.kubeConfig(user).makeApiClient(k8s.CoreV1Api);
  });
  afterAll(async () => {
    await server.close();
    await rm(dir, { recursive: true, force: true });
  });

  it("names a ServiceAccount as the real server does", () => {
    expect(user).toBe("system:serviceaccount:team-a:app");
  });

  it("allows what a ClusterRoleBinding grants, in every namespace", async () => {
    const list = await core.listConfigMapForAllNamespaces();
    expect(list.items.map((c) => c.metadata?.name)).toContain("cm");
    await core.readNamespacedConfigMap({ namespace: "team-b", name: "cm" });
  });

  it("refuses what nothing grants with the real Forbidden message", async () => {
    const err = await core
      .createNamespacedConfigMap({ namespace: "team-a", body: { metadata: { name: "x" } } })
      .catch((e) => e);
    expect(status(err)).toMatchObject({
      code: 403,
      message:
        'configmaps is forbidden: User "system:serviceaccount:team-a:app" cannot create resource "configmaps" in API group "" in the namespace "team-a"',
    });
  });

  it("limits a rule with resourceNames to those names, and never to a list", async () => {
    await core.readNamespacedSecret({ namespace: "team-a", name: "named" });
    expect(
      status(await core.readNamespacedSecret({ namespace: "team-a", name: "other" }).catch((e) => e)).code,
    ).toBe(403);
    expect(status(await core.listNamespacedSecret({ namespace: "team-a" }).catch((e) => e)).code).toBe(403);
  });

  it("grants a RoleBinding's rules in its own namespace only, subresources by name", async () => {
    const patch = (namespace: string) =>
      core.patchNamespacedConfigMap(
        { namespace, name: "cm", body: { metadata: { labels: { a: "b" } } } },
        k8s.setHeaderOptions("Content-Type", k8s.PatchStrategy.MergePatch),
      );
    await patch("team-b");
    expect(status(await patch("team-a").catch((e) => e)).code).toBe(403);
    const ns = (name: string, sub: boolean) =>
      (sub ? core.patchNamespaceStatus : core.patchNamespace).call(
        core,
        { name, body: { metadata: { labels: { a: "b" } } } },
        k8s.setHeaderOptions("Content-Type", k8s.PatchStrategy.MergePatch),
      );
    // A Namespace's own requests count as in that namespace, as on a real server.
    await ns("team-b", true);
    expect(status(await ns("team-b", false).catch((e) => e)).code).toBe(403);
    expect(status(await ns("team-a", true).catch((e) => e)).code).toBe(403);
  });

  it("serves discovery to every authenticated user (the bootstrap policy)", async () => {
    const versions = await server.kubeConfig(user).makeApiClient(k8s.CoreApi).getAPIVersions();
    expect(versions.versions).toContain("v1");
  });

  it("a request without a token is system:anonymous with only what RBAC grants it: /version and health, nothing else", async () => {
    const version = await fetch(`${server.url}/version`);
    expect(version.status).toBe(200);
    const read = await fetch(`${server.url}/api/v1/namespaces/team-b/configmaps/cm`);
    expect(read.status).toBe(403);
    expect(((await read.json()) as { message: string }).message).toBe(
      'configmaps "cm" is forbidden: User "system:anonymous" cannot get resource "configmaps" in API group "" in the namespace "team-b"',
    );
    const create = await fetch(`${server.url}/api/v1/namespaces`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ metadata: { name: "by-nobody" } }),
    });
    expect(create.status).toBe(403);
    expect((await fetch(`${server.url}/apis`)).status).toBe(403);
    const admin = await fetch(`${server.url}/api/v1/namespaces/team-b/configmaps/cm`, {
      headers: { Authorization: `Bearer ${server.token()}` },
    });
    expect(admin.status).toBe(200);
  });

  it("with anonymous auth off, a request without a token is 401", async () => {
    const closed = await startApiServer({ anonymous: "deny" });
    try {
      expect((await fetch(`${closed.url}/version`)).status).toBe(401);
      expect((await fetch(`${closed.url}/api/v1/namespaces`)).status).toBe(401);
    } finally {
      await closed.close();
    }
  });

  it("writes each request to the audit log as an audit.k8s.io/v1 Event", async () => {
    const events = readAuditLog(join(dir, "audit.log"));
    const denied = events.find((e) => e.verb === "create" && e.user.username === user);
    expect(denied).toMatchObject({
      kind: "Event",
      apiVersion: "audit.k8s.io/v1",
      level: "Metadata",
      stage: "ResponseComplete",
      requestURI: "/api/v1/namespaces/team-a/configmaps",
      user: { username: user, groups: expect.arrayContaining(["system:serviceaccounts:team-a"]) },
      objectRef: { resource: "configmaps", namespace: "team-a", apiVersion: "v1" },
      responseStatus: { code: 403 },
      annotations: { "authorization.k8s.io/decision": "forbid" },
    });
    expect(denied!.auditID).toMatch(/^[0-9a-f-]{36}$/);
    expect(denied!.requestReceivedTimestamp).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/);
    const read = events.find((e) => e.verb === "get" && e.objectRef?.name === "named");
    expect(read).toMatchObject({
      objectRef: { resource: "secrets", namespace: "team-a", name: "named" },
      responseStatus: { code: 200 },
      annotations: {
        "authorization.k8s.io/decision": "allow",
        "authorization.k8s.io/reason":
          'RBAC: allowed by ClusterRoleBinding "reader" of ClusterRole "reader" to ServiceAccount "app/team-a"',
      },
    });
    const byRole = events.find(
      (e) => e.verb === "patch" && e.responseStatus.code === 200 && e.user.username === user,
    );
    expect(byRole?.annotations?.["authorization.k8s.io/reason"]).toBe(
      'RBAC: allowed by RoleBinding "status-writer/team-b" of Role "status-writer" to ServiceAccount "app/team-a"',
    );
    const admin = events.find((e) => e.verb === "create" && e.objectRef?.resource === "namespaces");
    expect(admin?.user).toEqual({ username: "admin", groups: ["system:masters", "system:authenticated"] });
  });

  it("logs a watch once its stream starts", async () => {
    const kc = server.kubeConfig(user);
    const w = new k8s.Watch(kc);
    const req = await w.watch(
      "/api/v1/configmaps",
      {},
      () => {},
      () => {},
    );
    const watch = await until(
      () => readAuditLog(join(dir, "audit.log")).find((e) => e.verb === "watch"),
      "the watch in the audit log",
      { timeoutMs: 10_000, everyMs: 20 },
    );
    req.abort();
    expect(watch).toMatchObject({ stage: "ResponseStarted", responseStatus: { code: 200 } });
  });
});

describe("authorize", () => {
  const empty: Policy = { roles: [], clusterRoles: [], roleBindings: [], clusterRoleBindings: [] };
  const sa = { name: "system:serviceaccount:a:b", groups: ["system:authenticated"] };

  it("grants non-resource URLs only through ClusterRoleBindings, with * as a prefix", () => {
    const policy: Policy = {
      ...empty,
      clusterRoles: [
        {
          apiVersion: "rbac.authorization.k8s.io/v1",
          kind: "ClusterRole",
          metadata: { name: "m" },
          rules: [{ verbs: ["get"], nonResourceURLs: ["/metrics/*"] }],
        },
      ],
      clusterRoleBindings: [
        {
          apiVersion: "rbac.authorization.k8s.io/v1",
          kind: "ClusterRoleBinding",
          metadata: { name: "m" },
          roleRef: { kind: "ClusterRole", name: "m" },
          subjects: [{ kind: "ServiceAccount", name: "b", namespace: "a" }],
        },
      ],
    };
    expect(authorize(sa, { verb: "get", path: "/metrics/cadvisor" }, policy).allowed).toBe(true);
    expect(authorize(sa, { verb: "get", path: "/logs" }, policy).allowed).toBe(false);
    expect(authorize(sa, { verb: "get", path: "/apis/apps/v1" }, empty).allowed).toBe(true);
    expect(authorize({ ...sa, groups: [] }, { verb: "get", path: "/apis" }, empty).allowed).toBe(false);
  });

  it("an aggregated ClusterRole holds the rules of the ClusterRoles its selectors match", () => {
    const cr = (name: string, extra: object) => ({
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "ClusterRole",
      metadata: { name },
      ...extra,
    });
    const policy: Policy = {
      ...empty,
      clusterRoles: [
        cr("watched", {
          aggregationRule: { clusterRoleSelectors: [{ matchLabels: { to: "watched" } }] },
          rules: [],
        }),
        {
          ...cr("cms", { rules: [{ verbs: ["list"], apiGroups: [""], resources: ["configmaps"] }] }),
          metadata: { name: "cms", labels: { to: "watched" } },
        },
        cr("deps", { rules: [{ verbs: ["list"], apiGroups: ["apps"], resources: ["deployments"] }] }),
      ],
      clusterRoleBindings: [
        {
          apiVersion: "rbac.authorization.k8s.io/v1",
          kind: "ClusterRoleBinding",
          metadata: { name: "w" },
          roleRef: { kind: "ClusterRole", name: "watched" },
          subjects: [{ kind: "ServiceAccount", name: "b", namespace: "a" }],
        },
      ],
    };
    expect(authorize(sa, { verb: "list", group: "", resource: "configmaps" }, policy).allowed).toBe(true);
    expect(authorize(sa, { verb: "list", group: "apps", resource: "deployments" }, policy).allowed).toBe(
      false,
    );
  });

  it("the built-in view aggregates into edit and edit into admin: a rule labelled aggregate-to-view reaches all three, one labelled aggregate-to-edit only edit and admin", () => {
    const labelled = (name: string, to: string, resource: string) => ({
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "ClusterRole",
      metadata: { name, labels: { [`rbac.authorization.k8s.io/aggregate-to-${to}`]: "true" } },
      rules: [{ verbs: ["list"], apiGroups: ["example.dev"], resources: [resource] }],
    });
    const boundTo = (role: string): Policy => ({
      ...empty,
      clusterRoles: [
        labelled("widgets-view", "view", "widgets"),
        labelled("gadgets-edit", "edit", "gadgets"),
      ],
      clusterRoleBindings: [
        {
          apiVersion: "rbac.authorization.k8s.io/v1",
          kind: "ClusterRoleBinding",
          metadata: { name: "b" },
          roleRef: { kind: "ClusterRole", name: role },
          subjects: [{ kind: "ServiceAccount", name: "b", namespace: "a" }],
        },
      ],
    });
    const can = (role: string, resource: string) =>
      authorize(sa, { verb: "list", group: "example.dev", resource }, boundTo(role)).allowed;
    expect(["view", "edit", "admin"].map((r) => can(r, "widgets"))).toEqual([true, true, true]);
    expect(["view", "edit", "admin"].map((r) => can(r, "gadgets"))).toEqual([false, true, true]);
    // The built-in rules come along: edit writes ConfigMaps, view only reads them.
    const cm = (role: string, verb: string) =>
      authorize(sa, { verb, group: "", resource: "configmaps", namespace: "x" }, boundTo(role)).allowed;
    expect([cm("view", "get"), cm("view", "create"), cm("edit", "create"), cm("admin", "get")]).toEqual([
      true,
      false,
      true,
      true,
    ]);
  });

  it("matches a ServiceAccount subject by namespace and name, a Group by the user's groups", () => {
    const policy = (subject: object): Policy => ({
      ...empty,
      clusterRoles: [
        {
          apiVersion: "rbac.authorization.k8s.io/v1",
          kind: "ClusterRole",
          metadata: { name: "r" },
          rules: [{ verbs: ["*"], apiGroups: ["x"], resources: ["*/status"] }],
        },
      ],
      clusterRoleBindings: [
        {
          apiVersion: "rbac.authorization.k8s.io/v1",
          kind: "ClusterRoleBinding",
          metadata: { name: "r" },
          roleRef: { kind: "ClusterRole", name: "r" },
          subjects: [subject],
        },
      ],
    });
    const status = { verb: "patch", group: "x", resource: "things", subresource: "status", namespace: "n" };
    expect(authorize(sa, status, policy({ kind: "ServiceAccount", name: "b", namespace: "a" })).allowed).toBe(
      true,
    );
    expect(authorize(sa, status, policy({ kind: "ServiceAccount", name: "b", namespace: "c" })).allowed).toBe(
      false,
    );
    expect(authorize(sa, status, policy({ kind: "Group", name: "system:authenticated" })).allowed).toBe(true);
    expect(
      authorize(
        sa,
        { ...status, subresource: undefined },
        policy({ kind: "Group", name: "system:authenticated" }),
      ).allowed,
    ).toBe(false);
  });
});
