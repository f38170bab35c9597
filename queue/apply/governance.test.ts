import { describe, expect, it } from "vitest";
import type { KubeLike } from "./catalog.js";
import { annotationSetBy, gatePatch, governanceOf } from "./governance.js";

const ANNOTATION = "applygate.dev/change-window-override";
const morning = { kind: "allow", schedule: "0 10 * * *", duration: "2h" } as const;

const claim = (
  o: Partial<KubeLike> & { annotations?: Record<string, string>; managedFields?: unknown[] } = {},
): KubeLike => ({
  metadata: {
    name: "c",
    namespace: "ns",
    ...(o.annotations ? { annotations: o.annotations } : {}),
    ...(o.managedFields ? { managedFields: o.managedFields } : {}),
  } as KubeLike["metadata"],
  spec: o.spec ?? {},
  ...(o.status ? { status: o.status } : {}),
});
const target = (spec: Record<string, unknown> = {}): KubeLike => ({
  metadata: { name: "t", namespace: "ns" },
  spec,
});

describe("governanceOf: what the listing reads", () => {
  it("nothing set: nothing to carry", () => {
    expect(governanceOf(target(), claim())).toBeUndefined();
  });
  it("the claim's windows replace the GitTarget's; without them the GitTarget's are the default", () => {
    const deny = { kind: "deny", schedule: "0 0 * * *", duration: "1h", timeZone: "Europe/Berlin" };
    expect(
      governanceOf(target({ changeWindows: [deny] }), claim({ spec: { changeWindows: [morning] } })),
    ).toEqual({
      changeWindows: [morning],
    });
    expect(governanceOf(target({ changeWindows: [deny] }), claim())).toEqual({ changeWindows: [deny] });
    // An empty list on the claim says: no windows, whatever the GitTarget says.
    expect(
      governanceOf(target({ changeWindows: [deny] }), claim({ spec: { changeWindows: [] } })),
    ).toBeUndefined();
  });
  it("the override, who set it (the field manager), and what the status records as used", () => {
    const c = claim({
      annotations: { [ANNOTATION]: "INC-7" },
      managedFields: [
        { manager: "helm", fieldsV1: { "f:metadata": { "f:labels": {} } } },
        {
          manager: "kubectl-annotate",
          fieldsV1: { "f:metadata": { "f:annotations": { [`f:${ANNOTATION}`]: {} } } },
        },
      ],
      status: { governance: { overrideUsed: { value: "INC-6", token: "t-1" } } },
    });
    expect(annotationSetBy(c, ANNOTATION)).toBe("kubectl-annotate");
    expect(governanceOf(target(), c)).toEqual({
      changeWindows: [],
      override: { value: "INC-7", by: "kubectl-annotate" },
      overrideUsed: { value: "INC-6", token: "t-1" },
    });
  });
});

describe("approvals on the claim", () => {
  it("approval required by the claim (or its GitTarget), and the commits approved by annotation with who set each", () => {
    const sha = "c".repeat(40);
    const c = claim({
      spec: { approval: { manual: true } },
      annotations: { [`approve.applygate.dev/${sha}`]: "CAB-12", "approve.applygate.dev/short": "x" },
      managedFields: [
        {
          manager: "kubectl-annotate",
          fieldsV1: { "f:metadata": { "f:annotations": { [`f:approve.applygate.dev/${sha}`]: {} } } },
        },
      ],
    });
    expect(governanceOf(target(), c)).toEqual({
      changeWindows: [],
      approval: { sources: ["Manual"] },
      approved: { [sha]: { Manual: { by: "kubectl-annotate", note: "CAB-12" } } },
    });
    expect(governanceOf(target({ approval: { manual: true } }), claim())?.approval).toEqual({
      sources: ["Manual"],
    });
    expect(
      governanceOf(target({ approval: { manual: true } }), claim({ spec: { approval: {} } })),
    ).toBeUndefined();
  });
});

describe("gatePatch: the claim shows the gate", () => {
  const now = Date.parse("2026-12-01T13:00:00Z");
  const closed = {
    condition: { status: "False" as const, reason: "OutsideChangeWindow" as const, message: "m" },
    changeWindow: { open: false, nextOpening: "2026-12-02T10:00:00.000Z" },
  };
  it("adds ApplyAllowed beside the sidecar's conditions and sets status.governance", () => {
    const ready = {
      type: "Ready",
      status: "True",
      reason: "Held",
      message: "",
      lastTransitionTime: "2026-01-01T00:00:00Z",
    };
    const p = gatePatch(claim({ status: { conditions: [ready] } }), closed, now);
    expect(p).toEqual({
      conditions: [
        ready,
        {
          type: "ApplyAllowed",
          status: "False",
          reason: "OutsideChangeWindow",
          message: "m",
          lastTransitionTime: "2026-12-01T13:00:00.000Z",
        },
      ],
      governance: {
        changeWindow: { open: false, nextOpening: "2026-12-02T10:00:00.000Z", closesAt: null },
        syncWindow: null,
        overrideUsed: null,
        awaitingApproval: null,
      },
    });
  });
  it("shows an Argo CD claim's sync window, and drops one the claim no longer has", () => {
    const blocked = {
      condition: { status: "False" as const, reason: "BlockedBySyncWindow" as const, message: "m" },
      syncWindow: { open: false, nextOpening: "2026-12-01T19:00:00.000Z" },
    };
    const p = gatePatch(claim({}), blocked, now);
    expect(p?.governance).toEqual({
      changeWindow: null,
      syncWindow: { open: false, nextOpening: "2026-12-01T19:00:00.000Z", closesAt: null },
      overrideUsed: null,
      awaitingApproval: null,
    });
    const shown = { governance: { syncWindow: blocked.syncWindow }, conditions: p?.conditions };
    expect(gatePatch(claim({ status: shown }), blocked, now)).toBeUndefined();
    const gone = gatePatch(claim({ status: shown }), { ...closed }, now);
    expect(gone?.governance).toMatchObject({ syncWindow: null });
  });
  it("writes nothing when the claim already shows it; keeps lastTransitionTime while the status holds", () => {
    const shown = {
      conditions: [
        {
          type: "ApplyAllowed",
          status: "False",
          reason: "OutsideChangeWindow",
          message: "m",
          lastTransitionTime: "2026-11-30T00:00:00Z",
        },
      ],
      governance: { changeWindow: closed.changeWindow },
    };
    expect(gatePatch(claim({ status: shown }), closed, now)).toBeUndefined();
    const moved = gatePatch(
      claim({ status: shown }),
      { ...closed, condition: { ...closed.condition, message: "n" } },
      now,
    );
    expect((moved?.conditions as { lastTransitionTime: string }[] | undefined)?.[0]?.lastTransitionTime).toBe(
      "2026-11-30T00:00:00Z",
    );
  });
  it("a claim whose governance went away loses the condition and the field", () => {
    const shown = {
      conditions: [
        {
          type: "ApplyAllowed",
          status: "True",
          reason: "InsideChangeWindow",
          message: "",
          lastTransitionTime: "2026-11-30T00:00:00Z",
        },
      ],
      governance: { changeWindow: { open: true } },
    };
    expect(gatePatch(claim({ status: shown }), { condition: null }, now)).toEqual({
      conditions: [],
      governance: null,
    });
  });
});
