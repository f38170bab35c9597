import { readdirSync, readFileSync } from "node:fs";
import { resolve } from "node:path";
import * as k8s from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseAllDocuments } from "yaml";
import { crdFiles, crdObjects } from "../../queue/crds/files.js";
import { type ApiServer, startApiServer } from "../cluster/apiserver/index.js";
import { build, type K8sObject, KUBECTL_AVAILABLE, OVERLAYS, REPO_ROOT } from "./kustomize.js";

interface Rule {
  apiGroups: string[];
  resources: string[];
  verbs: string[];
  resourceNames?: string[];
}
type Role = K8sObject & { rules: Rule[] };
type Binding = K8sObject & { roleRef: { kind: string; name: string } };

/** group → resources (with `/status` where the kind has that subresource) the API server serves. */
function servedResources(): Map<string, Set<string>> {
  const served = new Map<string, Set<string>>([
    // Built-in kinds every cluster serves that a rule may name (the window observers' defaults).
    ["", new Set(["secrets", "configmaps", "services", "namespaces"])],
    ["apps", new Set(["deployments"])],
    ["events.k8s.io", new Set(["events"])],
  ]);
  const simulated = readdirSync(resolve(REPO_ROOT, "test/cluster/crds"))
    .filter((f) => f.endsWith(".yaml"))
    .flatMap((f) =>
      parseAllDocuments(readFileSync(resolve(REPO_ROOT, "test/cluster/crds", f), "utf8")).map((d) =>
        d.toJS(),
      ),
    );
  for (const crd of [...crdObjects(), ...simulated] as any[]) {
    const set = served.get(crd.spec.group) ?? new Set<string>();
    set.add(crd.spec.names.plural);
    if (crd.spec.versions.some((v: any) => v.subresources?.status))
      set.add(`${crd.spec.names.plural}/status`);
    served.set(crd.spec.group, set);
  }
  return served;
}

describe.skipIf(!KUBECTL_AVAILABLE)("RBAC", () => {
  const built: Record<string, K8sObject[]> = {};
  beforeAll(() => {
    for (const overlay of ["base", "flux", "argocd"] as const) built[overlay] = build(OVERLAYS[overlay]);
  });
  // An aggregated ClusterRole names no rules of its own (the aggregation controller writes them).
  const roles = () =>
    Object.values(built)
      .flat()
      .filter((o): o is Role => o.kind === "ClusterRole" || o.kind === "Role")
      .map((r) => ({ ...r, rules: r.rules ?? [] }));

  it("names only resources that exist: ours, the Flux and Argo CD CRDs of the simulated cluster, core ones", () => {
    const served = servedResources();
    for (const role of roles()) {
      for (const rule of role.rules) {
        for (const group of rule.apiGroups)
          for (const resource of rule.resources)
            expect(served.get(group)?.has(resource), `${role.metadata.name}: ${group}/${resource}`).toBe(
              true,
            );
      }
    }
  });

  it("grants no wildcard, and Secrets only through the per-namespace reader (get) and the worker's watcher", () => {
    for (const role of roles()) {
      for (const rule of role.rules) {
        expect([...rule.apiGroups, ...rule.resources, ...rule.verbs]).not.toContain("*");
        if (rule.resources.includes("secrets")) {
          expect(["applygate-secret-reader", "applygate-secret-watcher"]).toContain(role.metadata.name);
          expect(rule.verbs).toEqual(
            role.metadata.name === "applygate-secret-reader" ? ["get"] : ["get", "list", "watch"],
          );
        }
      }
    }
    const clusterBindings = Object.values(built)
      .flat()
      .filter((o): o is Binding => o.kind === "ClusterRoleBinding");
    expect(clusterBindings.map((b) => b.roleRef.name)).not.toContain("applygate-secret-reader");
    expect(clusterBindings.map((b) => b.roleRef.name)).not.toContain("applygate-secret-watcher");
  });

  it("grants no Leases (leases live in Redis), no core Events (Events are events.k8s.io), and update only where an update is sent", () => {
    for (const role of roles()) {
      for (const rule of role.rules) {
        expect(rule.apiGroups, role.metadata.name).not.toContain("coordination.k8s.io");
        if (rule.resources.includes("events")) expect(rule.apiGroups).toEqual(["events.k8s.io"]);
        // The Argo CD sidecar starts a sync with an update of the Application (a resourceVersion guard).
        if (rule.verbs.includes("update") && !role.metadata.name.startsWith("applygate-edit"))
          expect([role.metadata.name, rule.resources]).toEqual([
            "applygate-sidecar-argocd",
            ["applications"],
          ]);
      }
    }
  });

  it("gives each sidecar its own applier's kinds only", () => {
    const rules = (overlay: string) =>
      (built[overlay]!.find((o) => o.kind === "ClusterRole") as Role).rules.flatMap((r) => r.apiGroups);
    expect(new Set(rules("flux"))).toEqual(
      new Set([
        "kustomize.toolkit.fluxcd.io",
        "source.toolkit.fluxcd.io",
        "applygate.dev",
        "",
        "apps",
        "events.k8s.io",
      ]),
    );
    expect(new Set(rules("argocd"))).toEqual(
      new Set(["argoproj.io", "applygate.dev", "", "apps", "events.k8s.io"]),
    );
  });

  it("writes status of our kinds only through the status subresource", () => {
    const worker = built.base!.find(
      (o) => o.kind === "ClusterRole" && o.metadata.name === "applygate-worker",
    ) as Role;
    for (const rule of worker.rules.filter((r) => r.apiGroups.includes("applygate.dev"))) {
      const writes = rule.verbs.some((v) => ["create", "update", "patch", "delete"].includes(v));
      if (writes) for (const r of rule.resources) expect(r).toMatch(/\/status$/);
    }
  });
});

describe("documented RBAC", () => {
  it("docs/security.md has a row for every rule's resources", () => {
    const doc = readFileSync(resolve(REPO_ROOT, "docs/security.md"), "utf8");
    for (const file of [
      "manifests/base/rbac.yaml",
      "manifests/flux/rbac.yaml",
      "manifests/argocd/rbac.yaml",
    ]) {
      const docs = parseAllDocuments(readFileSync(resolve(REPO_ROOT, file), "utf8")).map((d) => d.toJS());
      for (const role of docs.filter((d) => d?.kind === "ClusterRole" || d?.kind === "Role") as Role[]) {
        if (role.metadata.name === "applygate-edit" || role.metadata.name === "applygate-view") continue;
        for (const rule of role.rules)
          for (const r of rule.resources) expect(doc, `${file}: ${r}`).toContain(r);
      }
    }
  });
});

/** Our kinds a namespace user works with: every namespaced applygate.dev CRD, by plural. */
const namespacedKinds = () =>
  (crdObjects() as any[])
    .filter((c) => c.spec.scope === "Namespaced")
    .map((c) => c.spec.names.plural as string);

describe("namespace users through the built-in roles", () => {
  const text = readFileSync(resolve(REPO_ROOT, "manifests/base/rbac.yaml"), "utf8");
  const docs = parseAllDocuments(text).map((d) => d.toJS()) as Role[];
  const role = (name: string) =>
    docs.find((d) => d.kind === "ClusterRole" && d.metadata.name === name) as Role;

  it("applygate-edit writes and applygate-view reads every namespaced kind of ours; view is aggregated into edit and admin too", () => {
    const granted = (r: Role, verb: string) =>
      r.rules
        .filter((x) => x.apiGroups.includes("applygate.dev") && x.verbs.includes(verb))
        .flatMap((x) => x.resources);
    const kinds = namespacedKinds();
    expect(kinds).toEqual(expect.arrayContaining(["watchrules", "webhookclaims", "approvals"]));
    // Approving is not editing: Approvals are written through applygate-approver only.
    const edited = kinds.filter((k) => k !== "approvals");
    for (const verb of ["create", "update", "patch", "delete"])
      expect(granted(role("applygate-edit"), verb).sort(), verb).toEqual([...edited].sort());
    expect(granted(role("applygate-approver"), "create")).toEqual(["approvals"]);
    expect(
      Object.keys(role("applygate-approver").metadata.labels ?? {}).filter((l) => l.includes("aggregate")),
    ).toEqual([]);
    for (const verb of ["get", "list", "watch"])
      expect(granted(role("applygate-view"), verb), verb).toEqual(expect.arrayContaining(kinds));
    expect(granted(role("applygate-edit"), "create")).not.toContain("scopegrants");
    expect(role("applygate-view").metadata.labels).toMatchObject({
      "rbac.authorization.k8s.io/aggregate-to-view": "true",
      "rbac.authorization.k8s.io/aggregate-to-edit": "true",
      "rbac.authorization.k8s.io/aggregate-to-admin": "true",
    });
  });

  describe("on an API server enforcing RBAC", () => {
    let api: ApiServer;
    const client = (user: string) => api.kubeConfig(user).makeApiClient(k8s.CustomObjectsApi);
    const G = { group: "applygate.dev", version: "v1alpha1" };
    const code = (p: Promise<unknown>) =>
      p.then(
        () => 200,
        (e: { code?: number }) => e.code ?? 0,
      );
    let editor: string;
    let viewer: string;
    let clusterEditor: string;

    beforeAll(async () => {
      api = await startApiServer();
      for (const f of crdFiles()) await api.installCrdFile(f);
      await api.applyYaml(text);
      const core = api.kubeConfig().makeApiClient(k8s.CoreV1Api);
      for (const name of ["team-a", "team-b"]) await core.createNamespace({ body: { metadata: { name } } });
      editor = api.addServiceAccount("team-a", "dev");
      viewer = api.addServiceAccount("team-a", "auditor");
      clusterEditor = api.addServiceAccount("ops", "oncall");
      await api.applyYaml(`
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: { name: dev-edit, namespace: team-a }
roleRef: { apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: edit }
subjects: [{ kind: ServiceAccount, name: dev, namespace: team-a }]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: { name: auditor-view, namespace: team-a }
roleRef: { apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: view }
subjects: [{ kind: ServiceAccount, name: auditor, namespace: team-a }]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: { name: oncall-edit }
roleRef: { apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: edit }
subjects: [{ kind: ServiceAccount, name: oncall, namespace: ops }]
`);
    });
    afterAll(async () => api?.close());

    it("an editor of team-a writes WatchRules and WebhookClaims there, and nowhere else", async () => {
      const c = client(editor);
      const rule = {
        apiVersion: "applygate.dev/v1alpha1",
        kind: "WatchRule",
        metadata: { name: "cms" },
        spec: { targetRef: { name: "site" }, kinds: [{ group: "", version: "v1", kind: "ConfigMap" }] },
      };
      const claim = {
        apiVersion: "applygate.dev/v1alpha1",
        kind: "WebhookClaim",
        metadata: { name: "deploy" },
        spec: { url: "https://deploy.example/hook", secretRef: { name: "deploy-key" } },
      };
      for (const [plural, body] of [
        ["watchrules", rule],
        ["webhookclaims", claim],
      ] as const) {
        expect(
          await code(c.createNamespacedCustomObject({ ...G, plural, namespace: "team-a", body })),
          plural,
        ).toBe(200);
        expect(await code(c.listNamespacedCustomObject({ ...G, plural, namespace: "team-a" })), plural).toBe(
          200,
        );
        expect(
          await code(c.createNamespacedCustomObject({ ...G, plural, namespace: "team-b", body })),
          plural,
        ).toBe(403);
        expect(
          await code(client(viewer).listNamespacedCustomObject({ ...G, plural, namespace: "team-a" })),
          plural,
        ).toBe(200);
        expect(
          await code(
            client(viewer).createNamespacedCustomObject({
              ...G,
              plural,
              namespace: "team-a",
              body: { ...body, metadata: { name: "v" } },
            }),
          ),
          plural,
        ).toBe(403);
      }
    });

    it("ScopeGrants: read under a ClusterRoleBinding of edit, written by no editor", async () => {
      const grant = {
        apiVersion: "applygate.dev/v1alpha1",
        kind: "ScopeGrant",
        metadata: { name: "mine" },
        spec: { targets: [{ namespace: "team-a" }], namespaces: ["kube-system"] },
      };
      expect(await code(client(clusterEditor).listClusterCustomObject({ ...G, plural: "scopegrants" }))).toBe(
        200,
      );
      for (const who of [editor, clusterEditor])
        expect(
          await code(client(who).createClusterCustomObject({ ...G, plural: "scopegrants", body: grant })),
        ).toBe(403);
      // A RoleBinding in a namespace grants no cluster-scoped read.
      expect(await code(client(editor).listClusterCustomObject({ ...G, plural: "scopegrants" }))).toBe(403);
    });
  });
});
