import { describe, expect, it } from "vitest";
import { applierWriteOf } from "./applier-write.js";

const M = ["kustomize-controller"];
const obj = (entries: { manager: string; time?: string }[], rv = "42") => ({
  metadata: { resourceVersion: rv, managedFields: entries.map((e) => ({ operation: "Apply", ...e })) },
});

describe("applierWriteOf", () => {
  it("the applier's entry alone at the newest time is its write", () => {
    const w = applierWriteOf(
      obj([
        { manager: "kubectl-edit", time: "2026-01-01T00:00:01Z" },
        { manager: "kustomize-controller", time: "2026-01-01T00:00:02Z" },
      ]),
      M,
    );
    expect(w).toEqual({
      manager: "kustomize-controller",
      writtenAt: "2026-01-01T00:00:02Z",
      resourceVersion: "42",
    });
  });
  it("a tie with another manager in the same second is not the applier's alone", () => {
    expect(
      applierWriteOf(
        obj([
          { manager: "kubectl-edit", time: "2026-01-01T00:00:02Z" },
          { manager: "kustomize-controller", time: "2026-01-01T00:00:02Z" },
        ]),
        M,
      ),
    ).toBeUndefined();
  });
  it("another manager newer than the applier: not the applier's write", () => {
    expect(
      applierWriteOf(
        obj([
          { manager: "kustomize-controller", time: "2026-01-01T00:00:01Z" },
          { manager: "kubectl-edit", time: "2026-01-01T00:00:02Z" },
        ]),
        M,
      ),
    ).toBeUndefined();
  });
  it("no timed entries: nothing to say", () => {
    expect(applierWriteOf(obj([{ manager: "kustomize-controller" }]), M)).toBeUndefined();
    expect(applierWriteOf({ metadata: {} }, M)).toBeUndefined();
  });
});
