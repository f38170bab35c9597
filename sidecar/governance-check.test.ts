import { describe, expect, it } from "vitest";
import type { Attempt } from "../queue/contract.js";
import type { KObject } from "../queue/kube/index.js";
import { makeAttempt } from "../test/support/attempts.js";
import { judgeStanding } from "./standing.js";

const attempt = makeAttempt();
const morning = { kind: "allow", schedule: "0 10 * * *", duration: "2h" };

function claim(
  o: { windows?: unknown[]; override?: string; used?: { value: string; token: string } } = {},
): KObject {
  return {
    metadata: {
      name: "web",
      namespace: "team-a",
      ...(o.override ? { annotations: { "applygate.dev/change-window-override": o.override } } : {}),
    },
    spec: { kustomizationRef: { name: "web" }, ...(o.windows ? { changeWindows: o.windows } : {}) },
    status: {
      conditions: [
        {
          type: "InControl",
          status: "True",
          reason: "Suspended",
          message: "",
          lastTransitionTime: "2026-01-01T00:00:00Z",
        },
      ],
      ...(o.used ? { governance: { overrideUsed: o.used } } : {}),
    },
  };
}
const target = (windows?: unknown[]): KObject => ({
  metadata: { name: "one", namespace: "team-a", uid: "u1" },
  spec: {
    branch: "main",
    claimRef: { kind: "FluxClaim", name: "web" },
    ...(windows ? { changeWindows: windows } : {}),
  },
});

const judge = (c: KObject, now: string, a: Attempt = attempt, t = target()) =>
  judgeStanding({
    attempt: a,
    claim: c,
    grants: [],
    targets: new Map([["team-a/one", t]]),
    now: Date.parse(now),
  });

describe("change windows at the moment of the write", () => {
  it("an attempt sent inside the window starts while it is open", () => {
    expect(judge(claim({ windows: [morning] }), "2026-12-01T11:59:59Z").ok).toBe(true);
  });

  it("the window closed between the send and the write: RequestFailed, OutsideChangeWindow, nothing started", () => {
    expect(judge(claim({ windows: [morning] }), "2026-12-01T12:00:00Z")).toEqual({
      ok: false,
      phase: "RequestFailed",
      reason: "OutsideChangeWindow",
      message:
        "outside the change windows at 2026-12-01T12:00:00.000Z; next opening 2026-12-02T10:00:00.000Z",
    });
  });

  it("the GitTarget's windows count when the claim sets none, and the claim's replace them", () => {
    const deny = [{ kind: "deny", schedule: "0 0 * * *", duration: "24h" }];
    expect(judge(claim(), "2026-12-01T13:00:00Z", attempt, target([morning])).ok).toBe(false);
    expect(judge(claim({ windows: deny }), "2026-12-01T11:00:00Z", attempt, target([morning])).ok).toBe(
      false,
    );
    expect(judge(claim({ windows: [morning] }), "2026-12-01T11:00:00Z", attempt, target(deny)).ok).toBe(true);
  });

  it("outside the window, only the override the attempt carries, still on the claim and not used by another apply", () => {
    const carrying = { ...attempt, override: { changeWindow: "INC-7" } };
    const now = "2026-12-01T13:00:00Z";
    expect(judge(claim({ windows: [morning], override: "INC-7" }), now, carrying).ok).toBe(true);
    // Used by this very attempt (the worker records it at the send): still good.
    expect(
      judge(
        claim({ windows: [morning], override: "INC-7", used: { value: "INC-7", token: "t1" } }),
        now,
        carrying,
      ).ok,
    ).toBe(true);
    // Used by another apply, withdrawn or replaced on the claim, or not carried at all: refused.
    expect(
      judge(
        claim({ windows: [morning], override: "INC-7", used: { value: "INC-7", token: "t0" } }),
        now,
        carrying,
      ).ok,
    ).toBe(false);
    expect(judge(claim({ windows: [morning] }), now, carrying)).toMatchObject({
      reason: "OutsideChangeWindow",
    });
    expect(judge(claim({ windows: [morning], override: "INC-8" }), now, carrying).ok).toBe(false);
    expect(judge(claim({ windows: [morning], override: "INC-7" }), now).ok).toBe(false);
  });

  it("an unreadable window refuses with InvalidChangeWindow", () => {
    const bad = [{ kind: "allow", schedule: "0 10 * * *", duration: "2h", timeZone: "Mars/Olympus" }];
    expect(judge(claim({ windows: bad }), "2026-12-01T11:00:00Z")).toMatchObject({
      ok: false,
      reason: "InvalidChangeWindow",
    });
  });
});

describe("approval at the moment of the write", () => {
  const B = "b".repeat(40);
  const approvedClaim = (approve: boolean): KObject => {
    const c = claim();
    (c.spec as Record<string, unknown>).approval = { manual: true };
    if (approve) c.metadata.annotations = { [`approve.applygate.dev/${B}`]: "ada: CAB-1" };
    return c;
  };
  const carrying = { ...attempt, approvals: [{ commit: B, sources: ["Manual"] }] };

  it("the approvals the attempt carries still hold: it starts", () => {
    expect(judge(approvedClaim(true), "2026-12-01T13:00:00Z", carrying).ok).toBe(true);
  });
  it("an approval withdrawn since the send: RequestFailed, NotApproved", () => {
    expect(judge(approvedClaim(false), "2026-12-01T13:00:00Z", carrying)).toMatchObject({
      ok: false,
      phase: "RequestFailed",
      reason: "NotApproved",
    });
  });
  it("an attempt without approvals for a claim that requires them starts nothing", () => {
    expect(judge(approvedClaim(true), "2026-12-01T13:00:00Z")).toMatchObject({
      ok: false,
      reason: "NotApproved",
    });
  });
});
