/** Argo CD's sync windows as the decision core reads them: matching, CanSync, the next opening. */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { canSync as argosimCanSync } from "../../test/cluster/argosim/windows.js";
import type { SyncWindowSpec } from "../governance/model.js";
import { zoneOffsetMs } from "../governance/wall-time.js";
import { globMatch, judgeSyncWindows, matchSyncWindows, parseGoDuration } from "./sync-windows.js";

const at = (iso: string) => Date.parse(iso);
const deny10: SyncWindowSpec = { kind: "deny", schedule: "0 10 * * *", duration: "1h", applications: ["*"] };
const allow10: SyncWindowSpec = {
  kind: "allow",
  schedule: "0 10 * * *",
  duration: "1h",
  applications: ["*"],
};

describe("matchSyncWindows (SyncWindows.Matches)", () => {
  const app = { name: "web", destination: { namespace: "shop", server: "https://kubernetes.default.svc" } };
  it("matches by application, namespace or cluster glob; a window naming none matches nothing", () => {
    const ws: SyncWindowSpec[] = [
      { kind: "deny", schedule: "* * * * *", duration: "1h", applications: ["w*"] },
      { kind: "deny", schedule: "* * * * *", duration: "1h", namespaces: ["sh?p"] },
      { kind: "deny", schedule: "* * * * *", duration: "1h", clusters: ["https://kubernetes.*"] },
      { kind: "deny", schedule: "* * * * *", duration: "1h", applications: ["api"] },
      { kind: "deny", schedule: "* * * * *", duration: "1h" },
    ];
    expect(matchSyncWindows(ws, app)).toEqual(ws.slice(0, 3));
  });
  it("a destination given by name matches a clusters glob on the name", () => {
    const w: SyncWindowSpec = { kind: "deny", schedule: "* * * * *", duration: "1h", clusters: ["prod-*"] };
    expect(matchSyncWindows([w], { name: "web", destination: { name: "prod-eu" } })).toEqual([w]);
    expect(matchSyncWindows([w], { name: "web", destination: { name: "dev" } })).toEqual([]);
  });
  it("andOperator asks every list given to match", () => {
    const w: SyncWindowSpec = {
      kind: "deny",
      schedule: "* * * * *",
      duration: "1h",
      applications: ["web"],
      namespaces: ["other"],
      andOperator: true,
    };
    expect(matchSyncWindows([w], app)).toEqual([]);
    expect(matchSyncWindows([{ ...w, andOperator: false }], app)).toHaveLength(1);
  });
  it("globs: *, ?, classes and alternatives", () => {
    expect(globMatch("web-{eu,us}", "web-us")).toBe(true);
    expect(globMatch("web-[0-9]", "web-7")).toBe(true);
    expect(globMatch("web-[!0-9]", "web-7")).toBe(false);
    expect(globMatch("web.", "webx")).toBe(false);
  });
});

describe("parseGoDuration", () => {
  it("reads Go durations", () => {
    expect(parseGoDuration("1h30m")).toBe(5_400_000);
    expect(parseGoDuration("1.5h")).toBe(5_400_000);
    expect(parseGoDuration("90s")).toBe(90_000);
    expect(parseGoDuration("250ms")).toBe(250);
    expect(parseGoDuration("0")).toBe(0);
    for (const d of ["", "1d", "h", "1 h", "-1h"]) expect(parseGoDuration(d)).toBeNull();
  });
});

describe("judgeSyncWindows (CanSync for applygate's automated syncs)", () => {
  it("no matching window: unrestricted", () => {
    expect(judgeSyncWindows([], at("2026-12-01T10:30:00Z"))).toEqual({ state: "Unrestricted" });
  });

  it("a deny window is active from just after it fires until its duration has passed", () => {
    // One second before the deny window starts: a sync runs; the next moment that changes is
    // the first instant after the schedule fires.
    expect(judgeSyncWindows([deny10], at("2026-12-01T09:59:59Z"))).toEqual({
      state: "Open",
      closesAt: at("2026-12-01T10:00:00.001Z"),
    });
    // At the very instant it fires, Argo CD's `Next(t − d).Before(t)` is false: not active yet.
    expect(judgeSyncWindows([deny10], at("2026-12-01T10:00:00Z")).state).toBe("Open");
    expect(judgeSyncWindows([deny10], at("2026-12-01T10:00:00.001Z"))).toEqual({
      state: "Blocked",
      by: "deny",
      opensAt: at("2026-12-01T11:00:00Z"),
    });
    expect(judgeSyncWindows([deny10], at("2026-12-01T10:59:59.999Z")).state).toBe("Blocked");
    expect(judgeSyncWindows([deny10], at("2026-12-01T11:00:00Z"))).toEqual({
      state: "Open",
      closesAt: at("2026-12-02T10:00:00.001Z"),
    });
  });

  it("with an allow window, a sync outside it is blocked; queued as it opens, it goes then, not a period later", () => {
    expect(judgeSyncWindows([allow10], at("2026-12-01T08:00:00Z"))).toEqual({
      state: "Blocked",
      by: "outside-allow",
      opensAt: at("2026-12-01T10:00:00.001Z"),
    });
    // Queued at the exact moment the window opens: Argo CD does not run it at that instant, and
    // runs it the instant after (not at tomorrow's opening).
    expect(judgeSyncWindows([allow10], at("2026-12-01T10:00:00Z"))).toEqual({
      state: "Blocked",
      by: "outside-allow",
      opensAt: at("2026-12-01T10:00:00.001Z"),
    });
    expect(judgeSyncWindows([allow10], at("2026-12-01T10:00:00.001Z"))).toEqual({
      state: "Open",
      closesAt: at("2026-12-01T11:00:00Z"),
    });
    expect(judgeSyncWindows([allow10], at("2026-12-01T11:00:00Z"))).toEqual({
      state: "Blocked",
      by: "outside-allow",
      opensAt: at("2026-12-02T10:00:00.001Z"),
    });
  });

  it("deny wins over an active allow, and the opening is past the deny", () => {
    const allowDay: SyncWindowSpec = { ...allow10, schedule: "0 8 * * *", duration: "8h" };
    expect(judgeSyncWindows([allowDay, deny10], at("2026-12-01T10:30:00Z"))).toEqual({
      state: "Blocked",
      by: "deny",
      opensAt: at("2026-12-01T11:00:00Z"),
    });
    expect(judgeSyncWindows([allowDay, deny10], at("2026-12-01T09:00:00Z"))).toEqual({
      state: "Open",
      closesAt: at("2026-12-01T10:00:00.001Z"),
    });
  });

  it("manualSync lets a manual sync through, never applygate's automated one", () => {
    const manual = { ...deny10, manualSync: true };
    const t = at("2026-12-01T10:30:00Z");
    expect(judgeSyncWindows([manual], t, true).state).toBe("Open");
    expect(judgeSyncWindows([manual], t).state).toBe("Blocked");
    expect(judgeSyncWindows([{ ...allow10, manualSync: true }], at("2026-12-01T08:00:00Z"), true).state).toBe(
      "Open",
    );
  });

  it("a window that cannot be read blocks every sync", () => {
    for (const w of [
      { ...deny10, schedule: "0 0 10 * * *" },
      { ...deny10, schedule: "@daily" },
      { ...deny10, schedule: "61 10 * * *" },
      { ...deny10, duration: "1d" },
    ]) {
      const v = judgeSyncWindows([w], at("2026-12-01T08:00:00Z"));
      expect(v.state, JSON.stringify(w)).toBe("Invalid");
    }
  });

  it("a time zone reads the schedule on that zone's wall clock; an unknown zone counts as UTC", () => {
    const berlin = { ...deny10, timeZone: "Europe/Berlin" };
    expect(zoneOffsetMs("Europe/Berlin", at("2026-12-01T09:00:00Z"))).toBe(3_600_000);
    // 10:00 in Berlin is 09:00 UTC in December.
    expect(judgeSyncWindows([berlin], at("2026-12-01T09:30:00Z"))).toEqual({
      state: "Blocked",
      by: "deny",
      opensAt: at("2026-12-01T10:00:00Z"),
    });
    expect(judgeSyncWindows([berlin], at("2026-12-01T10:30:00Z")).state).toBe("Open");
    // Summer time: UTC+2.
    expect(judgeSyncWindows([berlin], at("2026-07-01T08:30:00Z")).state).toBe("Blocked");
    const nowhere = { ...deny10, timeZone: "Mars/Olympus" };
    expect(judgeSyncWindows([nowhere], at("2026-12-01T10:30:00Z")).state).toBe("Blocked");
  });

  it("an edge past a daylight-saving switch is read on the offset then (the property's counterexample)", () => {
    // A one-minute allow window on the 1st at midnight in New York, judged in November (EST) while
    // a weekday deny in Kolkata holds every 1st until August's, a Sunday: that one opens at 04:00
    // UTC (EDT), not 05:00, which the offset of November gave.
    const ws: SyncWindowSpec[] = [
      { ...deny10, schedule: "30 9 * * 1-5", duration: "36h", timeZone: "Asia/Kolkata" },
      { ...allow10, schedule: "0 0 1 * *", duration: "1m", timeZone: "America/New_York" },
    ];
    const v = judgeSyncWindows(ws, at("2026-11-28T00:00:00Z"));
    expect(v).toMatchObject({ state: "Blocked", opensAt: at("2027-08-01T04:00:00.001Z") });
    expect(argosimCanSync(ws, false, at("2027-08-01T04:00:00.001Z"))).toBe(true);
    expect(argosimCanSync(ws, false, at("2027-08-01T04:00:00Z"))).toBe(false);
    // And back across the switch of November: one in December reads EST again.
    const dec = judgeSyncWindows([ws[1] as SyncWindowSpec], at("2027-10-20T00:00:00Z"));
    expect(dec).toMatchObject({ state: "Blocked", opensAt: at("2027-11-01T04:00:00.001Z") });
    const jan = judgeSyncWindows([ws[1] as SyncWindowSpec], at("2027-11-20T00:00:00Z"));
    expect(jan).toMatchObject({ state: "Blocked", opensAt: at("2027-12-01T05:00:00.001Z") });
  });

  it("agrees with argosim's copy of Argo CD's CanSync at any moment and at every edge", () => {
    const window = fc.record({
      kind: fc.constantFrom("allow", "deny"),
      schedule: fc.constantFrom("0 10 * * *", "*/15 * * * *", "30 9 * * 1-5", "0 0 1 * *", "5 */2 * * *"),
      duration: fc.constantFrom("1m", "14m", "1h", "90m", "36h"),
      applications: fc.constant<string[]>(["*"]),
      manualSync: fc.boolean(),
      timeZone: fc.constantFrom("UTC", "Europe/Berlin", "America/New_York", "Asia/Kolkata"),
    });
    fc.assert(
      fc.property(
        fc.array(window, { minLength: 1, maxLength: 3 }),
        fc.integer({ min: at("2026-11-28T00:00:00Z"), max: at("2026-12-05T00:00:00Z") }),
        fc.boolean(),
        (ws, t0, manual) => {
          // Whole minutes and the instants around them, where the edges are.
          const t = Math.floor(t0 / 60_000) * 60_000 + [0, 1, -1, 30_000][t0 % 4]!;
          const v = judgeSyncWindows(ws, t, manual);
          expect(v.state === "Open" || v.state === "Unrestricted").toBe(argosimCanSync(ws, manual, t));
          // The moment the verdict changes is one argosim agrees changes it.
          const edge = v.state === "Open" ? v.closesAt : v.state === "Blocked" ? v.opensAt : null;
          if (edge !== null) {
            expect(argosimCanSync(ws, manual, edge)).toBe(v.state !== "Open");
            expect(argosimCanSync(ws, manual, edge - 1)).toBe(v.state === "Open");
          }
        },
      ),
      { numRuns: 80 },
    );
  });
});
