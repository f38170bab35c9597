import { describe, expect, it } from "vitest";
import { applierGrant, type GrantView, type HoldRequest, mayHold } from "./applier-grant.js";

const req: HoldRequest = {
  claimKind: "FluxClaim",
  claimNamespace: "team-a",
  applierNamespace: "flux-system",
  applierName: "infra",
};
const grant = (spec: GrantView["spec"], namespace = "flux-system"): GrantView => ({ namespace, spec });

describe("mayHold: who may hold an applier", () => {
  it("a claim holds an applier in its own namespace without a grant", () => {
    expect(mayHold({ ...req, claimNamespace: "flux-system" }, [])).toBe(true);
  });

  it("an applier in another namespace needs a grant there naming the claim's namespace", () => {
    expect(mayHold(req, [])).toBe(false);
    expect(mayHold(req, [grant({ from: [{ namespace: "team-a" }] })])).toBe(true);
    expect(mayHold(req, [grant({ from: [{ namespace: "team-b" }] })])).toBe(false);
    // A grant in the claim's own namespace (or any other) grants nothing.
    expect(mayHold(req, [grant({ from: [{ namespace: "team-a" }] }, "team-a")])).toBe(false);
  });

  it("a grant narrowed to a claim kind or to applier names covers only those", () => {
    expect(mayHold(req, [grant({ from: [{ namespace: "team-a", kind: "FluxClaim" }] })])).toBe(true);
    expect(mayHold(req, [grant({ from: [{ namespace: "team-a", kind: "ArgoCDClaim" }] })])).toBe(false);
    expect(mayHold(req, [grant({ from: [{ namespace: "team-a" }], to: [{ name: "infra" }] })])).toBe(true);
    expect(mayHold(req, [grant({ from: [{ namespace: "team-a" }], to: [{ name: "apps" }] })])).toBe(false);
    expect(mayHold(req, [grant({ from: [{ namespace: "team-a" }], to: [] })])).toBe(false);
  });

  it("no wildcard: '*' is not a namespace and the schema refuses it", () => {
    expect(mayHold(req, [grant({ from: [{ namespace: "*" }] })])).toBe(false);
    const parsed = applierGrant.safeParse({
      apiVersion: "applygate.dev/v1alpha1",
      kind: "ApplierGrant",
      metadata: { name: "g", namespace: "flux-system" },
      spec: { from: [{ namespace: "*" }] },
    });
    expect(parsed.success).toBe(false);
  });
});
