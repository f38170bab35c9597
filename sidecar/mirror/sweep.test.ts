import { describe, expect, it } from "vitest";
import type { WatchRule } from "../../queue/crds/index.js";
import { scopeOf } from "../../queue/scope.js";
import type { ResolvedKind } from "./rules.js";
import { sweepPlan } from "./sweep.js";

const CM: ResolvedKind = {
  group: "",
  version: "v1",
  kind: "ConfigMap",
  resource: "configmaps",
  namespaced: true,
};
const NS: ResolvedKind = {
  group: "",
  version: "v1",
  kind: "Namespace",
  resource: "namespaces",
  namespaced: false,
};

const rule = (spec: Partial<WatchRule["spec"]> = {}): WatchRule =>
  ({
    apiVersion: "applygate.dev/v1alpha1",
    kind: "WatchRule",
    metadata: { name: "r", namespace: "team" },
    spec: { targetRef: { name: "site" }, kinds: [{ group: "", version: "v1", kind: "ConfigMap" }], ...spec },
  }) as WatchRule;

const own = scopeOf({ namespace: "team", name: "site" }, []);
const obj = (name: string, namespace?: string) => ({
  metadata: { name, ...(namespace ? { namespace } : {}) },
});

describe("the sweep a snapshot asks for", () => {
  it("names every live object of the kind in the swept namespaces, selected or not", () => {
    const plan = sweepPlan(rule({ selector: { matchLabels: { app: "web" } } }), own, CM, [
      obj("b", "team"),
      obj("a", "team"),
      obj("x", "other"),
    ]);
    expect(plan).toEqual({
      apiVersion: "v1",
      kind: "ConfigMap",
      namespaces: ["team"],
      selector: { matchLabels: { app: "web" } },
      live: ["team/a", "team/b"],
    });
  });

  it("sweeps no namespace the GitTarget's scope does not hold", () => {
    expect(sweepPlan(rule({ namespaces: ["other"] }), own, CM, [])).toBeUndefined();
    expect(sweepPlan(rule({ namespaces: ["team", "other"] }), own, CM, [])?.namespaces).toEqual(["team"]);
  });

  it("a cluster-scoped kind only with a grant for it", () => {
    expect(sweepPlan(rule(), own, NS, [obj("n")])).toBeUndefined();
    const granted = scopeOf({ namespace: "team", name: "site" }, [
      {
        apiVersion: "applygate.dev/v1alpha1",
        kind: "ScopeGrant",
        metadata: { name: "g" },
        spec: { targets: [{ namespace: "team", name: "site" }], kinds: [{ group: "", kind: "Namespace" }] },
      } as never,
    ]);
    expect(sweepPlan(rule(), granted, NS, [obj("n")])).toEqual({
      apiVersion: "v1",
      kind: "Namespace",
      namespaces: [],
      live: ["/n"],
    });
  });
});
