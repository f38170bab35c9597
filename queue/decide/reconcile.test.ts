import { describe, expect, it } from "vitest";
import { A, Driver, flushes, listed, report, sends } from "../../test/support/decisions.js";
import type { ChangeWindowSpec } from "../governance/model.js";
import { whyNotDue } from "./due.js";
import type { DecisionAction, ListedTarget } from "./model.js";

const KEY = "FluxClaim/apps/app";
const asked = (requestedAt: string, handled?: string, opts: Partial<ListedTarget> = {}) =>
  listed("u1", "app", { reconcile: { requestedAt, ...(handled ? { handled } : {}) }, ...opts });
const recorded = (out: DecisionAction[]) =>
  out.flatMap((a) => (a.type === "RecordReconcileHandled" ? [a.requestedAt] : []));

describe("a reconcile request (applygate reconcile)", () => {
  it("asks for one apply of the tip the applier already applied, which a converge would skip, and tells the claim it was taken", () => {
    const d = new Driver();
    d.settle([listed("u1", "app")], A);
    expect(d.state.appliers[KEY]?.lastAppliedCommit).toBe(A);
    const out = d.on({ type: "TargetsListed", targets: [asked("2026-03-01T10:00:00Z")] });
    expect(recorded(out)).toEqual(["2026-03-01T10:00:00Z"]);
    const [attempt] = sends(d.publish(out, A));
    expect(attempt).toMatchObject({ commit: A, targets: [{ uid: "u1", reason: "CatchUp" }] });
    d.on(report(attempt?.token ?? "", "app", "Succeeded", A));
    // The same value listed again (the claim's status now says it was taken) asks nothing more.
    const again = d.on({
      type: "TargetsListed",
      targets: [asked("2026-03-01T10:00:00Z", "2026-03-01T10:00:00Z")],
    });
    expect(flushes(again)).toEqual([]);
    expect(recorded(again)).toEqual([]);
    // A new value is a new request.
    const next = d.on({
      type: "TargetsListed",
      targets: [asked("2026-03-01T10:05:00Z", "2026-03-01T10:00:00Z")],
    });
    expect(recorded(next)).toEqual(["2026-03-01T10:05:00Z"]);
    expect(sends(d.publish(next, A))).toHaveLength(1);
  });

  it("goes through the same rules: outside a change window it waits, pending, and goes at the opening", () => {
    const morning: ChangeWindowSpec = { kind: "allow", schedule: "0 10 * * *", duration: "2h" };
    const g = { governance: { changeWindows: [morning] } };
    const d = new Driver(Date.parse("2026-12-01T10:30:00Z"));
    d.settle([listed("u1", "app", g)], A);
    d.now = Date.parse("2026-12-01T13:00:00Z");
    const out = d.on({ type: "TargetsListed", targets: [asked("r1", undefined, g)] });
    expect(flushes(out)).toEqual([]);
    expect(d.state.appliers[KEY]?.pending.all).toEqual(["Requested"]);
    expect(whyNotDue(d.state, KEY, d.now)?.hold).toBe("outside change window");
    d.now = Date.parse("2026-12-02T10:00:00Z");
    expect(sends(d.publish(d.on({ type: "Tick" }), A))).toHaveLength(1);
  });

  it("a value the claim's status already records as taken, after a restart without saved state, asks nothing", () => {
    const d = new Driver();
    d.settle([asked("r1", "r1")], A);
    expect(d.state.appliers[KEY]?.pending.all).toEqual([]);
    expect(d.log.filter((a) => a.type === "RecordReconcileHandled")).toEqual([]);
    d.on({ type: "Restarted", tokenPrefix: "t2", claims: [] });
    const out = d.on({ type: "TargetsListed", targets: [asked("r1", "r1")] });
    expect(d.state.appliers[KEY]?.pending.all ?? []).not.toContain("Requested");
    expect(recorded(out)).toEqual([]);
  });

  it("does not count as Git ahead of the cluster: it holds no snapshot", async () => {
    const { isGitAhead } = await import("./due.js");
    const d = new Driver();
    d.settle([listed("u1", "app")], A);
    d.absent.add("u1");
    d.on({ type: "TargetsListed", targets: [asked("r1")], folders: { commit: A, present: [] } });
    expect(d.state.appliers[KEY]?.pending.all).toEqual(["Requested"]);
    expect(isGitAhead(d.state)).toBe(false);
  });
});
