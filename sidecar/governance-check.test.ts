import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { Attempt } from "../queue/contract.js";
import type { KObject } from "../queue/kube/index.js";
import { makeAttempt } from "../test/support/attempts.js";
import { inControlStatus } from "../test/support/claims.js";
import type { BroughtRead } from "./governance-check.js";
import { judgeStanding } from "./standing.js";

const attempt = makeAttempt();
const morning = { kind: "allow", schedule: "0 10 * * *", duration: "2h" };

/** An Approval of the claim, given by ada. */
const approval = (name: string, spec: Record<string, unknown>): KObject => ({
  kind: "Approval",
  metadata: { name, namespace: "team-a" },
  spec: { claimRef: { kind: "FluxClaim", name: "web" }, approver: "ada", ...spec },
});

function claim(o: { windows?: unknown[]; used?: { value: string; token: string } } = {}): KObject {
  return {
    kind: "FluxClaim",
    metadata: {
      name: "web",
      namespace: "team-a",
    },
    spec: { kustomizationRef: { name: "web" }, ...(o.windows ? { changeWindows: o.windows } : {}) },
    status: { ...inControlStatus(), ...(o.used ? { governance: { overrideUsed: o.used } } : {}) },
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

const judge = (c: KObject, now: string, a: Attempt = attempt, t = target(), approvals: KObject[] = []) =>
  judgeStanding({
    attempt: a,
    claim: c,
    grants: [],
    targets: new Map([["team-a/one", t]]),
    now: Date.parse(now),
    approvals,
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

  it("the claim's windows and its GitTarget's all hold: neither opens what the other closes", () => {
    const deny = [{ kind: "deny", schedule: "0 0 * * *", duration: "24h" }];
    const late = [{ kind: "allow", schedule: "0 11 * * *", duration: "2h" }];
    expect(judge(claim(), "2026-12-01T13:00:00Z", attempt, target([morning])).ok).toBe(false);
    expect(judge(claim({ windows: deny }), "2026-12-01T11:00:00Z", attempt, target([morning])).ok).toBe(
      false,
    );
    expect(judge(claim({ windows: [morning] }), "2026-12-01T11:00:00Z", attempt, target(deny)).ok).toBe(
      false,
    );
    // An empty list on the claim takes nothing away.
    expect(judge(claim({ windows: [] }), "2026-12-01T13:00:00Z", attempt, target([morning])).ok).toBe(false);
    // Allowed 10-12 by the claim and 11-13 by the GitTarget: 11-12 only.
    const both = (now: string) => judge(claim({ windows: [morning] }), now, attempt, target(late)).ok;
    expect([
      both("2026-12-01T10:30:00Z"),
      both("2026-12-01T11:30:00Z"),
      both("2026-12-01T12:30:00Z"),
    ]).toEqual([false, true, false]);
  });

  it("outside the window, only the override the attempt carries, still an Approval of the claim and not used by another apply", () => {
    const carrying = { ...attempt, override: { changeWindow: "INC-7" } };
    const now = "2026-12-01T13:00:00Z";
    const inc7 = [approval("inc-7", { changeWindowOverride: "INC-7" })];
    const windowed = (used?: { value: string; token: string }) =>
      claim({ windows: [morning], ...(used ? { used } : {}) });
    expect(judge(windowed(), now, carrying, target(), inc7).ok).toBe(true);
    // Used by this very attempt (the worker records it at the send): still good.
    expect(judge(windowed({ value: "INC-7", token: "t1" }), now, carrying, target(), inc7).ok).toBe(true);
    // Used by another apply, withdrawn or replaced, or not carried at all: refused.
    expect(judge(windowed({ value: "INC-7", token: "t0" }), now, carrying, target(), inc7).ok).toBe(false);
    expect(judge(windowed(), now, carrying)).toMatchObject({ reason: "OutsideChangeWindow" });
    const inc8 = [approval("inc-8", { changeWindowOverride: "INC-8" })];
    expect(judge(windowed(), now, carrying, target(), inc8).ok).toBe(false);
    expect(judge(windowed(), now, attempt, target(), inc7).ok).toBe(false);
    // An annotation on the claim, which any editor may set, overrides nothing.
    const annotated = windowed();
    annotated.metadata.annotations = { "applygate.dev/change-window-override": "INC-7" };
    expect(judge(annotated, now, carrying).ok).toBe(false);
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
  /** A claim requiring `approval`, with an Approval of each of `approved`. */
  const requiring = (approved: readonly string[], rules: Record<string, unknown> = { manual: true }) => {
    const c = claim();
    (c.spec as Record<string, unknown>).approval = rules;
    return { claim: c, approvals: approved.map((x, i) => approval(`a${i}`, { commit: x, note: "CAB-1" })) };
  };
  const at = "2026-12-01T13:00:00Z";
  const judgeBrought = (
    c: { claim: KObject; approvals: KObject[] },
    brought: BroughtRead | undefined,
    a: Attempt = attempt,
    t: KObject = target(),
  ) =>
    judgeStanding({
      attempt: a,
      claim: c.claim,
      grants: [],
      targets: new Map([["team-a/one", t]]),
      now: Date.parse(at),
      approvals: c.approvals,
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

  it("an annotation on the claim, or an Approval of another claim, approves nothing", () => {
    const annotated = requiring([]);
    annotated.claim.metadata.annotations = { [`approve.applygate.dev/${A}`]: "eve" };
    expect(judgeBrought(annotated, bringing([A])).ok).toBe(false);
    const other = requiring([A]);
    other.approvals = other.approvals.map((x) => ({
      ...x,
      spec: { ...(x.spec as object), claimRef: { kind: "FluxClaim", name: "api" } },
    }));
    expect(judgeBrought(other, bringing([A])).ok).toBe(false);
  });

  it("a return to an older commit (not a descendant of the last applied one) needs an Approval naming it, whatever else approves it", () => {
    const status = { commitStatus: { context: "ci", api: "github" } };
    const back = { ...bringing([B]), notDescendant: true, statuses: { [B]: "success" } };
    const out = judgeBrought(requiring([], status), back);
    expect(out).toMatchObject({ ok: false, reason: "NotApproved" });
    expect((out as { message: string }).message).toContain(
      `${B.slice(0, 12)} (Manual: not a descendant of the last applied commit, so an Approval must name it)`,
    );
    expect(judgeBrought(requiring([B], status), back).ok).toBe(true);
  });

  it("approval settings the claim and its GitTarget set differently start nothing", () => {
    const c = requiring([A], { commitStatus: { context: "a", api: "github" } });
    const t = target();
    (t.spec as Record<string, unknown>).approval = { commitStatus: { context: "b", api: "github" } };
    const brought = { ...bringing([A]), statuses: { [A]: "success" } };
    expect(judgeBrought(c, brought, attempt, t)).toMatchObject({ ok: false, reason: "InvalidApproval" });
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
