/**
 * Argo CD's own sync windows (pure): the windows of an Application's AppProject, judged the way
 * Argo CD 3.5's application controller judges them (`SyncWindows.Matches`, `active`, `CanSync`),
 * so the claim can say why a sync applygate would ask for would wait, and until when.
 *
 * What Argo CD does, and so what is computed here:
 * - A window belongs to an Application when one of its `applications` globs matches the
 *   Application's name, one of its `clusters` globs the destination's name or server, or one of
 *   its `namespaces` globs the destination namespace (all of the lists given, with `andOperator`).
 * - A window is active at `t` when its schedule's next firing after `t − duration` comes before
 *   `t` (robfig/cron `Next(...).Before(t)`): active on the open interval (fire, fire + duration),
 *   so at the very instant a schedule fires the window is not active yet, and at the instant its
 *   duration ends it is no longer active.
 * - The schedule is five cron fields (minute hour day-of-month month day-of-week), read in UTC
 *   against the wall clock of `timeZone` at the zone's offset of the moment judged (Argo CD adds
 *   that offset to the time); an unknown zone counts as UTC, as Argo CD logs and does.
 * - `CanSync`: an active deny blocks (a manual sync passes only when every active deny has
 *   `manualSync`); else an active allow lets the sync through; else, with allow windows (none
 *   active), the sync is blocked (a manual one passes when every such allow has `manualSync`); a
 *   project with no matching window never blocks. A schedule or duration that cannot be read blocks.
 *
 * applygate starts its syncs as automated (`initiatedBy.automated: true`), so `manualSync` never
 * lets one through. Argo CD checks the windows at every pass over an operation, not only when it
 * starts: an operation already out when a deny window begins is held `Running` ("Sync operation
 * blocked by sync window") until the window ends.
 */
import { CronExpressionParser } from "cron-parser";
import { errorMessage } from "../errors.js";
import { isTimeZone, OPENING_HORIZON_MS } from "../governance/change-windows.js";
import type { SyncWindowSpec } from "../governance/model.js";
import { zoneOffsetMs } from "../governance/wall-time.js";

/** What the matching reads of an Application: its name and `spec.destination`. */
export interface SyncWindowApp {
  name: string;
  destination?: { namespace?: string; server?: string; name?: string };
}

/** A glob as Argo CD's `glob.Match` reads one: `*`, `?`, `[abc]`, `{a,b}`; the rest literally. */
export function globMatch(pattern: string, text: string): boolean {
  let re = "";
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i] as string;
    if (c === "*") re += ".*";
    else if (c === "?") re += ".";
    else if (c === "[") {
      const end = pattern.indexOf("]", i + 1);
      if (end < 0) re += "\\[";
      else {
        const body = pattern.slice(i + 1, end).replace(/\\/g, "\\\\");
        re += `[${body.startsWith("!") ? `^${body.slice(1)}` : body}]`;
        i = end;
      }
    } else if (c === "{") {
      const end = pattern.indexOf("}", i + 1);
      if (end < 0) re += "\\{";
      else {
        const alts = pattern.slice(i + 1, end).split(",");
        re += `(?:${alts.map((a) => a.replace(/[.+^${}()|[\]\\*?]/g, "\\$&")).join("|")})`;
        i = end;
      }
    } else re += c.replace(/[.+^${}()|[\]\\]/g, "\\$&");
  }
  try {
    return new RegExp(`^${re}$`, "s").test(text);
  } catch {
    return pattern === text;
  }
}

/** The project's windows that belong to the Application (`SyncWindows.Matches`). */
export function matchSyncWindows(windows: readonly SyncWindowSpec[], app: SyncWindowApp): SyncWindowSpec[] {
  const dst = app.destination ?? {};
  return windows.filter((w) => {
    const tests: boolean[] = [];
    if (w.applications?.length) tests.push(w.applications.some((a) => globMatch(a, app.name)));
    if (w.clusters?.length)
      tests.push(
        w.clusters.some(
          (c) => (!!dst.name && globMatch(c, dst.name)) || (!!dst.server && globMatch(c, dst.server)),
        ),
      );
    if (w.namespaces?.length) tests.push(w.namespaces.some((n) => globMatch(n, dst.namespace ?? "")));
    if (tests.length === 0) return false;
    return w.andOperator ? tests.every(Boolean) : tests.some(Boolean);
  });
}

/** Go's `time.ParseDuration` for the units a window uses (h, m, s, ms, us, µs, ns); ms, or null. */
export function parseGoDuration(d: string): number | null {
  const s = d.trim();
  if (s === "0") return 0;
  if (
    !/^(?:\d+(?:\.\d*)?|\.\d+)(?:h|m|s|ms|us|µs|ns)(?:(?:\d+(?:\.\d*)?|\.\d+)(?:h|m|s|ms|us|µs|ns))*$/.test(s)
  )
    return null;
  const unit: Record<string, number> = {
    h: 3_600_000,
    m: 60_000,
    s: 1000,
    ms: 1,
    us: 1e-3,
    µs: 1e-3,
    ns: 1e-6,
  };
  let ms = 0;
  for (const m of s.matchAll(/(\d+(?:\.\d*)?|\.\d+)(h|ms|m|s|us|µs|ns)/g))
    ms += Number(m[1]) * (unit[m[2] as string] as number);
  return Math.round(ms);
}

interface Readable {
  kind: string;
  durationMs: number;
  tz: string;
  schedule: string;
  manualSync: boolean;
}

function read(w: SyncWindowSpec): Readable | { error: string } {
  const fields = w.schedule.trim().split(/\s+/);
  if (fields.length !== 5 || w.schedule.trim().startsWith("@"))
    return { error: `cannot parse schedule '${w.schedule}': expected exactly 5 fields` };
  try {
    CronExpressionParser.parse(w.schedule, { tz: "UTC" });
  } catch (err) {
    return { error: `cannot parse schedule '${w.schedule}': ${errorMessage(err)}` };
  }
  const durationMs = parseGoDuration(w.duration);
  if (durationMs === null) return { error: `cannot parse duration '${w.duration}'` };
  const tz = w.timeZone && isTimeZone(w.timeZone) ? w.timeZone : "UTC";
  return { kind: w.kind, durationMs, tz, schedule: w.schedule, manualSync: w.manualSync === true };
}

/** Argo CD's `CanSync`, given which of the windows are active. */
function decide(
  ws: readonly Readable[],
  active: readonly boolean[],
  manual: boolean,
): { ok: boolean; by?: "deny" | "outside-allow" } {
  const denies = ws.filter((w, i) => active[i] && w.kind === "deny");
  if (denies.length > 0)
    return manual && denies.every((w) => w.manualSync) ? { ok: true } : { ok: false, by: "deny" };
  if (ws.some((w, i) => active[i] && w.kind === "allow")) return { ok: true };
  const inactiveAllows = ws.filter((w) => w.kind === "allow");
  if (inactiveAllows.length > 0)
    return manual && inactiveAllows.every((w) => w.manualSync)
      ? { ok: true }
      : { ok: false, by: "outside-allow" };
  return { ok: true };
}

/**
 * The edges of one window from `now` on, in order: +1 the first millisecond after a firing (the
 * window becomes active), −1 when its duration has passed. Each firing is read once from one cron
 * iterator, on the wall clock of the zone at its offset at `now` (Argo CD reads the offset of the
 * moment it judges; around a daylight-saving change the next judgement corrects it).
 */
class Edges {
  private readonly it;
  private readonly off: number;
  /** Pending edges of fires read so far, in time order. */
  private readonly queue: { at: number; delta: 1 | -1 }[] = [];
  private done = false;
  /** The open edge of the last fire read: no fire not read yet has an edge before it. */
  private lastOpen = Number.NEGATIVE_INFINITY;

  constructor(
    private readonly w: Readable,
    now: number,
  ) {
    this.off = zoneOffsetMs(w.tz, now);
    this.it = CronExpressionParser.parse(w.schedule, {
      tz: "UTC",
      currentDate: new Date(now + this.off - w.durationMs),
    });
  }

  private pull(): void {
    if (this.done) return;
    let f: number;
    try {
      f = this.it.next().getTime();
    } catch {
      this.done = true;
      return;
    }
    const open = f - this.off + 1;
    const close = f + this.w.durationMs - this.off;
    this.lastOpen = open;
    if (close <= open) return; // a zero duration is never active
    this.insert({ at: open, delta: 1 });
    this.insert({ at: close, delta: -1 });
  }

  private insert(e: { at: number; delta: 1 | -1 }) {
    let i = this.queue.length;
    while (i > 0 && (this.queue[i - 1] as { at: number }).at > e.at) i--;
    this.queue.splice(i, 0, e);
  }

  /** The time of the next edge (reading fires as needed), or null when the schedule ends. */
  peek(): number | null {
    // Fires come in order, so a fire not read yet opens after the last one read: the first edge
    // queued is the next one once it is no later than that opening.
    while (!this.done && (this.queue.length === 0 || (this.queue[0] as { at: number }).at > this.lastOpen))
      this.pull();
    return this.queue[0]?.at ?? null;
  }

  take(): 1 | -1 {
    const e = this.queue.shift() as { at: number; delta: 1 | -1 };
    return e.delta;
  }
}

interface Walk {
  /** Whether CanSync says yes at `now`, and who blocks. */
  now: { ok: boolean; by?: "deny" | "outside-allow" };
  /** The first moment after `now` at which the answer flips (null: none within the horizon). */
  flipsAt: number | null;
}

/**
 * Walks the window edges from `now`: the answer now, and when it first changes. Each zone's offset
 * is read at `now` and holds until it changes (a daylight-saving switch): from there, where Argo CD
 * judging then reads the new offset, the walk goes on with it. Walked on `now`'s offset alone, an
 * edge past a switch was an hour off (an allow window of one minute a month missed for a month:
 * the property test's counterexample, America/New_York from November to August).
 */
function walk(ws: readonly Readable[], now: number, manual: boolean): Walk {
  const horizon = now + OPENING_HORIZON_MS;
  const first = walkAtOffsets(ws, now, manual, horizon);
  let from = now;
  let seg = first;
  for (;;) {
    const change = nextOffsetChange(ws, from, seg.flipsAt ?? horizon);
    if (change === null) return { now: first.now, flipsAt: seg.flipsAt };
    seg = walkAtOffsets(ws, change, manual, horizon);
    if (seg.now.ok !== first.now.ok) return { now: first.now, flipsAt: change };
    from = change;
  }
}

/** How often a zone's offset is sampled for a change: switches are months apart. */
const OFFSET_SAMPLE_MS = 7 * 86_400_000;

/** The first moment in (from, to] at which some window's zone reads another offset than at `from`. */
function nextOffsetChange(ws: readonly Readable[], from: number, to: number): number | null {
  let first: number | null = null;
  for (const tz of new Set(ws.map((w) => w.tz))) {
    const at = zoneOffsetMs(tz, from);
    const changed = (t: number) => zoneOffsetMs(tz, t) !== at;
    let lo = from;
    let hi = Math.min(from + OFFSET_SAMPLE_MS, to);
    while (!changed(hi) && hi < to) {
      lo = hi;
      hi = Math.min(hi + OFFSET_SAMPLE_MS, to);
    }
    if (!changed(hi)) continue;
    // The first millisecond that reads the new offset.
    while (hi - lo > 1) {
      const mid = Math.floor((lo + hi) / 2);
      if (changed(mid)) hi = mid;
      else lo = mid;
    }
    if (first === null || hi < first) first = hi;
  }
  return first;
}

/** The walk on the zones' offsets at `now`, up to `until`. */
function walkAtOffsets(ws: readonly Readable[], now: number, manual: boolean, until: number): Walk {
  const edges = ws.map((w) => new Edges(w, now));
  const open = ws.map(() => 0);
  const advanceTo = (t: number) => {
    for (let i = 0; i < edges.length; i++) {
      const e = edges[i] as Edges;
      for (let at = e.peek(); at !== null && at <= t; at = e.peek()) open[i] = (open[i] as number) + e.take();
    }
  };
  advanceTo(now);
  const first = decide(
    ws,
    open.map((n) => n > 0),
    manual,
  );
  // Open, it can only close through a window that holds this sync: else no walk is needed.
  const passes = (w: Readable) => manual && w.manualSync;
  const canClose =
    ws.some((w) => w.kind === "deny" && !passes(w)) ||
    (ws.some((w) => w.kind === "allow") && !ws.filter((w) => w.kind === "allow").every(passes));
  if (first.ok && !canClose) return { now: first, flipsAt: null };
  for (let i = 0; i < 5000; i++) {
    let next: number | null = null;
    for (const e of edges) {
      const at = e.peek();
      if (at !== null && (next === null || at < next)) next = at;
    }
    if (next === null || next > until) break;
    advanceTo(next);
    if (
      decide(
        ws,
        open.map((n) => n > 0),
        manual,
      ).ok !== first.ok
    )
      return { now: first, flipsAt: next };
  }
  return { now: first, flipsAt: null };
}

export type SyncWindowVerdict =
  /** No window of the project belongs to the Application. */
  | { state: "Unrestricted" }
  /** Argo CD would run a sync now; `closesAt`: the next moment it would not (null: none in the horizon). */
  | { state: "Open"; closesAt: number | null }
  /** Argo CD would hold a sync now; `opensAt`: the first moment it would run one (null: none in the horizon). */
  | { state: "Blocked"; opensAt: number | null; by: "deny" | "outside-allow" }
  /** A window cannot be read: Argo CD blocks every sync of the Application until it is fixed. */
  | { state: "Invalid"; message: string };

const verdicts = new Map<string, SyncWindowVerdict>();

/**
 * Whether Argo CD would run a sync of the Application at `now`, given the windows that belong to
 * it (`matchSyncWindows`), and when that changes. `manual` is false for applygate's syncs.
 */
export function judgeSyncWindows(
  windows: readonly SyncWindowSpec[],
  now: number,
  manual = false,
): SyncWindowVerdict {
  if (windows.length === 0) return { state: "Unrestricted" };
  const key = `${now}|${manual}|${JSON.stringify(windows)}`;
  const known = verdicts.get(key);
  if (known) return known;
  const ws: Readable[] = [];
  let v: SyncWindowVerdict | undefined;
  for (const w of windows) {
    const r = read(w);
    if ("error" in r) {
      v = { state: "Invalid", message: `invalid sync windows: ${r.error}` };
      break;
    }
    ws.push(r);
  }
  if (!v) {
    const r = walk(ws, now, manual);
    v = r.now.ok
      ? { state: "Open", closesAt: r.flipsAt }
      : { state: "Blocked", opensAt: r.flipsAt, by: r.now.by ?? "deny" };
  }
  if (verdicts.size >= 64) verdicts.delete(verdicts.keys().next().value as string);
  verdicts.set(key, v);
  return v;
}
