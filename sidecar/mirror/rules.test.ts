import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { scopeOf } from "../../queue/scope.js";
import { CONFIG_MAP, NAMESPACE, watchRule } from "../../test/support/watch-rules.js";
import { kindRefusal, matchesSelector, outOfScope, selects } from "./rules.js";

const own = scopeOf({ namespace: "team", name: "site" }, []);
/** The GitTarget's scope with a ScopeGrant giving it `spec` (namespaces or kinds) beyond its own. */
const grantedBy = (spec: Record<string, unknown>) =>
  scopeOf({ namespace: "team", name: "site" }, [
    {
      apiVersion: "applygate.dev/v1alpha1",
      kind: "ScopeGrant",
      metadata: { name: "g" },
      spec: { targets: [{ namespace: "team" }], ...spec },
    },
  ]);
const obj = (namespace: string | undefined, labels: Record<string, string> = {}) => ({
  metadata: { name: "c", ...(namespace ? { namespace } : {}), labels },
});

describe("which rules select an object", () => {
  it("its own namespace by default, by kind or by resource", () => {
    expect(selects(watchRule(), own, CONFIG_MAP, obj("team"))).toEqual({ selected: true });
    expect(
      selects(
        watchRule({ kinds: [{ group: "", version: "v1", resource: "configmaps" }] }),
        own,
        CONFIG_MAP,
        obj("team"),
      ),
    ).toEqual({
      selected: true,
    });
    expect(selects(watchRule(), own, CONFIG_MAP, obj("other"))).toEqual({ selected: false });
    expect(
      selects(
        watchRule({ kinds: [{ group: "apps", version: "v1", kind: "ConfigMap" }] }),
        own,
        CONFIG_MAP,
        obj("team"),
      ).selected,
    ).toBe(false);
  });

  it("another namespace only with a ScopeGrant: a namespace editor's rule naming it selects nothing there, and its status says so by namespace alone", () => {
    const r = watchRule({ namespaces: ["other"] });
    expect(selects(r, own, CONFIG_MAP, obj("other"))).toEqual({ selected: false });
    expect(outOfScope(r, own, [CONFIG_MAP])).toEqual([
      "ConfigMap in namespace other: GitTarget team/site holds namespaced objects in team only unless a ScopeGrant names namespace other (ForeignNamespace)",
    ]);
    const granted = grantedBy({ namespaces: ["other"] });
    expect(selects(r, granted, CONFIG_MAP, obj("other"))).toEqual({ selected: true });
    expect(outOfScope(r, granted, [CONFIG_MAP])).toEqual([]);
  });

  it("the scope before the selector: whether an out-of-scope object matches the selector makes no difference anywhere (no label oracle)", () => {
    fc.assert(
      fc.property(
        fc.dictionary(fc.constantFrom("app", "tier", "secret"), fc.constantFrom("a", "b")),
        fc.dictionary(fc.constantFrom("app", "tier", "secret"), fc.constantFrom("a", "b")),
        (matchLabels, labels) => {
          const r = watchRule({ namespaces: ["team", "other"], selector: { matchLabels } });
          const foreign = { metadata: { name: "x", namespace: "other", labels } };
          expect(selects(r, own, CONFIG_MAP, foreign)).toEqual({ selected: false });
        },
      ),
    );
  });

  it("a cluster-scoped kind only with a ScopeGrant of that kind", () => {
    const r = watchRule({ kinds: [{ group: "", version: "v1", kind: "Namespace" }] });
    expect(selects(r, own, NAMESPACE, obj(undefined)).selected).toBe(false);
    expect(outOfScope(r, own, [NAMESPACE])).toEqual([
      "Namespace (cluster-scoped): GitTarget team/site holds no cluster-scoped objects (no namespace) unless a ScopeGrant names kind Namespace (ClusterScoped)",
    ]);
    const granted = grantedBy({ kinds: [{ group: "", kind: "Namespace" }] });
    expect(selects(r, granted, NAMESPACE, obj(undefined))).toEqual({ selected: true });
  });

  it("Secrets are never watched, whatever the rule or the RBAC", () => {
    expect(kindRefusal({ group: "", kind: "Secret" })).toContain("never written to Git in clear text");
    expect(kindRefusal({ group: "", kind: "ConfigMap" })).toBeUndefined();
    expect(kindRefusal({ group: "bitnami.com", kind: "Secret" })).toBeUndefined();
  });

  it("the label selector and suspend", () => {
    const r = watchRule({ selector: { matchLabels: { app: "web" } } });
    expect(selects(r, own, CONFIG_MAP, obj("team", { app: "web" })).selected).toBe(true);
    expect(selects(r, own, CONFIG_MAP, obj("team", { app: "db" })).selected).toBe(false);
    expect(selects(watchRule({ suspend: true }), own, CONFIG_MAP, obj("team")).selected).toBe(false);
  });
});

describe("label selectors", () => {
  it("matchLabels and every operator", () => {
    const l = { a: "1", b: "2" };
    expect(matchesSelector(undefined, l)).toBe(true);
    expect(matchesSelector({ matchLabels: { a: "1" } }, l)).toBe(true);
    expect(matchesSelector({ matchLabels: { a: "2" } }, l)).toBe(false);
    expect(matchesSelector({ matchExpressions: [{ key: "a", operator: "In", values: ["1", "3"] }] }, l)).toBe(
      true,
    );
    expect(matchesSelector({ matchExpressions: [{ key: "c", operator: "In", values: ["1"] }] }, l)).toBe(
      false,
    );
    expect(matchesSelector({ matchExpressions: [{ key: "a", operator: "NotIn", values: ["1"] }] }, l)).toBe(
      false,
    );
    expect(matchesSelector({ matchExpressions: [{ key: "c", operator: "NotIn", values: ["1"] }] }, l)).toBe(
      true,
    );
    expect(matchesSelector({ matchExpressions: [{ key: "b", operator: "Exists" }] }, l)).toBe(true);
    expect(matchesSelector({ matchExpressions: [{ key: "c", operator: "Exists" }] }, l)).toBe(false);
    expect(matchesSelector({ matchExpressions: [{ key: "c", operator: "DoesNotExist" }] }, l)).toBe(true);
    expect(matchesSelector({ matchExpressions: [{ key: "a", operator: "DoesNotExist" }] }, l)).toBe(false);
  });
});
