/**
 * Whether a write to an object is the applier's own (pure, for every applier kind's window
 * observer): its newest managedFields entries (those with the latest time) all belong to the
 * applier's managers. Times resolve to the second, so a tie with any other manager is not the
 * applier's alone.
 */

/** The parts of a managedFields entry the judgement reads. */
interface TimedEntry {
  manager?: string;
  time?: string;
}

export interface ApplierWrite {
  manager: string;
  /** The managedFields time of that newest entry. */
  writtenAt: string;
  resourceVersion: string;
}

export function applierWriteOf(
  obj: { metadata?: { managedFields?: unknown[]; resourceVersion?: string } },
  managers: readonly string[],
): ApplierWrite | undefined {
  const entries = ((obj.metadata?.managedFields ?? []) as TimedEntry[]).filter(
    (e) => e.time && !Number.isNaN(Date.parse(e.time)),
  );
  if (entries.length === 0) return undefined;
  const newest = Math.max(...entries.map((e) => Date.parse(e.time!)));
  const top = entries.filter((e) => Date.parse(e.time!) === newest);
  if (!top.every((e) => e.manager && managers.includes(e.manager))) return undefined;
  return {
    manager: top[0]!.manager!,
    writtenAt: top[0]!.time!,
    resourceVersion: obj.metadata?.resourceVersion ?? "",
  };
}
