import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { Attempt } from "../queue/contract.js";
import type { KObject } from "../queue/kube/index.js";
import { makeAttempt } from "../test/support/attempts.js";
import type { BroughtRead } from "./governance-check.js";
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

describe("approval at the moment of the write: what the apply would bring, never the attempt's word", () => {
  const A = "a".repeat(40);
  const B = "b".repeat(40);
  const C = "c".repeat(40);
  const LAST = "f".repeat(40);
  const requiring = (approved: readonly string[], approval: Record<string, unknown> = { manual: true }) => {
    const c = claim();
    (c.spec as Record<string, unknown>).approval = approval;
    c.metadata.annotations = Object.fromEntries(
      approved.map((x) => [`approve.applygate.dev/${x}`, "ada: CAB-1"]),
    );
    return c;
  };
  const at = "2026-12-01T13:00:00Z";
  const judgeBrought = (c: KObject, brought: BroughtRead | undefined, a: Attempt = attempt) =>
    judgeStanding({
      attempt: a,
      claim: c,
      grants: [],
      targets: new Map([["team-a/one", target()]]),
      now: Date.parse(at),
      ...(brought ? { brought } : {}),
    });
  const bringing = (commits: string[]): Extract<BroughtRead, { ok: true }> => ({
    ok: true,
    since: LAST,
    commits,
  });

  it("every commit the apply would bring is approved: it starts", () => {
    expect(judgeBrought(requiring([A, B]), bringing([A, B])).ok).toBe(true);
    // Nothing foreign since the last applied commit (only the worker's own): nothing to approve.
    expect(judgeBrought(requiring([]), bringing([])).ok).toBe(true);
  });

  it("an attempt listing approvals for its tip only does not cover the commits under it: NotApproved, naming them", () => {
    const forged = { ...attempt, commit: A, approvals: [{ commit: A, sources: ["Manual"], by: ["ada"] }] };
    const out = judgeBrought(requiring([A]), bringing([A, B, C]), forged);
    expect(out).toMatchObject({ ok: false, phase: "RequestFailed", reason: "NotApproved" });
    const message = (out as { message: string }).message;
    expect(message).toContain("2 commit(s) since ffffffffffff that lack approval");
    expect(message).toContain(`${B.slice(0, 12)} (Manual)`);
    expect(message).toContain(`${C.slice(0, 12)} (Manual)`);
    expect(message).not.toContain(`${A.slice(0, 12)} (`);
  });

  it("an approval withdrawn since the send: NotApproved", () => {
    const carrying = { ...attempt, approvals: [{ commit: B, sources: ["Manual"] }] };
    expect(judgeBrought(requiring([]), bringing([B]), carrying)).toMatchObject({
      ok: false,
      reason: "NotApproved",
    });
  });

  it("what the apply would bring not read, or not readable: nothing starts (it fails closed)", () => {
    expect(judgeBrought(requiring([A]), undefined)).toMatchObject({ ok: false, reason: "NotApproved" });
    const unreadable = judgeBrought(requiring([A]), { ok: false, message: `${A} is not on the branch` });
    expect(unreadable).toMatchObject({ ok: false, reason: "NotApproved" });
    expect((unreadable as { message: string }).message).toContain("cannot be read at the write");
  });

  it("a required commit status or signature counts only as read at the write", () => {
    const status = { commitStatus: { context: "ci", api: "github" } };
    expect(judgeBrought(requiring([], status), { ...bringing([A]), statuses: { [A]: "success" } }).ok).toBe(
      true,
    );
    expect(
      judgeBrought(requiring([], status), { ...bringing([A]), statuses: { [A]: "pending" } }),
    ).toMatchObject({
      ok: false,
      reason: "NotApproved",
    });
    const signature = { signature: { secretRef: { name: "keys" } } };
    const signed = { ok: true as const, key: "SHA256:k" };
    const unsigned = { ok: false as const, reason: "CommitUnsigned", message: "the commit is not signed" };
    expect(judgeBrought(requiring([], signature), { ...bringing([A]), signatures: { [A]: signed } }).ok).toBe(
      true,
    );
    const out = judgeBrought(requiring([], signature), {
      ...bringing([A, B]),
      signatures: { [A]: signed, [B]: unsigned },
    });
    expect((out as { message: string }).message).toContain(
      `${B.slice(0, 12)} (Signature: the commit is not signed)`,
    );
    // A signer the attempt names counts for nothing.
    const claimed = { ...attempt, approvals: [{ commit: B, sources: ["Signature"], signedBy: "SHA256:k" }] };
    expect(
      judgeBrought(requiring([], signature), { ...bringing([B]), signatures: { [B]: unsigned } }, claimed),
    ).toMatchObject({
      ok: false,
      reason: "NotApproved",
    });
  });

  it("property: it starts exactly when every brought commit is approved on the claim, whatever approvals the attempt lists", () => {
    const sha = fc.integer({ min: 0, max: 15 }).map((n) => n.toString(16).repeat(40));
    fc.assert(
      fc.property(
        fc.uniqueArray(sha, { maxLength: 6 }),
        fc.array(sha, { maxLength: 6 }),
        fc.option(fc.array(sha, { maxLength: 6 }), { nil: undefined }),
        (brought, approved, listed) => {
          const a: Attempt = {
            ...attempt,
            ...(listed ? { approvals: listed.map((x) => ({ commit: x, sources: ["Manual"] })) } : {}),
          };
          const out = judgeBrought(requiring(approved), bringing(brought), a);
          expect(out.ok).toBe(brought.every((x) => approved.includes(x)));
        },
      ),
    );
  });
});
