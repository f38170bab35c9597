import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { COVERAGE_FIRES, judgeChangeWindows, parseDuration } from "./change-windows.js";
import type { ChangeWindowSpec } from "./model.js";

const at = (iso: string) => Date.parse(iso);
const iso = (t: number | null) => (t === null ? null : new Date(t).toISOString());

const weekdayNine: ChangeWindowSpec = { kind: "allow", schedule: "0 9 * * 1-5", duration: "2h" };

describe("parseDuration", () => {
  it("reads hours, minutes and seconds in Go's order", () => {
    expect(parseDuration("1h30m")).toBe(5_400_000);
    expect(parseDuration("45s")).toBe(45_000);
    expect(parseDuration("90m")).toBe(5_400_000);
    expect(parseDuration("2h0m5s")).toBe(7_205_000);
  });
  it("refuses what is not a duration, and zero", () => {
    for (const d of ["", "h", "1d", "30m1h", "0s", "0h0m", "1.5h", "-1h", "1 h"])
      expect(parseDuration(d)).toBeNull();
  });
});

describe("judgeChangeWindows", () => {
  it("no window: unrestricted", () => {
    expect(judgeChangeWindows([], at("2026-12-01T12:00:00Z"))).toEqual({ state: "Unrestricted" });
  });

  it("inside an allow window: open until it ends", () => {
    const v = judgeChangeWindows([weekdayNine], at("2026-12-01T10:00:00Z"));
    expect(v).toEqual({ state: "Open", closesAt: at("2026-12-01T11:00:00Z") });
  });

  it("opens at the very instant the schedule fires, and not a millisecond before", () => {
    expect(judgeChangeWindows([weekdayNine], at("2026-12-01T09:00:00Z")).state).toBe("Open");
    const before = judgeChangeWindows([weekdayNine], at("2026-12-01T08:59:59.999Z"));
    expect(before).toEqual({ state: "Closed", opensAt: at("2026-12-01T09:00:00Z"), by: "outside-allow" });
  });

  it("closes at the instant the duration is over; the next opening is the next weekday", () => {
    const v = judgeChangeWindows([weekdayNine], at("2026-12-04T11:00:00Z")); // a Friday
    expect(v).toEqual({ state: "Closed", opensAt: at("2026-12-07T09:00:00Z"), by: "outside-allow" });
  });

  it("deny wins over allow, and the opening is where the deny ends inside the allow", () => {
    const deny: ChangeWindowSpec = { kind: "deny", schedule: "30 9 * * *", duration: "30m" };
    const v = judgeChangeWindows([weekdayNine, deny], at("2026-12-01T09:45:00Z"));
    expect(v).toEqual({ state: "Closed", opensAt: at("2026-12-01T10:00:00Z"), by: "deny" });
    // Open before the deny: the next change is the deny starting.
    expect(judgeChangeWindows([weekdayNine, deny], at("2026-12-01T09:10:00Z"))).toEqual({
      state: "Open",
      closesAt: at("2026-12-01T09:30:00Z"),
    });
  });

  it("a deny covering the rest of the allow window sends the opening to the next allow", () => {
    const deny: ChangeWindowSpec = { kind: "deny", schedule: "0 10 * * *", duration: "3h" };
    const v = judgeChangeWindows([weekdayNine, deny], at("2026-12-01T10:30:00Z"));
    expect(v).toEqual({ state: "Closed", opensAt: at("2026-12-02T09:00:00Z"), by: "deny" });
  });

  it("deny alone: open one second before it starts, closed at its start until its end", () => {
    const freeze: ChangeWindowSpec = { kind: "deny", schedule: "0 18 * * 5", duration: "63h" };
    expect(judgeChangeWindows([freeze], at("2026-12-04T17:59:59Z"))).toEqual({
      state: "Open",
      closesAt: at("2026-12-04T18:00:00Z"),
    });
    expect(judgeChangeWindows([freeze], at("2026-12-04T18:00:00Z"))).toEqual({
      state: "Closed",
      opensAt: at("2026-12-07T09:00:00Z"),
      by: "deny",
    });
  });

  it("reads the schedule in its time zone, winter and summer", () => {
    const berlin: ChangeWindowSpec = { ...weekdayNine, timeZone: "Europe/Berlin" };
    expect(
      iso((judgeChangeWindows([berlin], at("2026-12-01T06:00:00Z")) as { opensAt: number }).opensAt),
    ).toBe("2026-12-01T08:00:00.000Z");
    expect(
      iso((judgeChangeWindows([berlin], at("2026-07-01T06:00:00Z")) as { opensAt: number }).opensAt),
    ).toBe("2026-07-01T07:00:00.000Z");
  });

  it("a wall-clock time the clocks jump over fires right after the jump", () => {
    // New York, 8 March 2026: 02:00 EST becomes 03:00 EDT; 02:30 does not exist that night.
    const w: ChangeWindowSpec = {
      kind: "allow",
      schedule: "30 2 * * *",
      duration: "30m",
      timeZone: "America/New_York",
    };
    const v = judgeChangeWindows([w], at("2026-03-08T06:00:00Z"));
    expect(v).toEqual({ state: "Closed", opensAt: at("2026-03-08T07:30:00Z"), by: "outside-allow" });
    expect(judgeChangeWindows([w], at("2026-03-08T07:45:00Z")).state).toBe("Open");
  });

  it("Lord Howe's half-hour clock changes: a skipped time moves by the jump, the time after the change back fires once", () => {
    // 4 October 2026: 02:00 (+10:30) becomes 02:30 (+11); 02:15 fires at 02:45, 15:45Z on the 3rd.
    const skipped: ChangeWindowSpec = {
      kind: "allow",
      schedule: "15 2 * * *",
      duration: "1h",
      timeZone: "Australia/Lord_Howe",
    };
    expect(judgeChangeWindows([skipped], at("2026-10-03T12:00:00Z"))).toEqual({
      state: "Closed",
      opensAt: at("2026-10-03T15:45:00Z"),
      by: "outside-allow",
    });
    // 5 April 2026: 02:00 (+11) becomes 01:30 (+10:30); 02:00 then comes once, at 15:30Z on the 4th.
    const after: ChangeWindowSpec = { ...skipped, schedule: "0 2 * * *" };
    expect(judgeChangeWindows([after], at("2026-04-04T12:00:00Z"))).toEqual({
      state: "Closed",
      opensAt: at("2026-04-04T15:30:00Z"),
      by: "outside-allow",
    });
  });

  it("a daily window longer than a day stays open across Lord Howe's change of the clocks (fast-check seed -1039387615)", () => {
    // cron-parser's search in this zone gave up at the change: the coverage seemed to end there.
    const ws: ChangeWindowSpec[] = [
      { kind: "allow", schedule: "0 2 * * *", duration: "26h", timeZone: "Australia/Lord_Howe" },
    ];
    const v = judgeChangeWindows(ws, at("2026-03-20T00:00:00Z"));
    expect(v.state).toBe("Open");
    const closesAt = (v as { closesAt: number }).closesAt;
    expect(closesAt).toBeGreaterThan(at("2026-10-05T00:00:00Z"));
    for (let t = at("2026-04-04T12:00:00Z"); t < at("2026-04-06T00:00:00Z"); t += 15 * 60_000) {
      expect(judgeChangeWindows(ws, t).state).toBe("Open");
    }
  });

  it("a minutely allow window a day long is open, and the next look is within the fires read (COVERAGE_FIRES)", () => {
    const w: ChangeWindowSpec = { kind: "allow", schedule: "* * * * *", duration: "26h" };
    const now = at("2026-12-01T10:00:00Z");
    const v = judgeChangeWindows([w], now);
    expect(v).toEqual({ state: "Open", closesAt: now + 26 * 3_600_000 + COVERAGE_FIRES * 60_000 });
  });

  it("a wall-clock time that happens twice when the clocks go back fires once", () => {
    // New York, 1 November 2026: 01:00-02:00 happens twice (EDT, then EST).
    const w: ChangeWindowSpec = {
      kind: "allow",
      schedule: "30 1 * * *",
      duration: "20m",
      timeZone: "America/New_York",
    };
    expect(judgeChangeWindows([w], at("2026-11-01T05:40:00Z")).state).toBe("Open"); // 01:40 EDT
    const second = judgeChangeWindows([w], at("2026-11-01T06:40:00Z")); // 01:40 EST
    expect(second).toEqual({ state: "Closed", opensAt: at("2026-11-02T06:30:00Z"), by: "outside-allow" });
    // Asked from between the two passes, the next opening is still the next day, not the second pass.
    expect(judgeChangeWindows([w], at("2026-11-01T06:00:00Z"))).toEqual(second);
  });

  it("a duration is elapsed time across a change of the clocks", () => {
    const w: ChangeWindowSpec = {
      kind: "allow",
      schedule: "0 1 * * *",
      duration: "2h",
      timeZone: "America/New_York",
    };
    expect(judgeChangeWindows([w], at("2026-11-01T06:59:59Z")).state).toBe("Open");
    expect(judgeChangeWindows([w], at("2026-11-01T07:00:00Z")).state).toBe("Closed");
  });

  it("fires that open before the coverage ends chain on", () => {
    const hours: ChangeWindowSpec = { kind: "allow", schedule: "0 9-11 * * *", duration: "90m" };
    expect(judgeChangeWindows([hours], at("2026-12-01T09:59:59Z"))).toEqual({
      state: "Open",
      closesAt: at("2026-12-01T12:30:00Z"),
    });
    const back2back: ChangeWindowSpec[] = [
      { kind: "allow", schedule: "0 9 * * *", duration: "1h" },
      { kind: "allow", schedule: "0 10 * * *", duration: "1h" },
    ];
    expect(judgeChangeWindows(back2back, at("2026-12-01T09:30:00Z"))).toEqual({
      state: "Open",
      closesAt: at("2026-12-01T11:00:00Z"),
    });
  });

  it("a six-field schedule has seconds", () => {
    const w: ChangeWindowSpec = { kind: "allow", schedule: "30 0 9 * * *", duration: "10s" };
    expect(judgeChangeWindows([w], at("2026-12-01T09:00:35Z")).state).toBe("Open");
    expect(judgeChangeWindows([w], at("2026-12-01T09:00:40Z")).state).toBe("Closed");
  });

  it("a schedule that never fires within the horizon has no next opening", () => {
    const newYear: ChangeWindowSpec = { kind: "allow", schedule: "0 0 1 1 *", duration: "1h" };
    const frozen: ChangeWindowSpec = { kind: "deny", schedule: "0 0 1 1 *", duration: "1h" };
    expect(judgeChangeWindows([newYear, frozen], at("2026-12-01T00:00:00Z"))).toEqual({
      state: "Closed",
      opensAt: null,
      by: "outside-allow",
    });
  });

  it("an unreadable window closes the folder", () => {
    const now = at("2026-12-01T10:00:00Z");
    for (const bad of [
      { ...weekdayNine, schedule: "every day" },
      { ...weekdayNine, duration: "2 hours" },
      { ...weekdayNine, timeZone: "Mars/Olympus" },
    ]) {
      const v = judgeChangeWindows([weekdayNine, bad], now);
      expect(v.state).toBe("Invalid");
    }
  });

  it("leap day schedules open on the next leap day", () => {
    const w: ChangeWindowSpec = { kind: "allow", schedule: "0 0 29 2 *", duration: "1h" };
    expect(judgeChangeWindows([w], at("2027-03-01T00:00:00Z"))).toEqual({
      state: "Closed",
      opensAt: at("2028-02-29T00:00:00Z"),
      by: "outside-allow",
    });
  });
});

describe("judgeChangeWindows: a deny that never ends", () => {
  it("a minutely deny window with a long duration holds everything, with no opening", () => {
    const w: ChangeWindowSpec = { kind: "deny", schedule: "* * * * *", duration: "63h" };
    const v = judgeChangeWindows([w, weekdayNine], at("2026-12-01T10:00:00Z"));
    expect(v).toEqual({ state: "Closed", opensAt: null, by: "deny" });
  });
});

describe("judgeChangeWindows, by property", () => {
  const open = (ws: ChangeWindowSpec[], t: number) => {
    const s = judgeChangeWindows(ws, t).state;
    return s === "Open" || s === "Unrestricted";
  };
  const windowArb = fc.record({
    kind: fc.constantFrom("allow" as const, "deny" as const),
    schedule: fc
      .tuple(
        fc.integer({ min: 0, max: 59 }),
        fc.integer({ min: 0, max: 23 }),
        fc.constantFrom("*", "1-5", "0,6", "3"),
      )
      .map(([m, h, dow]) => `${m} ${h} * * ${dow}`),
    duration: fc.constantFrom("30m", "1h", "2h30m", "8h", "26h"),
    timeZone: fc.constantFrom(
      "UTC",
      "Europe/Berlin",
      "America/New_York",
      "Australia/Lord_Howe",
      "Asia/Kolkata",
    ),
  });
  const start = at("2026-01-01T00:00:00Z");
  const year = 365 * 24 * 3_600_000;

  it("closed until the next opening and open at it; open until the next possible close", {
    timeout: 120_000,
  }, () => {
    fc.assert(
      fc.property(
        fc.array(windowArb, { minLength: 1, maxLength: 3 }),
        fc.integer({ min: 0, max: year }),
        (ws, dt) => {
          const now = start + dt;
          const v = judgeChangeWindows(ws, now);
          if (v.state === "Closed" && v.opensAt !== null) {
            expect(v.opensAt).toBeGreaterThan(now);
            expect(open(ws, v.opensAt)).toBe(true);
            // Closed at every minute before it (sampled), so the worker's wake is the first chance.
            const step = Math.max(60_000, Math.floor((v.opensAt - now) / 4));
            for (let t = now; t < v.opensAt; t += step) expect(open(ws, t)).toBe(false);
            expect(open(ws, v.opensAt - 1)).toBe(false);
          }
          if (v.state === "Open" && v.closesAt !== null) {
            expect(v.closesAt).toBeGreaterThan(now);
            const step = Math.max(60_000, Math.floor((v.closesAt - now) / 4));
            for (let t = now; t < v.closesAt; t += step) expect(open(ws, t)).toBe(true);
          }
        },
      ),
      { numRuns: 20 },
    );
  });

  it("windows of several objects: open exactly where every object's own windows are open", {
    timeout: 120_000,
  }, () => {
    const tagged = fc.array(
      fc.record({ from: fc.constantFrom("FluxClaim a/c", "GitTarget a/t"), w: windowArb }),
      { minLength: 1, maxLength: 4 },
    );
    fc.assert(
      fc.property(tagged, fc.integer({ min: 0, max: year }), (entries, dt) => {
        const now = start + dt;
        const ws = entries.map((e) => ({ from: e.from, ...e.w }));
        const apart = [...new Set(entries.map((e) => e.from))].map((from) =>
          entries.filter((e) => e.from === from).map((e) => e.w),
        );
        const together = (t: number) => apart.every((own) => open(own, t));
        expect(open(ws, now)).toBe(together(now));
        const v = judgeChangeWindows(ws, now);
        if (v.state === "Closed" && v.opensAt !== null) {
          expect(together(v.opensAt)).toBe(true);
          const step = Math.max(60_000, Math.floor((v.opensAt - now) / 4));
          for (let t = now; t < v.opensAt; t += step) expect(together(t)).toBe(false);
        }
        if (v.state === "Open" && v.closesAt !== null) {
          const step = Math.max(60_000, Math.floor((v.closesAt - now) / 4));
          for (let t = now; t < v.closesAt; t += step) expect(together(t)).toBe(true);
        }
      }),
      { numRuns: 20 },
    );
  });
});
