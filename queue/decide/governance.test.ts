import { describe, expect, it } from "vitest";
import { A, B, Driver, flushes, listed, report, sends, sha } from "../../test/support/decisions.js";
import { approvalReadsAsked } from "../apply/governance.js";
import type { ChangeWindowSpec, TargetGovernance } from "../governance/model.js";
import { targetsNaming } from "./due.js";
import { approvalGate } from "./governance.js";
import type { DecisionAction } from "./model.js";

const KEY = "FluxClaim/apps/app";

/** 10:00-12:00 UTC every day. */
const morning: ChangeWindowSpec = { kind: "allow", schedule: "0 10 * * *", duration: "2h" };
const at = (iso: string) => Date.parse(iso);

function governed(g: TargetGovernance, uid = "u1") {
  return listed(uid, "app", { governance: g });
}

const gates = (out: DecisionAction[]) => out.flatMap((a) => (a.type === "RecordGate" ? [a.gate] : []));
const wakes = (out: DecisionAction[]) => out.flatMap((a) => (a.type === "ScheduleWake" ? [a.at] : []));

/** Settled at A inside the window, then the clock moved to `now` (outside it) and B was pushed. */
function foreignPushAt(now: string, g: TargetGovernance = { changeWindows: [morning] }) {
  const d = new Driver(at("2026-12-01T10:30:00Z"));
  d.settle([governed(g)], A);
  d.now = at(now);
  const out = d.on({ type: "Observed", tip: B, pushedByUs: false });
  return { d, out };
}

describe("change windows in the decision core", () => {
  it("outside an allowed window nothing is due: no flush, the reason stays pending, the claim says OutsideChangeWindow with the next opening", () => {
    const { d, out } = foreignPushAt("2026-12-01T13:00:00Z");
    expect(flushes(out)).toEqual([]);
    expect(d.state.appliers[KEY]?.pending.all).toEqual(["ForeignCommit"]);
    const [gate] = gates(out);
    expect(gate?.condition).toMatchObject({ status: "False", reason: "OutsideChangeWindow" });
    expect(gate?.condition?.message).toContain("next opening 2026-12-02T10:00:00.000Z");
    expect(gate?.changeWindow).toEqual({ open: false, nextOpening: "2026-12-02T10:00:00.000Z" });
  });

  it("the worker wakes at the opening and sends the apply then", () => {
    const { d, out } = foreignPushAt("2026-12-01T13:00:00Z");
    expect(wakes(out)).toContain(at("2026-12-02T10:00:00Z"));
    d.now = at("2026-12-02T09:59:59Z");
    expect(flushes(d.on({ type: "Tick" }))).toEqual([]);
    d.now = at("2026-12-02T10:00:00Z");
    const opened = d.on({ type: "Tick" });
    expect(gates(opened)[0]?.condition).toMatchObject({ status: "True", reason: "InsideChangeWindow" });
    const [attempt] = sends(d.publish(opened, B));
    expect(attempt?.targets[0]?.reason).toBe("ForeignCommit");
    expect(attempt?.override).toBeUndefined();
  });

  it("inside a window the apply goes at once, and the claim says until when", () => {
    const { d, out } = foreignPushAt("2026-12-01T11:00:00Z");
    expect(sends(d.publish(out, B))).toHaveLength(1);
    expect(d.state.appliers[KEY]?.gateRecorded).toContain("2026-12-01T12:00:00.000Z");
  });

  it("a deny window wins over an allow window", () => {
    const freeze: ChangeWindowSpec = { kind: "deny", schedule: "0 11 * * *", duration: "30m" };
    const { d, out } = foreignPushAt("2026-12-01T11:10:00Z", { changeWindows: [morning, freeze] });
    expect(flushes(out)).toEqual([]);
    expect(gates(out)[0]?.changeWindow?.nextOpening).toBe("2026-12-01T11:30:00.000Z");
    d.now = at("2026-12-01T11:30:00Z");
    expect(flushes(d.on({ type: "Tick" }))).toHaveLength(1);
  });

  it("an operation requested one second before a deny window starts still goes; one a second into it waits", () => {
    const freeze: ChangeWindowSpec = { kind: "deny", schedule: "0 18 * * *", duration: "1h" };
    expect(flushes(foreignPushAt("2026-12-01T17:59:59Z", { changeWindows: [freeze] }).out)).toHaveLength(1);
    expect(flushes(foreignPushAt("2026-12-01T18:00:00Z", { changeWindows: [freeze] }).out)).toEqual([]);
  });

  it("any GitTarget naming the claim brings its windows", () => {
    const d = new Driver(at("2026-12-01T10:30:00Z"));
    const freeze: ChangeWindowSpec = { kind: "deny", schedule: "0 10 * * *", duration: "1h" };
    d.settle([listed("u1", "app"), listed("u2", "app")], A);
    d.on({
      type: "TargetsListed",
      targets: [listed("u1", "app"), governed({ changeWindows: [freeze] }, "u2")],
    });
    expect(flushes(d.on({ type: "Observed", tip: B, pushedByUs: false }))).toEqual([]);
  });

  it("each object's allow windows hold on their own: another object's window opens nothing this one closes", () => {
    // The claim allows 10:00-12:00; its GitTarget allows 11:00-13:00: only 11:00-12:00 is open.
    const claimMorning: ChangeWindowSpec = { from: "FluxClaim apps/app", ...morning };
    const targetLate: ChangeWindowSpec = {
      from: "GitTarget apps/site",
      kind: "allow",
      schedule: "0 11 * * *",
      duration: "2h",
    };
    const g = { changeWindows: [claimMorning, targetLate] };
    const early = foreignPushAt("2026-12-01T10:30:00Z", g);
    expect(flushes(early.out)).toEqual([]);
    expect(gates(early.d.log).at(-1)?.changeWindow).toEqual({
      open: false,
      nextOpening: "2026-12-01T11:00:00.000Z",
    });
    const late = foreignPushAt("2026-12-01T12:30:00Z", g);
    expect(flushes(late.out)).toEqual([]);
    expect(gates(late.d.log).at(-1)?.changeWindow).toEqual({
      open: false,
      nextOpening: "2026-12-02T11:00:00.000Z",
    });
    const inside = foreignPushAt("2026-12-01T11:30:00Z", g);
    expect(sends(inside.d.publish(inside.out, B))).toHaveLength(1);
    expect(gates(inside.d.log).at(-1)?.changeWindow).toEqual({
      open: true,
      closesAt: "2026-12-01T12:00:00.000Z",
    });
    // One object's windows (no from, or the same from) still open where any of them does.
    const same = foreignPushAt("2026-12-01T12:30:00Z", {
      changeWindows: [claimMorning, { ...targetLate, from: "FluxClaim apps/app" }],
    });
    expect(sends(same.d.publish(same.out, B))).toHaveLength(1);
  });

  it("a claim without windows never gets a gate written", () => {
    const d = new Driver();
    d.settle([listed("u1", "app")], A);
    expect(gates(d.log)).toEqual([]);
  });

  describe("the one-apply override", () => {
    const offered = (value: string, extra: Partial<TargetGovernance> = {}): TargetGovernance => ({
      changeWindows: [morning],
      override: { value, by: "kubectl-annotate" },
      ...extra,
    });

    it("lets one attempt through outside the window, carrying the override, and is used up by it", () => {
      const { d, out } = foreignPushAt("2026-12-01T13:00:00Z", offered("hotfix-42"));
      expect(gates(out)[0]?.condition?.reason).toBe("ChangeWindowOverride");
      const sent = d.publish(out, B);
      const [attempt] = sends(sent);
      expect(attempt?.override).toEqual({ changeWindow: "hotfix-42", by: "kubectl-annotate" });
      // Recorded as used at the send, so a restart cannot spend it twice.
      expect(gates(sent)[0]).toMatchObject({
        condition: { status: "False", reason: "OutsideChangeWindow" },
        overrideUsed: { value: "hotfix-42", token: attempt?.token, by: "kubectl-annotate" },
      });
      expect(gates(d.on(report(attempt?.token ?? "", "app", "Succeeded", B)))).toEqual([]);
      // A second foreign push waits: the same value grants nothing again.
      expect(flushes(d.on({ type: "Observed", tip: sha("c"), pushedByUs: false }))).toEqual([]);
    });

    it("an attempt that started nothing gives the override back", () => {
      const { d, out } = foreignPushAt("2026-12-01T13:00:00Z", offered("hotfix-42"));
      const [attempt] = sends(d.publish(out, B));
      const back = d.on(report(attempt?.token ?? "", "app", "Stale"));
      expect(d.state.appliers[KEY]?.overrideUsed).toBeNull();
      const [again] = sends(d.publish(back, B));
      expect(again?.override?.changeWindow).toBe("hotfix-42");
    });

    it("a Failed apply used it: it ran", () => {
      const { d, out } = foreignPushAt("2026-12-01T13:00:00Z", offered("hotfix-42"));
      const [attempt] = sends(d.publish(out, B));
      d.on(report(attempt?.token ?? "", "app", "Failed", B));
      expect(d.state.appliers[KEY]?.overrideUsed?.value).toBe("hotfix-42");
      d.now += 10 * 60_000;
      expect(flushes(d.on({ type: "Tick" }))).toEqual([]);
    });

    it("a value the claim's status records as used grants nothing, also after a restart without saved state", () => {
      const used = { value: "hotfix-42", token: "old-1" };
      const { d, out } = foreignPushAt("2026-12-01T13:00:00Z", offered("hotfix-42", { overrideUsed: used }));
      expect(flushes(out)).toEqual([]);
      d.on({ type: "Restarted", tokenPrefix: "r", claims: [] });
      d.on({ type: "TargetsListed", targets: [governed(offered("hotfix-42", { overrideUsed: used }))] });
      expect(flushes(d.on({ type: "Observed", tip: B, pushedByUs: false }))).toEqual([]);
      // A new value grants one more.
      const fresh = d.on({
        type: "TargetsListed",
        targets: [governed(offered("hotfix-43", { overrideUsed: used }))],
      });
      expect(flushes(fresh)).toHaveLength(1);
    });

    it("inside the window the override is not used", () => {
      const { d, out } = foreignPushAt("2026-12-01T11:00:00Z", offered("hotfix-42"));
      const [attempt] = sends(d.publish(out, B));
      expect(attempt?.override).toBeUndefined();
      expect(d.state.appliers[KEY]?.overrideUsed).toBeUndefined();
    });
  });

  it("an unreadable window holds everything and says why", () => {
    const bad: ChangeWindowSpec = { kind: "allow", schedule: "61 10 * * *", duration: "2h" };
    const d = new Driver(at("2026-12-01T10:30:00Z"));
    d.on({ type: "TargetsListed", targets: [governed({ changeWindows: [bad] })] });
    const out = d.on({ type: "Observed", tip: A, pushedByUs: false });
    expect(flushes(out)).toEqual([]);
    expect(gates(d.log)[0]?.condition?.reason).toBe("InvalidChangeWindow");
  });
});

describe("approval in the decision core: the tip-approval rule", () => {
  const C = sha("c");
  const manual = (approved: TargetGovernance["approved"] = {}): TargetGovernance => ({
    changeWindows: [],
    approval: { sources: ["Manual"] },
    approved,
  });
  const read = (tip: string, since: string | null, commits: string[]) => ({
    type: "CommitsRead" as const,
    reads: { [KEY]: { tip, since, commits } },
  });

  /** Settled at A with approval required (A approved), then B pushed by somebody else. */
  function foreign(g: TargetGovernance = manual()) {
    const d = new Driver();
    d.on({ type: "TargetsListed", targets: [governed(manual({ [A]: { Manual: {} } }))] });
    d.on({ type: "Observed", tip: A, pushedByUs: false });
    const first = d.on(read(A, null, [A]));
    const [att] = sends(d.publish(first, A));
    d.on(report(att?.token ?? "", "app", "Succeeded", A));
    d.on({ type: "TargetsListed", targets: [governed(g)] });
    const unread = d.on({ type: "Observed", tip: B, pushedByUs: false });
    return { d, unread };
  }

  it("a foreign commit waits with AwaitingApproval, naming the commit and the missing source", () => {
    const { d, unread } = foreign();
    expect(flushes(unread)).toEqual([]); // not read yet: held
    const out = d.on(read(B, A, [B]));
    expect(flushes(out)).toEqual([]);
    const [gate] = gates(out);
    expect(gate?.condition).toMatchObject({ status: "False", reason: "AwaitingApproval" });
    expect(gate?.condition?.message).toContain(`${B.slice(0, 12)} (Manual); waiting: ForeignCommit`);
    expect(gate?.awaitingApproval).toEqual([{ commit: B, missing: ["Manual"] }]);
    expect(d.state.appliers[KEY]?.pending.all).toEqual(["ForeignCommit"]);
  });

  it("approved, one apply runs, carrying the approvals that let it through", () => {
    const { d } = foreign();
    d.on(read(B, A, [B]));
    const out = d.on({
      type: "TargetsListed",
      targets: [governed(manual({ [B]: { Manual: { by: "kubectl-annotate" } } }))],
    });
    expect(gates(out)[0]?.condition).toMatchObject({ status: "True", reason: "Approved" });
    const [attempt] = sends(d.publish(out, B));
    expect(attempt?.approvals).toEqual([{ commit: B, sources: ["Manual"], by: ["kubectl-annotate"] }]);
  });

  it("the worker's own commits on top of an approved foreign commit need nothing; an unapproved one under them holds", () => {
    const { d } = foreign();
    // An API edit published on top of B: the worker records its publication (base B).
    d.on({ type: "Published", upToMark: null, tip: C });
    expect(d.state.published?.at(-1)).toEqual({ tip: C, base: B });
    // The shell's read of C leaves C out (its own) and finds B, still unapproved.
    expect(flushes(d.on(read(C, A, [B])))).toEqual([]);
    const out = d.on({ type: "TargetsListed", targets: [governed(manual({ [B]: { Manual: {} } }))] });
    const [attempt] = sends(d.publish(out, C));
    expect(attempt?.commit).toBe(C);
  });

  it("every foreign commit since the last applied one must be approved, not only the tip", () => {
    const { d } = foreign(manual({ [C]: { Manual: {} } }));
    d.on({ type: "Observed", tip: C, pushedByUs: false });
    const out = d.on(read(C, A, [C, B]));
    expect(flushes(out)).toEqual([]);
    expect(gates(out)[0]?.awaitingApproval).toEqual([{ commit: B, missing: ["Manual"] }]);
  });

  it("a tip that does not descend from the last applied commit needs an Approval naming it, whatever else approves it", () => {
    // Commit status approves every commit; the force-push back to the old, approved C still waits.
    const cs: TargetGovernance = {
      changeWindows: [],
      approval: { sources: ["CommitStatus"], commitStatus: { context: "ok", api: "github" } },
      approved: {},
    };
    const { d } = foreign(cs);
    const rollback = {
      type: "CommitsRead" as const,
      reads: { [KEY]: { tip: B, since: A, commits: [C], notDescendant: true, statuses: { [C]: "success" } } },
    };
    const out = d.on(rollback);
    expect(flushes(out)).toEqual([]);
    const [gate] = gates(out);
    expect(gate?.condition).toMatchObject({ status: "False", reason: "AwaitingApproval" });
    expect(gate?.condition?.message).toContain(
      `${C.slice(0, 12)} (Manual: the tip is not a descendant of the last applied commit ${A.slice(0, 12)}, so an Approval must name it)`,
    );
    expect(gate?.awaitingApproval).toEqual([{ commit: C, missing: ["Manual"], notDescendantOf: A }]);
    // Named by an Approval: one apply, carrying the Manual approval the return needed.
    const approved = d.on({
      type: "TargetsListed",
      targets: [governed({ ...cs, approved: { [C]: { Manual: { by: "ada" } } } })],
    });
    const [attempt] = sends(d.publish(approved, B));
    expect(attempt?.approvals).toEqual([{ commit: C, sources: ["Manual", "CommitStatus"], by: ["ada"] }]);
  });

  it("approval settings that conflict hold everything and say why", () => {
    const { d } = foreign({
      ...manual({ [B]: { Manual: {} } }),
      approval: { sources: ["Manual"], conflict: "X and Y set approval.commitStatus differently" },
    });
    const out = d.on(read(B, A, [B]));
    expect(flushes(out)).toEqual([]);
    expect(gates(d.log).at(-1)?.condition).toEqual({
      status: "False",
      reason: "InvalidApproval",
      message: "X and Y set approval.commitStatus differently: no apply starts until it is fixed",
    });
    expect(approvalReadsAsked(d.state)).toEqual([]);
  });

  it("two GitTargets naming the claim that require a source differently conflict", () => {
    const d = new Driver();
    const status = (context: string): TargetGovernance => ({
      changeWindows: [],
      approval: { sources: ["CommitStatus"], commitStatus: { context, api: "github" } },
      approved: {},
    });
    const out = d.on({
      type: "TargetsListed",
      targets: [governed(status("a"), "u1"), governed(status("b"), "u2")],
    });
    d.on({ type: "Observed", tip: A, pushedByUs: false });
    const gate = gates([...out, ...d.log])
      .map((g) => g.condition)
      .find((c) => c?.reason === "InvalidApproval");
    expect(gate?.message).toMatch(/the GitTargets naming the claim set approval.commitStatus differently/);
  });

  it("a read of another tip, or from another last applied commit, is no read: held", () => {
    const { d } = foreign(manual({ [B]: { Manual: {} } }));
    expect(flushes(d.on(read(C, A, [])))).toEqual([]);
    expect(flushes(d.on(read(B, sha("9"), [])))).toEqual([]);
    expect(flushes(d.on(read(B, A, [B])))).toHaveLength(1);
  });

  it("one applier's read that failed holds that applier alone and says why; the other's approval flows; it is read again only at the poll", () => {
    const OTHER = "FluxClaim/apps/other";
    const d = new Driver();
    const statusGov: TargetGovernance = {
      changeWindows: [],
      approval: { sources: ["CommitStatus"], commitStatus: { context: "ci", api: "gitea" } },
      approved: {},
    };
    d.on({
      type: "TargetsListed",
      targets: [governed(manual({ [B]: { Manual: {} } })), listed("u2", "other", { governance: statusGov })],
    });
    d.on({ type: "Observed", tip: B, pushedByUs: false });
    const out = d.on({
      type: "CommitsRead",
      reads: {
        [KEY]: { tip: B, since: null, commits: [B] },
        [OTHER]: { tip: B, since: null, commits: [], unreadable: "cannot tell owner and repository from x" },
      },
    });
    const byClaim = Object.fromEntries(
      out.flatMap((a) => (a.type === "RecordGate" ? [[a.claim.name, a.gate.condition]] : [])),
    );
    expect(byClaim.app).toMatchObject({ status: "True", reason: "Approved" });
    expect(byClaim.other).toMatchObject({ status: "False", reason: "ApprovalUnreadable" });
    expect(byClaim.other?.message).toContain("cannot tell owner and repository from x");
    const held = approvalGate(B, d.state.appliers[OTHER]!, targetsNaming(d.state, OTHER));
    expect(held).toEqual({ state: "Unreadable", message: "cannot tell owner and repository from x" });
    // The approved applier's apply goes (the flush, then one attempt, for it alone).
    const attempts = sends(d.publish(out, B));
    expect(attempts.map((a) => a.claim.name)).toEqual(["app"]);
    // Not asked again at every step, only when the poll asks.
    expect(approvalReadsAsked(d.state).map((q) => q.key)).toEqual([]);
    expect(approvalReadsAsked(d.state, true).map((q) => q.key)).toEqual([OTHER]);
  });

  it("a Repair that would apply an unapproved tip waits too, and says so", () => {
    const { d } = foreign();
    d.on(read(B, A, [B]));
    d.on({
      type: "Restarted",
      tokenPrefix: "r",
      claims: [{ ...fluxOf(), repairPending: true, lastAppliedCommit: A }],
      saved: d.state,
    });
    d.on({ type: "TargetsListed", targets: [governed(manual())] });
    d.on({ type: "Observed", tip: B, pushedByUs: false });
    const out = d.on(read(B, A, [B]));
    expect(flushes(out)).toEqual([]);
    expect(JSON.stringify(d.state.appliers[KEY]?.gateRecorded)).toMatch(/waiting: ForeignCommit, Repair/);
  });

  it("an unapproved commit is never applied after a restart either: the baseline converge waits for it", () => {
    const { d } = foreign();
    d.on({ type: "Restarted", tokenPrefix: "r", claims: [{ ...fluxOf(), lastAppliedCommit: A }] });
    d.on({ type: "TargetsListed", targets: [governed(manual())] });
    expect(flushes(d.on({ type: "Observed", tip: B, pushedByUs: false }))).toEqual([]);
    expect(flushes(d.on(read(B, A, [B])))).toEqual([]);
    expect(d.state.appliers[KEY]?.pending.byTarget.u1 ?? d.state.appliers[KEY]?.pending.all).toContain(
      "Converge",
    );
  });
});

function fluxOf() {
  return {
    claim: { kind: "FluxClaim" as const, namespace: "apps", name: "app" },
    applier: { kind: "flux" as const, namespace: "flux-system", name: "app" },
    source: "flux-system/app",
  };
}

describe("approval sources alone and combined", () => {
  const both: TargetGovernance = {
    changeWindows: [],
    approval: { sources: ["Manual", "CommitStatus"], commitStatus: { context: "ci/approved", api: "gitea" } },
    approved: {},
  };
  function awaiting(g: TargetGovernance, statuses: Record<string, string>) {
    const d = new Driver();
    d.on({ type: "TargetsListed", targets: [governed(g)] });
    d.on({ type: "Observed", tip: B, pushedByUs: false });
    return d.on({ type: "CommitsRead", reads: { [KEY]: { tip: B, since: null, commits: [B], statuses } } });
  }
  it("commit status alone: success lets it through, pending or missing holds", () => {
    const alone: TargetGovernance = {
      ...both,
      approval: { sources: ["CommitStatus"], commitStatus: { context: "ci/approved", api: "gitea" } },
    };
    expect(flushes(awaiting(alone, { [B]: "pending" }))).toEqual([]);
    expect(gates(awaiting(alone, {}))[0]?.awaitingApproval).toEqual([
      { commit: B, missing: ["CommitStatus"] },
    ]);
    expect(flushes(awaiting(alone, { [B]: "success" }))).toHaveLength(1);
  });
  it("combined: every source must approve; the claim names the one missing", () => {
    expect(gates(awaiting(both, { [B]: "success" }))[0]?.awaitingApproval).toEqual([
      { commit: B, missing: ["Manual"] },
    ]);
    const manualOnly = { ...both, approved: { [B]: { Manual: {} } } };
    expect(gates(awaiting(manualOnly, {}))[0]?.awaitingApproval).toEqual([
      { commit: B, missing: ["CommitStatus"] },
    ]);
    expect(flushes(awaiting(manualOnly, { [B]: "success" }))).toHaveLength(1);
  });
});

describe("signature approval, alone and combined", () => {
  const C = sha("c");
  const signature = {
    secret: { namespace: "apps", name: "release-keys" },
    mode: "HEAD" as const,
    keys: "k1",
  };
  const signed: TargetGovernance = {
    changeWindows: [],
    approval: { sources: ["Signature"], signature },
    approved: {},
  };
  const good = { ok: true as const, key: "SHA256:abc", signer: "ada@laptop" };
  const untrusted = {
    ok: false as const,
    reason: "SignatureUntrusted",
    message: "signed by SSH key SHA256:eve (ssh-ed25519), which is not among the trusted keys",
  };
  function readWith(
    g: TargetGovernance,
    signatures: Record<string, typeof good | typeof untrusted> | undefined,
    o: { keys?: string; commits?: string[]; statuses?: Record<string, string> } = {},
  ) {
    const d = new Driver();
    d.on({ type: "TargetsListed", targets: [governed(g)] });
    d.on({ type: "Observed", tip: B, pushedByUs: false });
    const out = d.on({
      type: "CommitsRead",
      reads: {
        [KEY]: {
          tip: B,
          since: null,
          commits: o.commits ?? [B],
          ...(signatures ? { signatures, keys: o.keys ?? "k1" } : {}),
          ...(o.statuses ? { statuses: o.statuses } : {}),
        },
      },
    });
    return { d, out };
  }

  it("a commit signed by a trusted key is approved by its signature alone; the attempt names the key", () => {
    const { d, out } = readWith(signed, { [B]: good });
    expect(gates(out)[0]?.condition).toMatchObject({ status: "True", reason: "Approved" });
    const [attempt] = sends(d.publish(out, B));
    expect(attempt?.approvals).toEqual([
      { commit: B, sources: ["Signature"], by: ["ada@laptop (SHA256:abc)"], signedBy: "SHA256:abc" },
    ]);
  });

  it("mode Tag: the attempt names the release tag and its key; a commit waiting for a tag is read again when asked (HEAD: not)", () => {
    const byTag: TargetGovernance = {
      ...signed,
      approval: { sources: ["Signature"], signature: { ...signature, mode: "Tag" } },
    };
    const tagged = { ...good, tag: { name: "v1.0.0", key: "SHA256:abc", signer: "ada@laptop" } };
    const { d, out } = readWith(byTag, { [B]: tagged });
    const [attempt] = sends(d.publish(out, B));
    expect(attempt?.approvals).toEqual([
      {
        commit: B,
        sources: ["Signature"],
        by: ["ada@laptop (SHA256:abc) [tag v1.0.0]"],
        signedBy: "SHA256:abc",
        tag: { name: "v1.0.0", signedBy: "SHA256:abc" },
      },
    ]);
    const untagged = { ok: false as const, reason: "CommitNotTagged", message: "no annotated tag" };
    const waiting = readWith(byTag, { [B]: untagged });
    expect(approvalReadsAsked(waiting.d.state)).toEqual([]);
    expect(approvalReadsAsked(waiting.d.state, true)).toEqual([
      { key: KEY, tip: B, since: null, signature: { ...signature, mode: "Tag" } },
    ]);
    const head = readWith(signed, { [B]: untrusted });
    expect(approvalReadsAsked(head.d.state, true)).toEqual([]);
  });

  it("an untrusted key holds: AwaitingApproval names the commit, the source and why", () => {
    const { d, out } = readWith(signed, { [B]: untrusted });
    expect(flushes(out)).toEqual([]);
    const [gate] = gates(out);
    expect(gate?.condition).toMatchObject({ status: "False", reason: "AwaitingApproval" });
    expect(gate?.condition?.message).toContain(
      `${B.slice(0, 12)} (Signature: signed by SSH key SHA256:eve (ssh-ed25519), which is not among the trusted keys)`,
    );
    expect(gate?.awaitingApproval).toEqual([
      {
        commit: B,
        missing: ["Signature"],
        signature: { reason: "SignatureUntrusted", message: untrusted.message },
      },
    ]);
    expect(d.state.appliers[KEY]?.pending.all).toEqual(["Converge"]);
  });

  it("every foreign commit must be signed: a signed tip over an unsigned commit holds", () => {
    const unsigned = { ok: false as const, reason: "CommitUnsigned", message: "the commit is not signed" };
    const { out } = readWith(signed, { [C]: good, [B]: unsigned }, { commits: [C, B] });
    expect(flushes(out)).toEqual([]);
    expect(gates(out)[0]?.awaitingApproval).toEqual([
      {
        commit: B,
        missing: ["Signature"],
        signature: { reason: "CommitUnsigned", message: "the commit is not signed" },
      },
    ]);
  });

  it("signatures checked against other keys than the listing sees, or not checked, are no read: held, nothing shown", () => {
    const stale = readWith(signed, { [B]: good }, { keys: "k0" });
    expect(flushes(stale.out)).toEqual([]);
    expect(gates(stale.out)).toEqual([]);
    const none = readWith(signed, undefined);
    expect(flushes(none.out)).toEqual([]);
    // The Secret changed (listing digest k2): the approval given against k1 no longer counts.
    const moved = readWith(signed, { [B]: untrusted });
    expect(approvalReadsAsked(moved.d.state)).toEqual([]);
    moved.d.on({
      type: "TargetsListed",
      targets: [
        governed({
          ...signed,
          approval: { sources: ["Signature"], signature: { ...signature, keys: "k2" } },
        }),
      ],
    });
    const a = moved.d.state.appliers[KEY];
    expect(a && approvalGate(B, a, targetsNaming(moved.d.state, KEY)).state).toBe("Unread");
    expect(approvalReadsAsked(moved.d.state)).toEqual([
      { key: KEY, tip: B, since: null, signature: { ...signature, keys: "k2" } },
    ]);
  });

  it("combined with manual: both must approve, the claim names the one missing", () => {
    const both: TargetGovernance = {
      changeWindows: [],
      approval: { sources: ["Manual", "Signature"], signature },
      approved: {},
    };
    expect(gates(readWith(both, { [B]: good }).out)[0]?.awaitingApproval).toEqual([
      { commit: B, missing: ["Manual"] },
    ]);
    const manualOnly = { ...both, approved: { [B]: { Manual: { by: "kubectl-annotate" } } } };
    expect(gates(readWith(manualOnly, { [B]: untrusted }).out)[0]?.awaitingApproval).toEqual([
      {
        commit: B,
        missing: ["Signature"],
        signature: { reason: "SignatureUntrusted", message: untrusted.message },
      },
    ]);
    const ok = readWith(manualOnly, { [B]: good });
    const [attempt] = sends(ok.d.publish(ok.out, B));
    expect(attempt?.approvals?.[0]).toMatchObject({
      sources: ["Manual", "Signature"],
      signedBy: "SHA256:abc",
    });
  });

  it("combined with a commit status: a signed commit still waits for its status, and the reverse", () => {
    const three: TargetGovernance = {
      changeWindows: [],
      approval: {
        sources: ["CommitStatus", "Signature"],
        commitStatus: { context: "ci/approved", api: "gitea" },
        signature,
      },
      approved: {},
    };
    expect(
      gates(readWith(three, { [B]: good }, { statuses: { [B]: "pending" } }).out)[0]?.awaitingApproval,
    ).toEqual([{ commit: B, missing: ["CommitStatus"] }]);
    expect(
      gates(readWith(three, { [B]: untrusted }, { statuses: { [B]: "success" } }).out)[0]
        ?.awaitingApproval?.[0]?.missing,
    ).toEqual(["Signature"]);
    expect(flushes(readWith(three, { [B]: good }, { statuses: { [B]: "success" } }).out)).toHaveLength(1);
  });

  it("the worker's own commits on top of a signed foreign commit need no signature", () => {
    const { d } = readWith(signed, { [B]: untrusted });
    d.on({ type: "Published", upToMark: null, tip: C });
    // The shell's read of C leaves C (its own) out and finds B, now signed by a trusted key.
    const out = d.on({
      type: "CommitsRead",
      reads: { [KEY]: { tip: C, since: null, commits: [B], signatures: { [B]: good }, keys: "k1" } },
    });
    const [attempt] = sends(d.publish(out, C));
    expect(attempt?.commit).toBe(C);
  });
});
