/**
 * Argo CD's own sync windows in the decision core: an Argo CD applier that its AppProject's
 * windows would hold is not due, and its claim says BlockedBySyncWindow with the next opening.
 * The window edges with an injected clock.
 */
import { describe, expect, it } from "vitest";
import {
  A,
  argoClaim,
  argoListed,
  B,
  Driver,
  flushes,
  report,
  sends,
  sha,
} from "../../test/support/decisions.js";
import type { ChangeWindowSpec, SyncWindowSpec, TargetGovernance } from "../governance/model.js";
import type { DecisionAction } from "./model.js";

const KEY = "ArgoCDClaim/apps/web";
const at = (iso: string) => Date.parse(iso);

/** 18:00-19:00 UTC every day: no sync. */
const evening: SyncWindowSpec = { kind: "deny", schedule: "0 18 * * *", duration: "1h", applications: ["*"] };
/** 10:00-12:00 UTC every day: syncs only then. */
const morning: SyncWindowSpec = {
  kind: "allow",
  schedule: "0 10 * * *",
  duration: "2h",
  applications: ["*"],
};

const gates = (out: DecisionAction[]) => out.flatMap((a) => (a.type === "RecordGate" ? [a.gate] : []));
const wakes = (out: DecisionAction[]) => out.flatMap((a) => (a.type === "ScheduleWake" ? [a.at] : []));

function governed(g: TargetGovernance) {
  return argoListed("u1", "web", { governance: g });
}

/** Settled at A while the windows let syncs run, then the clock moved to `now` and B was pushed. */
function foreignPushAt(now: string, syncWindows: SyncWindowSpec[], settledAt = "2026-12-01T10:30:00Z") {
  const d = new Driver(at(settledAt));
  d.settle([governed({ changeWindows: [], syncWindows })], A);
  d.now = at(now);
  const out = d.on({ type: "Observed", tip: B, pushedByUs: false });
  return { d, out };
}

describe("Argo CD sync windows in the decision core", () => {
  it("inside a deny sync window nothing is asked of Argo CD: the reason stays pending, the claim says BlockedBySyncWindow with the next opening", () => {
    const { d, out } = foreignPushAt("2026-12-01T18:30:00Z", [evening]);
    expect(flushes(out)).toEqual([]);
    expect(d.state.appliers[KEY]?.pending.all).toEqual(["ForeignCommit"]);
    const [gate] = gates(out);
    expect(gate?.condition).toMatchObject({ status: "False", reason: "BlockedBySyncWindow" });
    expect(gate?.condition?.message).toContain("inside a deny sync window");
    expect(gate?.condition?.message).toContain("next opening 2026-12-01T19:00:00.000Z");
    expect(gate?.syncWindow).toEqual({ open: false, nextOpening: "2026-12-01T19:00:00.000Z" });
    // It wakes when the window ends, and the sync is asked for then.
    expect(wakes(out)).toContain(at("2026-12-01T19:00:00Z"));
    d.now = at("2026-12-01T18:59:59.999Z");
    expect(flushes(d.on({ type: "Tick" }))).toEqual([]);
    d.now = at("2026-12-01T19:00:00Z");
    const opened = d.on({ type: "Tick" });
    expect(gates(opened)[0]?.condition).toMatchObject({ status: "True", reason: "InsideSyncWindow" });
    expect(sends(d.publish(opened, B))).toHaveLength(1);
  });

  it("outside every allow sync window: held until the window opens", () => {
    const { out } = foreignPushAt("2026-12-01T13:00:00Z", [morning]);
    expect(flushes(out)).toEqual([]);
    expect(gates(out)[0]?.condition?.message).toContain("outside every allow sync window");
    expect(gates(out)[0]?.syncWindow?.nextOpening).toBe("2026-12-02T10:00:00.001Z");
  });

  it("edge: requested one second before a deny window starts, the sync is asked for; the window begins while it is out, and the core waits for the operation's end", () => {
    const { d, out } = foreignPushAt("2026-12-01T17:59:59Z", [evening]);
    expect(JSON.parse(d.state.appliers[KEY]?.gateRecorded ?? "{}").syncWindow).toEqual({
      open: true,
      closesAt: "2026-12-01T18:00:00.001Z",
    });
    const [attempt] = sends(d.publish(out, B));
    expect(attempt).toBeDefined();
    const token = attempt?.token as string;
    // Argo CD holds the operation Running through the window (Sync operation blocked by sync
    // window): the core sends nothing more while it is out, whatever is pushed meanwhile.
    d.now = at("2026-12-01T18:00:01Z");
    d.on(report(token, "web", "Running", B, argoClaim("web").claim));
    const C = sha("c");
    const during = d.on({ type: "Observed", tip: C, pushedByUs: false });
    expect(flushes(during)).toEqual([]);
    expect(d.state.appliers[KEY]?.operation?.token).toBe(token);
    // The window ends, Argo CD runs the held sync to its end; the commit pushed during the window
    // is asked for only then.
    d.now = at("2026-12-01T19:00:05Z");
    const done = d.on(report(token, "web", "Succeeded", B, argoClaim("web").claim));
    expect(sends(d.publish(done, C))).toHaveLength(1);
  });

  it("edge: queued at the exact moment an allow window opens, it goes the instant Argo CD runs syncs, not a period later", () => {
    const { d, out } = foreignPushAt("2026-12-02T10:00:00Z", [morning], "2026-12-01T10:30:00Z");
    // At the very instant the schedule fires Argo CD's window is not active yet: nothing is sent,
    // and the wake is the next millisecond, not tomorrow's opening.
    expect(flushes(out)).toEqual([]);
    expect(gates(out)[0]?.syncWindow?.nextOpening).toBe("2026-12-02T10:00:00.001Z");
    expect(wakes(out)).toContain(at("2026-12-02T10:00:00.001Z"));
    d.now = at("2026-12-02T10:00:00.001Z");
    const opened = d.on({ type: "Tick" });
    expect(sends(d.publish(opened, B))).toHaveLength(1);
  });

  it("a change-window override does not open a sync window (Argo CD would hold the sync all the same)", () => {
    const closed: ChangeWindowSpec = { kind: "deny", schedule: "0 18 * * *", duration: "2h" };
    const d = new Driver(at("2026-12-01T10:30:00Z"));
    const g: TargetGovernance = {
      changeWindows: [closed],
      syncWindows: [evening],
      override: { value: "INC-1", by: "kubectl-annotate" },
    };
    d.settle([governed(g)], A);
    d.now = at("2026-12-01T18:30:00Z");
    const out = d.on({ type: "Observed", tip: B, pushedByUs: false });
    expect(flushes(out)).toEqual([]);
    expect(gates(out)[0]?.condition).toMatchObject({ status: "False", reason: "BlockedBySyncWindow" });
    // After the sync window, the change window still closed: the override lets the apply start.
    d.now = at("2026-12-01T19:10:00Z");
    const later = d.on({ type: "Tick" });
    expect(gates(later)[0]?.condition).toMatchObject({ reason: "ChangeWindowOverride" });
    expect(sends(d.publish(later, B))[0]?.override?.changeWindow).toBe("INC-1");
  });

  it("a closed change window is named first; the sync window is still shown", () => {
    const closed: ChangeWindowSpec = { kind: "deny", schedule: "0 18 * * *", duration: "2h" };
    const d = new Driver(at("2026-12-01T10:30:00Z"));
    d.settle([governed({ changeWindows: [closed], syncWindows: [evening] })], A);
    d.now = at("2026-12-01T18:30:00Z");
    const [gate] = gates(d.on({ type: "Observed", tip: B, pushedByUs: false }));
    expect(gate?.condition?.reason).toBe("OutsideChangeWindow");
    expect(gate?.syncWindow).toEqual({ open: false, nextOpening: "2026-12-01T19:00:00.000Z" });
  });

  it("a sync window that cannot be read holds every sync, as Argo CD does", () => {
    const { d, out } = foreignPushAt("2026-12-01T13:00:00Z", [{ ...evening, schedule: "0 0 18 * * *" }]);
    expect(flushes(out)).toEqual([]);
    expect(d.state.appliers[KEY]?.pending.all).toContain("ForeignCommit");
    const gate = JSON.parse(d.state.appliers[KEY]?.gateRecorded ?? "{}");
    expect(gate.condition).toMatchObject({ status: "False", reason: "BlockedBySyncWindow" });
    expect(gate.condition.message).toContain("cannot parse schedule");
  });
});
