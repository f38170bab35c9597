/**
 * Wall-clock times of a time zone and the instants they name (pure, from the platform's time-zone
 * data through Intl). A wall time is written as the instant it would be in UTC: 02:30 on
 * 2026-03-29 is Date.UTC(2026, 2, 29, 2, 30).
 *
 * Change windows read their cron schedules on wall times and map each fire to an instant here,
 * rather than asking a cron library to search in the zone: cron-parser's search in a zone whose
 * clocks move by 30 minutes (Australia/Lord_Howe) runs to its loop limit, seconds of CPU per
 * question, and then gives up.
 */

/** UTC under either of its names: no offset, no clock changes. */
export const isUtc = (tz: string): boolean => tz === "UTC" || tz === "Etc/UTC";

const formats = new Map<string, Intl.DateTimeFormat>();
/** The zone's offset from UTC at instant `t`, in ms (what Go's `time.Now().In(loc).Zone()` gives). */
export function zoneOffsetMs(tz: string, t: number): number {
  if (isUtc(tz)) return 0;
  let f = formats.get(tz);
  if (!f) {
    f = new Intl.DateTimeFormat("en-US", {
      timeZone: tz,
      hourCycle: "h23",
      year: "numeric",
      month: "numeric",
      day: "numeric",
      hour: "numeric",
      minute: "numeric",
      second: "numeric",
    });
    formats.set(tz, f);
  }
  const p = Object.fromEntries(f.formatToParts(new Date(t)).map((x) => [x.type, x.value]));
  const wall = Date.UTC(
    Number(p.year),
    Number(p.month) - 1,
    Number(p.day),
    Number(p.hour),
    Number(p.minute),
    Number(p.second),
  );
  return wall - (t - (t % 1000));
}

/** The wall time of instant `t` in `tz`. */
export const wallTimeOf = (t: number, tz: string): number => t + zoneOffsetMs(tz, t);

/** The longest a change of the clocks moves a wall time (no zone has moved them by more). */
export const MAX_CLOCK_CHANGE_MS = 3 * 3_600_000;

/**
 * The instant wall time `wall` names in `tz`. Clocks change at most once within a day, so the
 * offsets a day before and a day after are the only candidates:
 * - a wall time that happens twice (the clocks went back over it) names its first occurrence;
 * - a wall time the clocks jumped over names the instant the jump's length after it (02:30 on a
 *   night that goes from 02:00 to 03:00 is 03:30).
 */
export function instantOf(wall: number, tz: string): number {
  if (isUtc(tz)) return wall;
  const before = zoneOffsetMs(tz, wall - 86_400_000);
  const early = wall - before;
  if (zoneOffsetMs(tz, early) === before) return early;
  const after = zoneOffsetMs(tz, wall + 86_400_000);
  const late = wall - after;
  if (zoneOffsetMs(tz, late) === after) return late;
  return early;
}
