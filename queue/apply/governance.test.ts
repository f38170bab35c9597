import { describe, expect, it } from "vitest";
import { approvalsFor, approvedCommits, type GovernanceObject, governanceOf } from "../governance/objects.js";
import type { KObject } from "../kube/resources.js";
import { gatePatch } from "./governance.js";

const morning = { kind: "allow", schedule: "0 10 * * *", duration: "2h" } as const;

const claim = (o: Partial<KObject> = {}): KObject => ({
  kind: "FluxClaim",
  metadata: { name: "c", namespace: "ns" },
  spec: o.spec ?? {},
  ...(o.status ? { status: o.status } : {}),
});
const target = (spec: Record<string, unknown> = {}): KObject => ({
  kind: "GitTarget",
  metadata: { name: "t", namespace: "ns" },
  spec,
});
/** An Approval of the claim (a commit, or an override), made at `at`. */
const approval = (
  name: string,
  spec: Record<string, unknown>,
  at = "2026-12-01T10:00:00Z",
  o: { namespace?: string; claim?: { kind: string; name: string } } = {},
): GovernanceObject => ({
  kind: "Approval",
  metadata: { name, namespace: o.namespace ?? "ns", creationTimestamp: at },
  spec: { claimRef: o.claim ?? { kind: "FluxClaim", name: "c" }, ...spec },
});

describe("governanceOf: what the listing reads", () => {
  it("nothing set: nothing to carry", () => {
    expect(governanceOf(target(), claim())).toBeUndefined();
  });

  it("the claim's windows and the GitTarget's hold together, each as its own set; an empty list on the claim removes none", () => {
    const deny = { kind: "deny", schedule: "0 0 * * *", duration: "1h", timeZone: "Europe/Berlin" };
    expect(
      governanceOf(target({ changeWindows: [deny] }), claim({ spec: { changeWindows: [morning] } })),
    ).toEqual({
      changeWindows: [
        { from: "FluxClaim ns/c", ...morning },
        { from: "GitTarget ns/t", ...deny },
      ],
    });
    expect(governanceOf(target({ changeWindows: [deny] }), claim({ spec: { changeWindows: [] } }))).toEqual({
      changeWindows: [{ from: "GitTarget ns/t", ...deny }],
    });
  });

  it("the override is the newest Approval of the claim naming one, by its approver; the status says what was used", () => {
    const c = claim({ status: { governance: { overrideUsed: { value: "INC-6", token: "t-1" } } } });
    const given = [
      approval("b", { changeWindowOverride: "INC-7", approver: "ada" }, "2026-12-01T10:00:02Z"),
      approval("a", { changeWindowOverride: "INC-6", approver: "grace" }, "2026-12-01T10:00:01Z"),
      // Another claim's, another namespace's: not this claim's.
      approval("x", { changeWindowOverride: "INC-9", approver: "eve" }, "2026-12-01T10:00:09Z", {
        claim: { kind: "FluxClaim", name: "other" },
      }),
      approval("y", { changeWindowOverride: "INC-9", approver: "eve" }, "2026-12-01T10:00:09Z", {
        namespace: "elsewhere",
      }),
      approval("z", { changeWindowOverride: "INC-9", approver: "eve" }, "2026-12-01T10:00:09Z", {
        claim: { kind: "ArgoCDClaim", name: "c" },
      }),
    ];
    expect(approvalsFor(c, given).map((a) => a.metadata.name)).toEqual(["b", "a"]);
    expect(governanceOf(target(), c, given)).toEqual({
      changeWindows: [],
      override: { value: "INC-7", by: "ada" },
      overrideUsed: { value: "INC-6", token: "t-1" },
    });
  });
});

describe("approvals of the claim", () => {
  const sha = "c".repeat(40);

  it("the commits approved are the Approvals naming them, with each approver and note; annotations approve nothing", () => {
    const c = {
      ...claim({ spec: { approval: { manual: true } } }),
      metadata: {
        name: "c",
        namespace: "ns",
        annotations: { [`approve.applygate.dev/${"d".repeat(40)}`]: "eve: self-approved" },
      },
    } as KObject;
    const given = [
      approval("two", { commit: sha, approver: "grace", note: "CAB-13" }, "2026-12-01T10:00:02Z"),
      approval("one", { commit: sha, approver: "ada", note: "CAB-12" }, "2026-12-01T10:00:01Z"),
      approval("short", { commit: "abc", approver: "ada" }),
    ];
    expect(governanceOf(target(), c, given)).toEqual({
      changeWindows: [],
      approval: { sources: ["Manual"] },
      approved: { [sha]: { Manual: { by: "ada, grace", note: "CAB-12; CAB-13" } } },
    });
    expect(approvedCommits([])).toEqual({});
  });

  it("every source the claim or its GitTarget sets is required: a claim's empty approval weakens nothing", () => {
    expect(governanceOf(target({ approval: { manual: true } }), claim())?.approval).toEqual({
      sources: ["Manual"],
    });
    expect(
      governanceOf(target({ approval: { manual: true } }), claim({ spec: { approval: {} } }))?.approval,
    ).toEqual({ sources: ["Manual"] });
    const cs = { context: "release/approved", api: "github" };
    expect(
      governanceOf(
        target({ approval: { manual: true } }),
        claim({ spec: { approval: { commitStatus: cs } } }),
      )?.approval,
    ).toEqual({ sources: ["Manual", "CommitStatus"], commitStatus: cs });
  });

  it("a source the claim and its GitTarget set differently is a conflict, never one of them quietly", () => {
    const a = { context: "release/approved", api: "github" };
    const b = { context: "ci/anything", api: "github" };
    expect(
      governanceOf(
        target({ approval: { commitStatus: a } }),
        claim({ spec: { approval: { commitStatus: b } } }),
      )?.approval?.conflict,
    ).toBe(
      "FluxClaim ns/c and GitTarget ns/t set approval.commitStatus differently (set it in one of them, or alike in both)",
    );
    expect(
      governanceOf(
        target({ approval: { commitStatus: a } }),
        claim({ spec: { approval: { commitStatus: a } } }),
      )?.approval,
    ).toEqual({ sources: ["CommitStatus"], commitStatus: a });
    // The same Secret name in two namespaces is two sets of keys.
    const sig = { signature: { secretRef: { name: "keys" } } };
    const other = { ...target({ approval: sig }), metadata: { name: "t", namespace: "team" } };
    expect(governanceOf(other, claim({ spec: { approval: sig } }))?.approval?.conflict).toMatch(
      /set approval.signature differently/,
    );
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
