import { describe, expect, it } from "vitest";
import type { ScopeGrant } from "./crds/index.js";
import { checkChanges, checkScope, ownScope, scopeOf } from "./scope.js";

const grant = (name: string, spec: ScopeGrant["spec"]): ScopeGrant => ({
  apiVersion: "applygate.dev/v1alpha1",
  kind: "ScopeGrant",
  metadata: { name },
  spec,
});
const cm = (namespace: string | undefined, name = "x") => ({
  apiVersion: "v1",
  kind: "ConfigMap",
  name,
  ...(namespace ? { namespace } : {}),
});
const target = { namespace: "demo", name: "flux-app" };

describe("scope of a GitTarget", () => {
  it("holds namespaced objects of ordinary kinds in its own namespace only", () => {
    const s = ownScope(target);
    expect(checkScope(s, cm("demo"))).toEqual({ ok: true });
    expect(
      checkScope(s, { apiVersion: "apps/v1", kind: "Deployment", namespace: "demo", name: "w" }).ok,
    ).toBe(true);
    const foreign = checkScope(s, cm("kube-system", "evil"));
    expect(foreign).toMatchObject({
      ok: false,
      reason: "ForeignNamespace",
      object: "ConfigMap kube-system/evil",
    });
    expect(foreign.ok || foreign.message).toMatch(
      /GitTarget demo\/flux-app holds namespaced objects in demo only/,
    );
  });

  it("never holds a cluster-scoped or privileged kind without a grant naming it", () => {
    const s = ownScope(target);
    const cases = [
      { apiVersion: "rbac.authorization.k8s.io/v1", kind: "ClusterRole", name: "admin2" },
      { apiVersion: "rbac.authorization.k8s.io/v1", kind: "Role", namespace: "demo", name: "r" },
      { apiVersion: "rbac.authorization.k8s.io/v1", kind: "RoleBinding", namespace: "demo", name: "r" },
      { apiVersion: "apiextensions.k8s.io/v1", kind: "CustomResourceDefinition", name: "a.b.c" },
      { apiVersion: "admissionregistration.k8s.io/v1", kind: "MutatingWebhookConfiguration", name: "m" },
      { apiVersion: "v1", kind: "Namespace", name: "n" },
      { apiVersion: "v1", kind: "Namespace", namespace: "demo", name: "n" },
      { apiVersion: "scheduling.k8s.io/v1", kind: "PriorityClass", name: "p" },
      { apiVersion: "kustomize.toolkit.fluxcd.io/v1", kind: "Kustomization", namespace: "demo", name: "k" },
      { apiVersion: "argoproj.io/v1alpha1", kind: "Application", namespace: "demo", name: "a" },
      { apiVersion: "applygate.dev/v1alpha1", kind: "ScopeGrant", name: "g" },
      cm(undefined),
    ];
    for (const ref of cases) {
      const v = checkScope(s, ref);
      expect(v.ok, `${ref.kind} ${ref.name}`).toBe(false);
      if (!v.ok) expect(["ClusterScoped", "PrivilegedKind"]).toContain(v.reason);
    }
  });

  it("widens by the grants naming the target or its namespace, and only by those", () => {
    const grants = [
      grant("ns-wide", { targets: [{ namespace: "demo" }], namespaces: ["kube-system"] }),
      grant("rbac", {
        targets: [{ namespace: "demo", name: "flux-app" }],
        kinds: [{ group: "rbac.authorization.k8s.io", kind: "ClusterRole" }],
      }),
      grant("other", { targets: [{ namespace: "demo", name: "argo-app" }], namespaces: ["*"] }),
      grant("elsewhere", { targets: [{ namespace: "team" }], kinds: [{ group: "", kind: "*" }] }),
    ];
    const s = scopeOf(target, grants);
    expect(s.grants).toEqual(["ns-wide", "rbac"]);
    expect(checkScope(s, cm("kube-system")).ok).toBe(true);
    expect(checkScope(s, cm("monitoring")).ok).toBe(false);
    expect(
      checkScope(s, { apiVersion: "rbac.authorization.k8s.io/v1", kind: "ClusterRole", name: "c" }).ok,
    ).toBe(true);
    // A grant of one kind is not a grant of its group.
    expect(
      checkScope(s, { apiVersion: "rbac.authorization.k8s.io/v1", kind: "ClusterRoleBinding", name: "c" }).ok,
    ).toBe(false);
    const argo = scopeOf({ namespace: "demo", name: "argo-app" }, grants);
    expect(checkScope(argo, cm("anywhere")).ok).toBe(true);
    // Every namespace is still not a privileged kind.
    expect(checkScope(argo, { apiVersion: "v1", kind: "Namespace", name: "n" }).ok).toBe(false);
  });

  it("a privileged kind in another namespace needs both the kind and the namespace", () => {
    const role = {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "Role",
      namespace: "kube-system",
      name: "r",
    };
    const kindOnly = scopeOf(target, [
      grant("g", {
        targets: [{ namespace: "demo" }],
        kinds: [{ group: "rbac.authorization.k8s.io", kind: "*" }],
      }),
    ]);
    expect(checkScope(kindOnly, role)).toMatchObject({ ok: false, reason: "ForeignNamespace" });
    const both = scopeOf(target, [
      grant("g", {
        targets: [{ namespace: "demo" }],
        namespaces: ["kube-system"],
        kinds: [{ group: "rbac.authorization.k8s.io", kind: "Role" }],
      }),
    ]);
    expect(checkScope(both, role).ok).toBe(true);
  });

  it("a target's allowedKinds narrows and never widens", () => {
    const s = scopeOf(
      {
        ...target,
        allowedKinds: [
          { group: "", kind: "ConfigMap" },
          { group: "", kind: "Namespace" },
        ],
      },
      [],
    );
    expect(checkScope(s, cm("demo")).ok).toBe(true);
    expect(checkScope(s, { apiVersion: "v1", kind: "Secret", namespace: "demo", name: "s" })).toMatchObject({
      ok: false,
      reason: "KindNotAllowed",
    });
    expect(checkScope(s, { apiVersion: "v1", kind: "Namespace", name: "n" })).toMatchObject({
      ok: false,
      reason: "ClusterScoped",
    });
  });

  it("checks every change of a write, deletes included, and names the first refused", () => {
    const s = ownScope(target);
    const v = checkChanges(s, [
      {
        op: "upsert",
        object: { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "a", namespace: "demo" } },
      },
      { op: "delete", ref: cm("kube-system", "b") },
    ]);
    expect(v).toMatchObject({ ok: false, index: 1, object: "ConfigMap kube-system/b" });
  });

  it("holds a ServiceAccount only by a grant naming the kind: it is an identity bindings may name", () => {
    const sa = { apiVersion: "v1", kind: "ServiceAccount", namespace: "demo", name: "deployer" };
    expect(checkScope(ownScope(target), sa)).toMatchObject({ ok: false, reason: "PrivilegedKind" });
    const granted = scopeOf(target, [
      grant("sa", { targets: [{ namespace: "demo" }], kinds: [{ group: "", kind: "ServiceAccount" }] }),
    ]);
    expect(checkScope(granted, sa)).toEqual({ ok: true });
  });

  it("never holds a Secret's values, whatever the grants, and lets one be deleted", () => {
    const everything = scopeOf(target, [
      grant("all", {
        targets: [{ namespace: "demo" }],
        namespaces: ["*"],
        kinds: [{ group: "", kind: "*" }],
      }),
    ]);
    for (const s of [ownScope(target), everything]) {
      const v = checkChanges(s, [
        {
          op: "upsert",
          object: { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "a", namespace: "demo" } },
        },
        {
          op: "upsert",
          object: { apiVersion: "v1", kind: "Secret", metadata: { name: "db", namespace: "demo" } },
        },
      ]);
      expect(v).toMatchObject({ ok: false, index: 1, reason: "SecretRefused", object: "Secret demo/db" });
      expect(v.ok || v.message).toMatch(/a Secret is never written to Git in clear text/);
      expect(
        checkChanges(s, [
          { op: "delete", ref: { apiVersion: "v1", kind: "Secret", namespace: "demo", name: "db" } },
        ]),
      ).toEqual({ ok: true });
    }
    // Another group's kind named Secret is not a core Secret.
    expect(
      checkChanges(ownScope(target), [
        {
          op: "upsert",
          object: {
            apiVersion: "example.com/v1",
            kind: "Secret",
            metadata: { name: "s", namespace: "demo" },
          },
        },
      ]),
    ).toEqual({ ok: true });
  });
});
