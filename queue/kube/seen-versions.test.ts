import { describe, expect, it } from "vitest";
import { RESOURCES } from "./resources.js";
import { SeenVersions } from "./seen-versions.js";

const claim = (resourceVersion: string, extra: Record<string, unknown> = {}) => ({
  apiVersion: "applygate.dev/v1alpha1",
  kind: "FluxClaim",
  metadata: { name: "c", namespace: "ns", resourceVersion, ...extra },
});

describe("SeenVersions", () => {
  const t = RESOURCES.fluxClaim;

  it("a cached copy is current only at the newest version seen of that object", () => {
    const v = new SeenVersions();
    expect(v.current(t, claim("5"))).toBe(false); // nothing seen: read it
    v.saw(t, "ns", "c", claim("5"));
    expect(v.current(t, claim("5"))).toBe(true);
    expect(v.current(t, claim("4"))).toBe(false); // the cache lags our read
    v.saw(t, "ns", "c", claim("7")); // our write's answer
    expect(v.current(t, claim("5"))).toBe(false); // the cache lags our write
    expect(v.current(t, claim("9"))).toBe(false); // somebody wrote since: read it
    expect(v.current(t, { ...claim("7"), metadata: { ...claim("7").metadata, name: "other" } })).toBe(false);
    expect(v.current(t, undefined)).toBe(false);
  });

  it("an object read as missing, or whose last finalizer went while it was deleted, is gone", () => {
    const v = new SeenVersions();
    v.saw(t, "ns", "c", claim("5"));
    v.saw(t, "ns", "c", undefined);
    expect(v.current(t, claim("5"))).toBe(false);
    v.saw(t, "ns", "c", claim("8", { deletionTimestamp: "2026-12-05T00:00:00Z", finalizers: ["x"] }));
    expect(v.current(t, claim("8"))).toBe(true); // still there: a finalizer holds it
    v.saw(t, "ns", "c", claim("9", { deletionTimestamp: "2026-12-05T00:00:00Z", finalizers: [] }));
    expect(v.current(t, claim("9"))).toBe(false);
  });

  it("remembers the newest objects up to its size, forgetting the oldest", () => {
    const v = new SeenVersions(2);
    for (const name of ["a", "b", "c"])
      v.saw(t, "ns", name, { ...claim("1"), metadata: { name, namespace: "ns", resourceVersion: "1" } });
    const of = (name: string) => ({
      ...claim("1"),
      metadata: { name, namespace: "ns", resourceVersion: "1" },
    });
    expect(v.current(t, of("a"))).toBe(false);
    expect(v.current(t, of("b"))).toBe(true);
    expect(v.current(t, of("c"))).toBe(true);
  });
});
