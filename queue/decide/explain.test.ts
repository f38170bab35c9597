import { describe, expect, it } from "vitest";
import { A, B, Driver, listed, report, sends, sha } from "../../test/support/decisions.js";
import type { ChangeWindowSpec, TargetGovernance } from "../governance/model.js";
import { explainBranch } from "./explain.js";

const KEY = "FluxClaim/apps/app";
const at = (iso: string) => Date.parse(iso);

const explained = (d: Driver, key = KEY) => {
  const e = explainBranch(d.state, d.now).appliers.find((a) => a.key === key);
  if (!e) throw new Error(`${key} not explained`);
  return e;
};

describe("explainBranch: why each applier gets no attempt now, from the rules that decide it", () => {
  it("idle once settled: nothing pending, the barrier passed, nothing unpublished", () => {
    const d = new Driver();
    d.settle([listed("u1", "app")], A);
    const e = explainBranch(d.state, d.now);
    expect(e.tip).toBe(A);
    expect(e.hold).toBeNull();
    expect(e.targets).toEqual([expect.objectContaining({ uid: "u1", barrier: null, unpublished: 0 })]);
    expect(explained(d)).toMatchObject({ state: "idle", waiting: { hold: "nothing pending" } });
  });

  it("a foreign commit awaiting a manual approval: held, naming the commit and the source it lacks", () => {
    const manual = (approved: TargetGovernance["approved"]): TargetGovernance => ({
      changeWindows: [],
      approval: { sources: ["Manual"] },
      approved,
    });
    const d = new Driver();
    d.on({
      type: "TargetsListed",
      targets: [listed("u1", "app", { governance: manual({ [A]: { Manual: {} } }) })],
    });
    d.on({ type: "Observed", tip: A, pushedByUs: false });
    const [att] = sends(
      d.publish(d.on({ type: "CommitsRead", reads: { [KEY]: { tip: A, since: null, commits: [A] } } }), A),
    );
    d.on(report(att?.token ?? "", "app", "Succeeded", A));
    d.on({ type: "Observed", tip: B, pushedByUs: false });
    expect(explained(d).waiting).toEqual({ hold: "approval not read" });
    d.on({ type: "CommitsRead", reads: { [KEY]: { tip: B, since: A, commits: [B] } } });
    const e = explained(d);
    expect(e.state).toBe("held");
    expect(e.pending).toEqual(["ForeignCommit"]);
    expect(e.reasons).toEqual([{ uid: "u1", namespace: "apps", name: "gt-u1", reason: "ForeignCommit" }]);
    expect(e.waiting).toEqual({ hold: "awaiting approval", missing: [{ commit: B, sources: ["Manual"] }] });
  });

  it("outside the change windows: held, with the next opening", () => {
    const morning: ChangeWindowSpec = { kind: "allow", schedule: "0 10 * * *", duration: "2h" };
    const d = new Driver(at("2026-12-01T10:30:00Z"));
    d.settle([listed("u1", "app", { governance: { changeWindows: [morning] } })], A);
    d.now = at("2026-12-01T13:00:00Z");
    d.on({ type: "Observed", tip: B, pushedByUs: false });
    expect(explained(d).waiting).toEqual({
      hold: "outside change window",
      verdict: { state: "Closed", opensAt: at("2026-12-02T10:00:00Z"), by: "outside-allow" },
    });
  });

  it("the barrier: the folder of a GitTarget naming it is not in the tip, and its initial snapshots are not published", () => {
    const d = new Driver();
    d.absent.add("u2");
    d.on({ type: "TargetsListed", targets: [listed("u1", "app"), listed("u2", "app", { watch: "m:1" })] });
    d.on({ type: "Observed", tip: A, pushedByUs: false });
    const e = explainBranch(d.state, d.now);
    expect(e.appliers[0]?.waiting).toEqual({
      hold: "barrier",
      targets: [{ uid: "u2", namespace: "apps", name: "gt-u2", folder: true, initialSnapshots: true }],
    });
    expect(e.targets.find((t) => t.uid === "u2")?.barrier).toMatchObject({ folder: true });
    expect(e.targets.find((t) => t.uid === "u1")?.barrier).toBeNull();
  });

  it("an operation out: applying, with its token, commit and phase; a new reason waits behind it", () => {
    const d = new Driver();
    d.settle([listed("u1", "app")], A);
    const [att] = sends(d.publish(d.on({ type: "Observed", tip: B, pushedByUs: false }), B));
    d.on(report(att?.token ?? "", "app", "Running", B));
    let e = explained(d);
    expect(e.state).toBe("applying");
    expect(e.operation).toMatchObject({ token: att?.token, commit: B, phase: "Running" });
    expect(e.waiting).toMatchObject({
      hold: "operation out",
      operation: { token: att?.token, phase: "Running" },
    });
    d.on({ type: "Observed", tip: sha("c"), pushedByUs: false });
    e = explained(d);
    expect(e.state).toBe("applying");
    expect(e.waiting).toMatchObject({ hold: "operation out", operation: { token: att?.token } });
  });

  it("another applier of the same source is applying: source busy, naming it", () => {
    const d = new Driver();
    d.settle([listed("u1", "a", { sourceName: "repo" }), listed("u2", "b", { sourceName: "repo" })], A);
    const [att] = sends(d.publish(d.on({ type: "Observed", tip: B, pushedByUs: false }), B));
    const other = att?.claim.name === "a" ? "FluxClaim/apps/b" : "FluxClaim/apps/a";
    expect(explained(d, other).waiting).toEqual({
      hold: "source busy",
      by: `FluxClaim/apps/${att?.claim.name}`,
      token: att?.token,
    });
  });

  it("after a failed attempt: the backoff, until when and after how many failures", () => {
    const d = new Driver();
    d.settle([listed("u1", "app")], A);
    const [att] = sends(d.publish(d.on({ type: "Observed", tip: B, pushedByUs: false }), B));
    d.on(report(att?.token ?? "", "app", "Failed", B));
    const e = explained(d);
    expect(e).toMatchObject({ state: "held", failures: 1, pending: ["ForeignCommit"] });
    expect(e.waiting).toEqual({ hold: "backoff", until: d.now + 2_000, failures: 1 });
    // What the claim's Retrying condition shows: the commit, the attempt that comes next, when.
    expect(e.retry).toEqual({
      by: "worker",
      commit: B,
      attempt: 2,
      at: d.now + 2_000,
      after: { phase: "Failed", commit: B },
    });
  });

  it("a suspended GitTarget: held, naming it", () => {
    const d = new Driver();
    d.settle([listed("u1", "app")], A);
    d.on({ type: "TargetsListed", targets: [listed("u1", "app", { suspended: true })] });
    d.on({ type: "Observed", tip: B, pushedByUs: false });
    expect(explained(d).waiting).toEqual({ hold: "suspended", targets: ["apps/gt-u1"] });
  });

  it("due, and the branch holds it: a flush publishing the pending writes, then the publication's backoff", () => {
    const d = new Driver();
    d.settle([listed("u1", "app")], A);
    const out = d.on({ type: "Observed", tip: B, pushedByUs: false });
    const flush = out.find((a) => a.type === "Flush");
    expect(explained(d)).toMatchObject({
      state: "due",
      waiting: { hold: "flush in progress", since: d.now },
    });
    d.on({ type: "FlushFailed", flush: flush?.type === "Flush" ? flush.flush : -1 });
    expect(explained(d)).toMatchObject({
      state: "due",
      waiting: { hold: "publication backoff", until: d.now + 2_000, failures: 1 },
    });
  });

  it("before the first observation since a start, every applier waits for it", () => {
    const d = new Driver();
    d.on({ type: "TargetsListed", targets: [listed("u1", "app")] });
    d.on({ type: "RefusalReceived", targetUid: "u1" });
    expect(explainBranch(d.state, d.now).hold).toEqual({ hold: "not observed" });
  });

  it("counts the pending writes decided and not yet published, per GitTarget", () => {
    const d = new Driver();
    d.settle([listed("u1", "app"), listed("u2", "other")], A);
    for (const id of ["w1", "w2"])
      d.on({ type: "WriteDecided", entryId: id, targetUid: "u1", createdObjects: [], editedObjects: [] });
    const e = explainBranch(d.state, d.now);
    expect(e.unpublished).toBe(2);
    expect(e.targets.map((t) => [t.uid, t.unpublished])).toEqual([
      ["u1", 2],
      ["u2", 0],
    ]);
  });
});
