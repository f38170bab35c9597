import { describe, expect, it } from "vitest";
import { type RankEntry, rankClaims, waitingCondition } from "./ranking.js";

function entry(name: string, over: Partial<RankEntry> = {}): RankEntry {
  return {
    namespace: "apps",
    name,
    applier: "flux-system/web",
    creationTimestamp: "2026-01-01T00:00:00Z",
    referenced: true,
    hasFinalizer: false,
    operationInFlight: false,
    ...over,
  };
}

describe("one claim per applier", () => {
  it("a claim neither referenced nor carrying the finalizer is not in line", () => {
    const r = rankClaims([entry("a", { referenced: false }), entry("b")]);
    expect(r.get("apps/a")).toEqual({ standing: "NotInLine" });
    expect(r.get("apps/b")).toEqual({ standing: "Holder" });
  });

  it("a claim carrying the finalizer stays in line though no GitTarget references it (hand-back)", () => {
    const r = rankClaims([
      entry("a", { referenced: false, hasFinalizer: true, creationTimestamp: "2026-02-01T00:00:00Z" }),
      entry("b"),
    ]);
    expect(r.get("apps/a")).toEqual({ standing: "Holder" });
    expect(r.get("apps/b")).toEqual({ standing: "Waiting", holder: "apps/a" });
  });

  it("an in-flight operation goes first, before the finalizer holder", () => {
    const r = rankClaims([
      entry("holder", { hasFinalizer: true }),
      entry("busy", { operationInFlight: true, creationTimestamp: "2026-03-01T00:00:00Z" }),
    ]);
    expect(r.get("apps/busy")).toEqual({ standing: "Holder" });
    expect(r.get("apps/holder")).toEqual({ standing: "Waiting", holder: "apps/busy" });
  });

  it("the finalizer holder goes before an older claim", () => {
    const r = rankClaims([
      entry("old", { creationTimestamp: "2025-01-01T00:00:00Z" }),
      entry("holder", { hasFinalizer: true, creationTimestamp: "2026-05-01T00:00:00Z" }),
    ]);
    expect(r.get("apps/holder")).toEqual({ standing: "Holder" });
  });

  it("then the oldest creationTimestamp", () => {
    const r = rankClaims([
      entry("young", { creationTimestamp: "2026-05-01T00:00:00Z" }),
      entry("old", { creationTimestamp: "2025-01-01T00:00:00Z" }),
    ]);
    expect(r.get("apps/old")).toEqual({ standing: "Holder" });
    expect(r.get("apps/young")).toEqual({ standing: "Waiting", holder: "apps/old" });
  });

  it("then namespace, then name", () => {
    const r = rankClaims([entry("b", { namespace: "z" }), entry("b"), entry("a", { namespace: "z" })]);
    expect(r.get("apps/b")).toEqual({ standing: "Holder" });
    expect(r.get("z/a")).toEqual({ standing: "Waiting", holder: "apps/b" });
    const r2 = rankClaims([entry("b", { namespace: "z" }), entry("a", { namespace: "z" })]);
    expect(r2.get("z/a")).toEqual({ standing: "Holder" });
  });

  it("claims of different appliers do not compete", () => {
    const r = rankClaims([entry("a"), entry("b", { applier: "flux-system/other" })]);
    expect(r.get("apps/a")).toEqual({ standing: "Holder" });
    expect(r.get("apps/b")).toEqual({ standing: "Holder" });
  });

  it("rules can be switched off for kinds without in-flight and finalizer precedence", () => {
    const r = rankClaims(
      [
        entry("old"),
        entry("busy", {
          operationInFlight: true,
          hasFinalizer: true,
          creationTimestamp: "2026-06-01T00:00:00Z",
        }),
      ],
      { inFlightFirst: false, finalizerFirst: false },
    );
    expect(r.get("apps/old")).toEqual({ standing: "Holder" });
  });

  it("a waiting claim is Configured=False HeldByAnotherClaim naming the holder", () => {
    expect(waitingCondition("apps/a", 3)).toMatchObject({
      type: "Configured",
      status: "False",
      reason: "HeldByAnotherClaim",
      observedGeneration: 3,
    });
    expect(waitingCondition("apps/a").message).toContain("apps/a");
  });
});
