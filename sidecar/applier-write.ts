/**
 * Whether a write to an object is the applier's own (pure, for every applier kind's window
 * observer).
 *
 * With the object as the observer saw it before (the previous watch event or the list), the proof
 * is which managedFields entries the write touched: an entry that is new, has a new time, or owns a
 * field it did not is a writer's; an entry that only lost fields lost them to the writer. The write
 * is the applier's when its managers alone touched entries. That tells the applier's write from an
 * edit made in the same second, which times alone cannot.
 *
 * Without a previous version, or when the write touched no entry (its manager wrote again in the
 * same second, owning the same fields), the rule is the times: the newest entries (those with the
 * latest time) all belong to the applier's managers. Times resolve to the second, so a tie with any other
 * manager is not the applier's alone.
 */

/** The parts of a managedFields entry the judgement reads. */
interface Entry {
  manager?: string;
  operation?: string;
  subresource?: string;
  /** RFC 3339 on the wire; a Date where the client deserialized it (a typed list). */
  time?: string | Date;
  fieldsV1?: unknown;
}

/** An entry's time in milliseconds, however it arrived; NaN when unreadable. */
const ms = (t: unknown) =>
  t instanceof Date ? t.getTime() : typeof t === "string" ? Date.parse(t) : Number.NaN;

export interface ApplierWrite {
  manager: string;
  /** The managedFields time of the applier's entry the write set. */
  writtenAt: string;
  resourceVersion: string;
}

type Observed = { metadata?: { managedFields?: unknown[]; resourceVersion?: string } };

const timed = (fields: unknown[] | undefined): Entry[] =>
  ((fields ?? []) as Entry[]).filter((e) => !Number.isNaN(ms(e.time)));

const entryKey = (e: Entry) => `${e.manager ?? ""}\u0000${e.operation ?? ""}\u0000${e.subresource ?? ""}`;

/** Whether the field set `now` owns a field `before` does not. */
function gained(now: unknown, before: unknown): boolean {
  if (now === null || typeof now !== "object") return false;
  if (before === null || typeof before !== "object") return Object.keys(now).length > 0;
  const b = before as Record<string, unknown>;
  return Object.entries(now as Record<string, unknown>).some(([k, v]) => !(k in b) || gained(v, b[k]));
}

/** Whether an entry before the write is gone after it. */
function removedEntry(before: unknown[], after: Entry[]): boolean {
  const now = new Set(after.map(entryKey));
  return timed(before).some((e) => !now.has(entryKey(e)));
}

/** Two entries' times are the same: both unreadable (no time) or the same millisecond. */
function sameTime(a: unknown, b: unknown): boolean {
  const x = ms(a);
  const y = ms(b);
  return Number.isNaN(x) ? Number.isNaN(y) : x === y;
}

/**
 * The entries a write touched, from the entries before it to those after. An entry without a
 * time counts too: the real API server keeps none on an Update made through the scale
 * subresource (`kubectl scale`), so a person's scale shows only as a new entry, or as one that
 * gained the replicas.
 */
export function writersBetween(before: unknown[], after: unknown[]): Entry[] {
  const prev = new Map(((before ?? []) as Entry[]).map((e) => [entryKey(e), e]));
  return ((after ?? []) as Entry[]).filter((e) => {
    const p = prev.get(entryKey(e));
    return !p || !sameTime(p.time, e.time) || gained(e.fieldsV1, p.fieldsV1);
  });
}

export function applierWriteOf(
  obj: Observed,
  managers: readonly string[],
  previous?: unknown[],
): ApplierWrite | undefined {
  const resourceVersion = obj.metadata?.resourceVersion ?? "";
  const mine = (e: Entry) => e.manager !== undefined && managers.includes(e.manager);
  const latest = (entries: Entry[]) => {
    const newest = Math.max(...entries.map((e) => ms(e.time)));
    return entries.filter((e) => ms(e.time) === newest);
  };
  const entries = timed(obj.metadata?.managedFields);
  const touched =
    previous === undefined ? undefined : writersBetween(previous, obj.metadata?.managedFields ?? []);
  // With a previous version: the entries the write touched. A write that touched none but took an
  // entry away is an update that removed every field its writer owned: not the applier's apply,
  // which touches its own entry. One that touched none and took none away (its manager wrote again
  // in the same second, owning the same fields) and no previous version both leave the times: the
  // newest entries, where a writer other than the applier would be.
  if (touched !== undefined && touched.length === 0 && removedEntry(previous ?? [], entries))
    return undefined;
  const by =
    touched !== undefined && touched.length > 0 ? touched : entries.length > 0 ? latest(entries) : [];
  if (by.length === 0 || !by.every(mine)) return undefined;
  const [top] = latest(timed(by));
  if (!top) return undefined; // the applier's writes carry a time; one without is not taken for theirs
  const t = top!.time!;
  return { manager: top!.manager!, writtenAt: typeof t === "string" ? t : t.toISOString(), resourceVersion };
}

/**
 * Whether a write judged from an object as it is now (no version before it) was made at or after
 * `since`, in whole seconds as managedFields times go: a window opened again by a new process (a
 * recovered operation) judges the objects it lists this way, for the applier's writes made while
 * no process watched (soak seed 152052: the Flux sidecar was killed just before the apply landed
 * over an edit, and the next one, watching only later writes, never reported it).
 */
export function writtenSince(write: ApplierWrite, since: string): boolean {
  const sec = (t: string) => Math.floor(Date.parse(t) / 1000);
  return sec(write.writtenAt) >= sec(since);
}
