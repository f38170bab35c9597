import { describe, expect, it } from "vitest";
import { scopeOf } from "../../queue/scope.js";
import { CONFIG_MAP, NAMESPACE, watchRule } from "../../test/support/watch-rules.js";
import { sweepPlan } from "./sweep.js";

const own = scopeOf({ namespace: "team", name: "site" }, []);
const obj = (name: string, namespace?: string) => ({
  metadata: { name, ...(namespace ? { namespace } : {}) },
});

describe("the sweep a snapshot asks for", () => {
  it("names every live object of the kind in the swept namespaces, selected or not", () => {
    const plan = sweepPlan(watchRule({ selector: { matchLabels: { app: "web" } } }), own, CONFIG_MAP, [
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
    expect(sweepPlan(watchRule({ namespaces: ["other"] }), own, CONFIG_MAP, [])).toBeUndefined();
    expect(sweepPlan(watchRule({ namespaces: ["team", "other"] }), own, CONFIG_MAP, [])?.namespaces).toEqual([
      "team",
    ]);
  });

  it("a cluster-scoped kind only with a grant for it", () => {
    expect(sweepPlan(watchRule(), own, NAMESPACE, [obj("n")])).toBeUndefined();
    const granted = scopeOf({ namespace: "team", name: "site" }, [
      {
        apiVersion: "applygate.dev/v1alpha1",
        kind: "ScopeGrant",
        metadata: { name: "g" },
        spec: { targets: [{ namespace: "team", name: "site" }], kinds: [{ group: "", kind: "Namespace" }] },
      } as never,
    ]);
    expect(sweepPlan(watchRule(), granted, NAMESPACE, [obj("n")])).toEqual({
      apiVersion: "v1",
      kind: "Namespace",
      namespaces: [],
      live: ["/n"],
    });
  });
});
