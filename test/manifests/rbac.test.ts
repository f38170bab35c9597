import { readdirSync, readFileSync } from "node:fs";
import { resolve } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { parseAllDocuments } from "yaml";
import { crdObjects } from "../../queue/crds/files.js";
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
    ["", new Set(["secrets", "configmaps", "services"])],
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
  const roles = () =>
    Object.values(built)
      .flat()
      .filter((o): o is Role => o.kind === "ClusterRole" || o.kind === "Role");

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
