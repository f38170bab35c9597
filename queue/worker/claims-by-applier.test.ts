import { describe, expect, it } from "vitest";
import { type KObject, objectKey } from "../kube/resources.js";
import { ClaimsByApplier } from "./claims-by-applier.js";

const claim = (name: string, ks: string, ksNamespace?: string): KObject => ({
  apiVersion: "applygate.dev/v1alpha1",
  kind: "FluxClaim",
  metadata: { name, namespace: "team" },
  spec: { kustomizationRef: { name: ks, ...(ksNamespace ? { namespace: ksNamespace } : {}) } },
});

function world() {
  const store = new Map<string, KObject>();
  let listings = 0;
  const index = new ClaimsByApplier("FluxClaim", {
    list: () => {
      listings++;
      return [...store.values()];
    },
    get: (name, ns) => store.get(`${ns ?? ""}/${name}`),
  });
  const put = (c: KObject) => {
    store.set(objectKey(c), c);
    index.changed(c, false);
  };
  const drop = (c: KObject) => {
    store.delete(objectKey(c));
    index.changed(c, true);
  };
  const names = (ns: string, name: string) =>
    index
      .naming(ns, name)
      .map((c) => c.metadata.name)
      .sort();
  return { put, drop, names, listings: () => listings };
}

describe("ClaimsByApplier", () => {
  it("finds the claims naming an applier, in the claim's namespace unless the reference names another", () => {
    const w = world();
    w.put(claim("a", "web"));
    w.put(claim("b", "web", "flux-system"));
    w.put(claim("c", "web"));
    w.put({ ...claim("d", "web"), spec: { kustomizationRef: { name: 7 } } });
    expect(w.names("team", "web")).toEqual(["a", "c"]);
    expect(w.names("flux-system", "web")).toEqual(["b"]);
  });

  it("follows claims changed and deleted after it was built, listing the informer once", () => {
    const w = world();
    w.put(claim("a", "web"));
    expect(w.names("team", "web")).toEqual(["a"]);
    for (let i = 0; i < 100; i++) w.put(claim(`n${i}`, `app${i}`));
    w.put(claim("a", "shop"));
    expect(w.names("team", "web")).toEqual([]);
    expect(w.names("team", "shop")).toEqual(["a"]);
    w.drop(claim("a", "shop"));
    expect(w.names("team", "shop")).toEqual([]);
    expect(w.names("team", "app42")).toEqual(["n42"]);
    expect(w.listings()).toBe(1);
  });
});
