/**
 * Sync windows as Argo CD 3.5 decides them (SyncWindows.Matches, active, CanSync, hasDeny,
 * manualEnabled): standard 5-field cron in UTC; a window is active when the schedule's next firing
 * after (now + offset − duration) is before now + offset, where offset is the window's timeZone's
 * offset from UTC at the moment judged (`scheduleOffsetByTimeZone`; an unknown zone is UTC).
 * syncOverrun is not reproduced.
 */
import { parseDuration } from "./retry.js";
import type { Application, SyncWindow } from "./types.js";

interface CronField {
  values: Set<number>;
  star: boolean;
}

const ranges: [number, number][] = [
  [0, 59],
  [0, 23],
  [1, 31],
  [1, 12],
  [0, 6],
];

function parseField(text: string, [lo, hi]: [number, number]): CronField {
  const values = new Set<number>();
  const star = text.startsWith("*") || text.startsWith("?");
  for (const part of text.split(",")) {
    const [base = "", stepText] = part.split("/");
    const step = stepText ? Number(stepText) : 1;
    let from: number;
    let to: number;
    if (base === "*" || base === "?") [from, to] = [lo, hi];
    else if (base.includes("-")) [from, to] = base.split("-").map(Number) as [number, number];
    else {
      from = Number(base);
      to = stepText ? hi : from;
    }
    if (![from, to, step].every(Number.isInteger) || from < lo || to > hi || step < 1)
      throw new Error(`cannot parse schedule field '${text}'`);
    for (let v = from; v <= to; v += step) values.add(v === 7 && hi === 6 ? 0 : v);
  }
  return { values, star };
}

export interface Cron {
  fields: CronField[];
}

export function parseCron(schedule: string): Cron {
  const parts = schedule.trim().split(/\s+/);
  if (parts.length !== 5) throw new Error(`cannot parse schedule '${schedule}'`);
  return { fields: parts.map((p, i) => parseField(p, ranges[i] as [number, number])) };
}

function matches(c: Cron, d: Date): boolean {
  const [mi, h, dom, mon, dow] = c.fields as [CronField, CronField, CronField, CronField, CronField];
  if (!mi.values.has(d.getUTCMinutes()) || !h.values.has(d.getUTCHours())) return false;
  if (!mon.values.has(d.getUTCMonth() + 1)) return false;
  const domOk = dom.values.has(d.getUTCDate());
  const dowOk = dow.values.has(d.getUTCDay());
  // robfig/cron: when either day field is a star, both must match; otherwise either may.
  return dom.star || dow.star ? domOk && dowOk : domOk || dowOk;
}

/** The first firing strictly after t (whole minutes), or undefined within ~5 years. */
export function nextFiring(c: Cron, t: number): number | undefined {
  let m = Math.floor(t / 60_000) * 60_000 + 60_000;
  for (let i = 0; i < 5 * 366 * 24 * 60; i++, m += 60_000) if (matches(c, new Date(m))) return m;
  return undefined;
}

/** The zone's offset from UTC at `t` in ms (Go: `time.Now().In(loc).Zone()`); 0 for UTC or an unknown zone. */
export function tzOffset(tz: string | undefined, t: number): number {
  if (!tz || tz === "UTC") return 0;
  let parts: Intl.DateTimeFormatPart[];
  try {
    parts = new Intl.DateTimeFormat("en-US", {
      timeZone: tz,
      hourCycle: "h23",
      year: "numeric",
      month: "numeric",
      day: "numeric",
      hour: "numeric",
      minute: "numeric",
      second: "numeric",
    }).formatToParts(new Date(t));
  } catch {
    return 0;
  }
  const p = Object.fromEntries(parts.map((x) => [x.type, Number(x.value)]));
  const wall = Date.UTC(p.year ?? 0, (p.month ?? 1) - 1, p.day, p.hour, p.minute, p.second);
  return wall - Math.floor(t / 1000) * 1000;
}

export function windowActive(w: SyncWindow, now: number): boolean {
  const cron = parseCron(w.schedule ?? "");
  const duration = parseDuration(w.duration ?? "");
  const local = now + tzOffset(w.timeZone, now);
  const next = nextFiring(cron, local - duration);
  return next !== undefined && next < local;
}

function glob(pattern: string, text: string): boolean {
  const re = pattern
    .replace(/[.+^${}()|[\]\\]/g, "\\$&")
    .replace(/\*/g, ".*")
    .replace(/\?/g, ".");
  return new RegExp(`^${re}$`).test(text);
}

/** The project's windows that apply to the Application (by name, cluster or namespace). */
export function matchingWindows(windows: SyncWindow[], app: Application): SyncWindow[] {
  const dst = app.spec.destination ?? {};
  return windows.filter((w) => {
    const tests: boolean[] = [];
    if (w.applications?.length) tests.push(w.applications.some((a) => glob(a, app.metadata.name)));
    if (w.clusters?.length)
      tests.push(
        w.clusters.some((c) => (!!dst.name && glob(c, dst.name)) || (!!dst.server && glob(c, dst.server))),
      );
    if (w.namespaces?.length) tests.push(w.namespaces.some((n) => glob(n, dst.namespace ?? "")));
    if (tests.length === 0) return false;
    return w.andOperator ? tests.every(Boolean) : tests.some(Boolean);
  });
}

/**
 * CanSync: an active deny blocks unless the sync is manual and every active deny allows manual
 * syncs; an active allow permits; otherwise inactive allows block unless manual and all of them
 * allow manual syncs. A window that cannot be parsed blocks (Argo CD treats the error as blocked).
 */
export function canSync(windows: SyncWindow[], isManual: boolean, now: number): boolean {
  if (windows.length === 0) return true;
  let active: SyncWindow[];
  try {
    active = windows.filter((w) => windowActive(w, now));
  } catch {
    return false;
  }
  const denies = active.filter((w) => w.kind === "deny");
  if (denies.length > 0) return isManual && denies.every((w) => w.manualSync === true);
  if (active.some((w) => w.kind === "allow")) return true;
  const inactiveAllows = windows.filter((w) => w.kind === "allow" && !active.includes(w));
  if (inactiveAllows.length > 0) return isManual && inactiveAllows.every((w) => w.manualSync === true);
  return true;
}

export const SYNC_WINDOW_BLOCKED_MESSAGE = "Sync operation blocked by sync window";
