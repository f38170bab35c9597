/**
 * Change windows (pure): whether an apply may start at a moment, and when the next opening is.
 *
 * A window is a cron schedule in a time zone and a duration: it is active from each time the
 * schedule fires until the duration has passed. `allow` windows open the folder (when a claim has
 * any, an apply may start only inside one), `deny` windows close it, and deny wins over allow.
 * No window at all: always open.
 *
 * The schedule is read by `cron-parser` on the zone's wall-clock times, in UTC where it has no
 * clock changes to search through, and each fire is mapped to its instant (wall-time.ts), so every
 * question is answered from the same list of fire times:
 * - a wall-clock time skipped by a daylight-saving jump forward fires at the first moment after
 *   the jump with the same minutes (02:30 on a night that goes from 02:00 to 03:00 fires at 03:30);
 * - a wall-clock time that happens twice when the clocks go back fires once, at its first
 *   occurrence;
 * - a duration is elapsed time: a 2h window opened at 01:00 on the night the clocks go back ends
 *   two real hours later, at 02:00 of the repeated hour's second pass.
 *
 * A schedule, duration or time zone that cannot be read closes the folder: a control that is
 * misconfigured holds applies rather than letting them through.
 */
import { CronExpressionParser } from "cron-parser";
import { DURATION_PATTERN } from "../crds/governance.js";
import { errorMessage } from "../errors.js";
import type { ChangeWindowKind, ChangeWindowSpec } from "./model.js";
import { instantOf, isUtc, MAX_CLOCK_CHANGE_MS, wallTimeOf } from "./wall-time.js";

/** Milliseconds of a duration, or null when it is not one (or is zero). */
export function parseDuration(d: string): number | null {
  const m = DURATION_PATTERN.exec(d);
  if (!m) return null;
  const ms = (Number(m[1] ?? 0) * 3600 + Number(m[2] ?? 0) * 60 + Number(m[3] ?? 0)) * 1000;
  return ms > 0 ? ms : null;
}

/** Whether a time zone name is one the runtime knows. */
export function isTimeZone(tz: string): boolean {
  try {
    new Intl.DateTimeFormat("en-US", { timeZone: tz });
    return true;
  } catch {
    return false;
  }
}

/** A window read into what the evaluation needs; an unreadable one is `invalid`. */
type Readable =
  | { ok: true; kind: ChangeWindowKind; durationMs: number; tz: string; schedule: string; from: string }
  | { ok: false; why: string };

function read(w: ChangeWindowSpec): Readable {
  const tz = w.timeZone ?? "UTC";
  const durationMs = parseDuration(w.duration);
  if (durationMs === null) return { ok: false, why: `duration ${JSON.stringify(w.duration)} is not one` };
  if (!isTimeZone(tz)) return { ok: false, why: `time zone ${JSON.stringify(tz)} is unknown` };
  try {
    CronExpressionParser.parse(w.schedule, { tz: "UTC" });
  } catch (err) {
    return { ok: false, why: `schedule ${JSON.stringify(w.schedule)}: ${errorMessage(err)}` };
  }
  return { ok: true, kind: w.kind, durationMs, tz, schedule: w.schedule, from: w.from ?? "" };
}

/**
 * Fire times strictly after `after` and at most `until`, in order. Wall times follow each other,
 * but the instants they name may not around a change of the clocks (a time the clocks jumped over
 * moves later than the next ones): an instant is given once no later wall time can name an
 * earlier one, a clock change's length further on.
 */
function* fires(w: Extract<Readable, { ok: true }>, after: number, until: number): Generator<number> {
  const slack = isUtc(w.tz) ? 0 : MAX_CLOCK_CHANGE_MS;
  const it = CronExpressionParser.parse(w.schedule, {
    tz: "UTC",
    currentDate: new Date(wallTimeOf(after, w.tz) - slack),
  });
  const pending: number[] = [];
  let last = Number.NEGATIVE_INFINITY;
  const settled = function* (upTo: number): Generator<number> {
    while (pending.length > 0 && pending[0]! <= upTo) {
      const t = pending.shift()!;
      if (t > last) {
        last = t;
        yield t;
      }
    }
  };
  for (let i = 0; i < 100_000; i++) {
    let t: number;
    try {
      t = instantOf(it.next().getTime(), w.tz);
    } catch {
      break; // a schedule that never fires again (e.g. a date that does not come)
    }
    if (t > after && t <= until) {
      const at = pending.findIndex((p) => p >= t);
      if (at < 0) pending.push(t);
      else if (pending[at] !== t) pending.splice(at, 0, t);
    }
    yield* settled(t - slack);
    if (t - slack > until) break;
  }
  yield* settled(Number.POSITIVE_INFINITY);
}

/** The first fire time strictly after `after`, or null when there is none before `until`. */
function nextFire(w: Extract<Readable, { ok: true }>, after: number, until: number): number | null {
  for (const t of fires(w, after, until)) return t;
  return null;
}

/**
 * When the window covers `t` (a fire `f` with `f <= t < f + duration`): the latest end among the
 * fires covering it, else null. Only the latest fires can cover t: the search starts near the one
 * before t (`prev` may miss a fire a jump forward moved, hence a clock change further back), so a
 * minutely schedule with a long duration stays cheap.
 */
function coverEnd(w: Extract<Readable, { ok: true }>, t: number): number | null {
  const slack = isUtc(w.tz) ? 1 : MAX_CLOCK_CHANGE_MS;
  let from = t - w.durationMs - slack;
  try {
    const it = CronExpressionParser.parse(w.schedule, {
      tz: "UTC",
      currentDate: new Date(wallTimeOf(t, w.tz) + 1),
    });
    from = Math.max(from, instantOf(it.prev().getTime(), w.tz) - slack);
  } catch {
    // no earlier fire: search from the start of the duration
  }
  let end: number | null = null;
  for (const f of fires(w, from, t)) if (f + w.durationMs > t) end = Math.max(end ?? 0, f + w.durationMs);
  return end;
}

/**
 * How many fires the search for the end of an allow coverage reads at most. Past that the end
 * found so far is the next moment worth a look (the worker judges again then): a minutely window
 * a day long would otherwise be read fire by fire for the whole horizon, seconds of CPU a
 * question (200 fires are more than six months of a daily window).
 */
export const COVERAGE_FIRES = 200;

/**
 * Where the allow coverage holding `t` ends: fires that open before (or as) it ends chain on. The
 * windows' fires are read once, merged in time order.
 */
function allowCoverageEnd(allows: Extract<Readable, { ok: true }>[], t: number): number {
  let end = Math.max(...allows.map((w) => coverEnd(w, t) ?? t));
  const streams = allows.map((w) => {
    const it = fires(w, t, t + OPENING_HORIZON_MS);
    return { w, it, at: it.next().value };
  });
  for (let read = 0; read < COVERAGE_FIRES; read++) {
    let first: (typeof streams)[number] | undefined;
    for (const s of streams) {
      if (s.at !== undefined && (first?.at === undefined || s.at < first.at)) first = s;
    }
    if (first?.at === undefined || first.at > end) return end;
    end = Math.max(end, first.at + first.w.durationMs);
    first.at = first.it.next().value;
  }
  return end;
}

/** How far ahead an opening is looked for. */
export const OPENING_HORIZON_MS = 400 * 24 * 3_600_000;

export type WindowVerdict =
  /** No window set: nothing to show. */
  | { state: "Unrestricted" }
  /** An apply may start; `closesAt` is the next moment that may change (null: never within the horizon). */
  | { state: "Open"; closesAt: number | null }
  /** No apply may start; `opensAt` is the next opening (null: none within the horizon). */
  | { state: "Closed"; opensAt: number | null; by: "deny" | "outside-allow" }
  /** A window cannot be read: closed until it is fixed. */
  | { state: "Invalid"; message: string };

/** The allow windows of each object that sets any (windows without `from` are one object's). */
function allowSets(ws: Extract<Readable, { ok: true }>[]): Extract<Readable, { ok: true }>[][] {
  const sets = new Map<string, Extract<Readable, { ok: true }>[]>();
  for (const w of ws) {
    if (w.kind !== "allow") continue;
    const set = sets.get(w.from) ?? [];
    set.push(w);
    sets.set(w.from, set);
  }
  return [...sets.values()];
}

function isOpenAt(ws: Extract<Readable, { ok: true }>[], t: number): boolean {
  if (ws.some((w) => w.kind === "deny" && coverEnd(w, t) !== null)) return false;
  return allowSets(ws).every((set) => set.some((w) => coverEnd(w, t) !== null));
}

const verdicts = new Map<string, WindowVerdict>();

/**
 * The verdict of `windows` at `now`: deny wins over allow; with allow windows, only inside one.
 * A step asks the same question several times (is it due, what the claim shows, when to wake):
 * the last answers are kept, keyed by the windows and the moment.
 */
export function judgeChangeWindows(windows: readonly ChangeWindowSpec[], now: number): WindowVerdict {
  if (windows.length === 0) return { state: "Unrestricted" };
  const key = `${now}|${JSON.stringify(windows)}`;
  const known = verdicts.get(key);
  if (known) return known;
  const v = judge(windows, now);
  if (verdicts.size >= 64) verdicts.delete(verdicts.keys().next().value as string);
  verdicts.set(key, v);
  return v;
}

function judge(windows: readonly ChangeWindowSpec[], now: number): WindowVerdict {
  const ws: Extract<Readable, { ok: true }>[] = [];
  for (const w of windows) {
    const r = read(w);
    if (!r.ok) return { state: "Invalid", message: r.why };
    ws.push(r);
  }
  const denies = ws.filter((w) => w.kind === "deny");
  const sets = allowSets(ws);
  const until = now + OPENING_HORIZON_MS;
  if (isOpenAt(ws, now)) {
    // The next moment the verdict may change: the end of an object's allow coverage, or a deny starting.
    const candidates: number[] = [];
    for (const set of sets) candidates.push(allowCoverageEnd(set, now));
    for (const d of denies) {
      const f = nextFire(d, now, until);
      if (f !== null) candidates.push(f);
    }
    return { state: "Open", closesAt: candidates.length === 0 ? null : Math.min(...candidates) };
  }
  const deniedNow = denies.some((w) => coverEnd(w, now) !== null);
  // Walk forward: past the deny coverage, or to the next allow opening, until open.
  let t = now;
  for (let i = 0; i < 1000 && t <= until; i++) {
    if (isOpenAt(ws, t)) return { state: "Closed", opensAt: t, by: deniedNow ? "deny" : "outside-allow" };
    const denyEnds = denies.map((w) => coverEnd(w, t)).filter((e): e is number => e !== null);
    if (denyEnds.length > 0) {
      t = Math.max(...denyEnds);
      continue;
    }
    // Nothing opens before an object whose allow windows do not cover t fires one: the earliest
    // such fire is the next moment worth a look (an object already covered may close meanwhile,
    // which only delays the opening).
    const uncovered = sets.filter((set) => !set.some((w) => coverEnd(w, t) !== null));
    const opens = uncovered
      .flat()
      .map((w) => nextFire(w, t, until))
      .filter((f): f is number => f !== null);
    if (opens.length === 0) break;
    t = Math.min(...opens);
  }
  return { state: "Closed", opensAt: null, by: deniedNow ? "deny" : "outside-allow" };
}
