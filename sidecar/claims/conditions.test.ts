import { describe, expect, it } from "vitest";
import { findCondition, safeReason, sameConditions, setCondition, setConditions } from "./conditions.js";

const T0 = "2026-01-01T00:00:00.000Z";
const T1 = "2026-01-01T00:01:00.000Z";

describe("conditions", () => {
  it("lastTransitionTime moves only when the status changes", () => {
    const a = setCondition([], { type: "Ready", status: "True", reason: "Suspended" }, T0);
    const b = setCondition(a, { type: "Ready", status: "True", reason: "Applying", message: "op" }, T1);
    expect(findCondition(b, "Ready")).toMatchObject({
      reason: "Applying",
      message: "op",
      lastTransitionTime: T0,
    });
    const c = setCondition(b, { type: "Ready", status: "False", reason: "OperationUnresolved" }, T1);
    expect(findCondition(c, "Ready")?.lastTransitionTime).toBe(T1);
  });

  it("conditions are kept in a fixed order: Ready, InControl, Configured, then others", () => {
    const list = setConditions(
      [],
      [
        { type: "Other", status: "True", reason: "X" },
        { type: "Configured", status: "True", reason: "Bound" },
        { type: "Ready", status: "True", reason: "Suspended" },
        { type: "InControl", status: "True", reason: "Suspended" },
      ],
      T0,
    );
    expect(list.map((c) => c.type)).toEqual(["Ready", "InControl", "Configured", "Other"]);
  });

  it("an unchanged set compares equal, so no write is needed", () => {
    const a = setCondition([], { type: "Ready", status: "True", reason: "Suspended" }, T0);
    const b = setCondition(a, { type: "Ready", status: "True", reason: "Suspended" }, T1);
    expect(sameConditions(a, b)).toBe(true);
    const c = setCondition(a, { type: "Ready", status: "True", reason: "Applying" }, T1);
    expect(sameConditions(a, c)).toBe(false);
  });

  it("a reason the API server would refuse becomes Unknown", () => {
    expect(safeReason("Held By")).toBe("Unknown");
    expect(safeReason("HeldByAnotherClaim")).toBe("HeldByAnotherClaim");
  });
});
