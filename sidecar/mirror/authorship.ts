/**
 * Who made a watched write, from its managedFields (pure). The applier's own managers alone are
 * the applier's write, which the branch worker's decision core judges (an echo, a late apply, or
 * late with no window open); anything else is an edit, authored by the manager whose entry the
 * write touched, at that entry's time. A DELETE carries nothing about its deleter: always an edit.
 */
import { type ApplierWrite, applierWriteOf, writersBetween } from "../applier-write.js";

export type Authorship =
  | { kind: "applier"; write: ApplierWrite }
  | {
      kind: "edit";
      /** The field manager of the entry the write touched, or "unknown" when none says. */
      manager: string;
      /** That entry's time (RFC 3339); undefined when no entry says (the intake time is used). */
      editedAt?: string;
    };

interface Entry {
  manager?: string;
  subresource?: string;
  time?: string | Date;
}

const timeOf = (e: Entry) =>
  e.time instanceof Date ? e.time.getTime() : typeof e.time === "string" ? Date.parse(e.time) : Number.NaN;

type Observed = { metadata?: { managedFields?: unknown[]; resourceVersion?: string } };

/** The newest timed entry of `entries` that is not a status write; undefined when none. */
function newest(entries: Entry[]): Entry | undefined {
  let best: Entry | undefined;
  for (const e of entries) {
    if (e.subresource === "status" || Number.isNaN(timeOf(e))) continue;
    if (!best || timeOf(e) > timeOf(best)) best = e;
  }
  return best;
}

/**
 * Judges one write: `previous` is the object as the informer held it before (absent on a create
 * or a relist that found the object new).
 */
export function authorshipOf(
  obj: Observed,
  applierManagers: readonly string[],
  previous?: Observed,
): Authorship {
  const before = previous?.metadata?.managedFields;
  const applier = applierWriteOf(obj, applierManagers, before);
  if (applier) return { kind: "applier", write: applier };
  const after = (obj.metadata?.managedFields ?? []) as Entry[];
  const touched = before === undefined ? after : (writersBetween(before, after) as Entry[]);
  const others = (entries: Entry[]) =>
    entries.filter((e) => e.manager === undefined || !applierManagers.includes(e.manager));
  // A touched entry without a time (an Update through the scale subresource: the real API server
  // keeps none) names its manager; the intake time stands for when.
  const touchedByOthers = others(touched);
  const untimed = touchedByOthers.find((e) => e.subresource !== "status" && Number.isNaN(timeOf(e)));
  const by = newest(touchedByOthers) ?? untimed ?? newest(others(after));
  if (!by) return { kind: "edit", manager: "unknown" };
  if (Number.isNaN(timeOf(by))) return { kind: "edit", manager: by.manager ?? "unknown" };
  const t = by.time as string | Date;
  return {
    kind: "edit",
    manager: by.manager ?? "unknown",
    editedAt: typeof t === "string" ? t : t.toISOString(),
  };
}
