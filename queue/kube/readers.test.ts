import { describe, expect, it } from "vitest";
import { mayHold } from "../crds/index.js";
import {
  applierRefOf,
  claimStatusField,
  conditionIn,
  fieldOf,
  grantViewOf,
  isRecord,
  partOf,
  storedConditionsOf,
  targetField,
  targetSpecFields,
} from "./readers.js";

const T0 = "2026-01-01T00:00:00Z";

describe("field readers", () => {
  it("tell a JSON object from every other value", () => {
    expect([{}, { a: 1 }].map(isRecord)).toEqual([true, true]);
    expect([null, undefined, [], "x", 1, true].map(isRecord)).toEqual([
      false,
      false,
      false,
      false,
      false,
      false,
    ]);
  });

  it("give a field that fits as stored: the same value, nothing stripped or defaulted", () => {
    const providerRef = { name: "repo", namespace: "git", extra: "kept" };
    const spec = { providerRef, branch: "main" };
    expect(targetField({ spec }, "providerRef")).toBe(providerRef);
    expect(targetField({ spec }, "branch")).toBe("main");
    // onRefusal has a default in the schema; absent, it reads absent.
    expect(targetField({ spec }, "onRefusal")).toBeUndefined();
  });

  it("read a field that does not fit as absent, without hiding the others", () => {
    const spec = {
      branch: "main",
      providerRef: { name: 5 },
      claimRef: { kind: "SomeClaim", name: "web" },
      suspend: "yes",
    };
    expect(targetField({ spec }, "providerRef")).toBeUndefined();
    expect(targetField({ spec }, "claimRef")).toBeUndefined();
    expect(targetField({ spec }, "suspend")).toBeUndefined();
    expect(targetField({ spec }, "branch")).toBe("main");
  });

  it("read nothing of a part that is absent or not an object", () => {
    for (const spec of [undefined, null, "x", [], 3])
      expect(fieldOf(targetSpecFields, spec, "branch"), String(spec)).toBeUndefined();
    expect(targetField(undefined, "branch")).toBeUndefined();
    expect(claimStatusField({}, "lastAppliedCommit")).toBeUndefined();
    expect(partOf(targetSpecFields, "x", "claimRef")).toBeUndefined();
  });

  it("hand on a part unread, for its fields to be read one at a time", () => {
    const claimRef = { kind: "FluxClaim", name: 7 };
    expect(partOf(targetSpecFields, { claimRef }, "claimRef")).toBe(claimRef);
  });
});

describe("applierRefOf", () => {
  it("reads the reference of the claim's kind, its namespace optional", () => {
    const spec = {
      kustomizationRef: { name: "web", namespace: "flux-system" },
      applicationRef: { name: "app" },
    };
    expect(applierRefOf("FluxClaim", { spec })).toEqual({ name: "web", namespace: "flux-system" });
    expect(applierRefOf("ArgoCDClaim", { spec })).toEqual({ name: "app" });
    expect(applierRefOf("WebhookClaim", { spec })).toBeUndefined();
    expect(applierRefOf("FluxClaim", { spec: { kustomizationRef: { namespace: "x" } } })).toBeUndefined();
    expect(applierRefOf("FluxClaim", {})).toBeUndefined();
  });
});

describe("grantViewOf", () => {
  const req = {
    claimKind: "FluxClaim",
    claimNamespace: "team-a",
    applierNamespace: "apps",
    applierName: "web",
  };

  it("reads a grant's spec, its namespace defaulting to the one it was listed in", () => {
    const g = grantViewOf({ metadata: {}, spec: { from: [{ namespace: "team-a" }] } }, "apps");
    expect(g).toEqual({ namespace: "apps", spec: { from: [{ namespace: "team-a" }] } });
    expect(mayHold(req, [g])).toBe(true);
  });

  it("a spec that does not fit grants nothing: a bad `to` never reads as every applier", () => {
    const bad = grantViewOf(
      { metadata: { namespace: "apps" }, spec: { from: [{ namespace: "team-a" }], to: [{ name: 5 }] } },
      "apps",
    );
    expect(bad).toEqual({ namespace: "apps" });
    expect(mayHold(req, [bad])).toBe(false);
    expect(grantViewOf({ metadata: { namespace: "apps" } }, "apps")).toEqual({ namespace: "apps" });
  });
});

describe("stored conditions", () => {
  const ours = {
    type: "Retrying",
    status: "True",
    reason: "BackingOff",
    message: "",
    lastTransitionTime: T0,
  };
  const theirs = { type: "Ready", status: "True", reason: "Held", message: "", lastTransitionTime: "t0" };

  it("keep another writer's condition as it is, whatever its other fields hold", () => {
    const list = storedConditionsOf({ status: { conditions: [theirs, ours] } });
    expect(list).toEqual([theirs, ours]);
    expect(list?.[0]).toBe(theirs);
  });

  it("read one condition whole, absent when it does not fit", () => {
    const list = storedConditionsOf({ status: { conditions: [theirs, ours] } });
    expect(conditionIn(list, "Retrying")).toBe(ours);
    expect(conditionIn(list, "Ready")).toBeUndefined();
    expect(conditionIn(list, "Other")).toBeUndefined();
  });

  it("are absent when the list is not a list of typed objects", () => {
    expect(storedConditionsOf({ status: { conditions: [{ status: "True" }] } })).toBeUndefined();
    expect(storedConditionsOf({ status: { conditions: "Ready" } })).toBeUndefined();
    expect(storedConditionsOf({})).toBeUndefined();
  });
});
