/**
 * What an executor asks just before the write that starts an apply: is the attempt's commit
 * still the tip the branch worker recorded, and did the branch's inbox take a write after the
 * attempt's flush mark for a folder its applier applies (the edit recheck, `Attempt.editsAfter`)?
 * An edit accepted but not yet decided by the worker counts: it sits in the inbox, after the mark.
 *
 * Both are read in one MULTI, so the answer is one moment's. The worker records a new tip before
 * it lets go of the inbox entries a publication carried (`BranchWorker.landed`), so a write that
 * is no longer in the inbox is in a tip that moved: no interleaving misses a write.
 */
import type { Redis } from "ioredis";
import type { Attempt } from "./contract.js";
import { branchKeys } from "./keys.js";

/** `current`: go on. `moved`: the tip is another commit. `edited`: a write came after the mark. */
export type Freshness = "current" | "moved" | "edited";

/** Entries read after the mark at most; more than this many unread answers `edited` (a bounded restale). */
export const FRESHNESS_SCAN_LIMIT = 5000;

const trimPath = (p: string) => p.replace(/^(\.\/)+/, "").replace(/^\/+|\/+$/g, "");

/** Whether a write to `path` lands in `folder`: the same folder, or one inside the other. */
export function folderHolds(folder: string, path: string): boolean {
  const f = trimPath(folder);
  const p = trimPath(path);
  return f === p || f === "" || p === "" || p.startsWith(`${f}/`) || f.startsWith(`${p}/`);
}

/** Whether an inbox entry (its fields as Redis returns them) is a write to one of `folders`. */
export function isWriteTo(fields: string[], folders: readonly string[]): boolean {
  const f: Record<string, string> = {};
  for (let i = 0; i + 1 < fields.length; i += 2) f[fields[i] as string] = fields[i + 1] as string;
  if ((f.kind ?? "write") !== "write") return false;
  let path: unknown;
  let applierAuthored: unknown;
  try {
    ({ path, applierAuthored } = JSON.parse(f.data ?? "") as { path?: unknown; applierAuthored?: unknown });
  } catch {
    return true; // the worker will refuse it, but it could be an edit: do not apply over it
  }
  // The watch plane's write of the applier's own managers is no API edit an apply could revert:
  // the cluster runs what the applier wrote, and the worker judges it in the apply window.
  if (applierAuthored !== undefined) return false;
  return typeof path !== "string" || folders.some((folder) => folderHolds(folder, path as string));
}

/**
 * Reads the recorded tip and, when the attempt carries the edit recheck, the inbox entries after
 * its mark. No recorded tip is not a moved one (see `sidecar/tip-check.ts`).
 */
export async function readFreshness(
  redis: Redis,
  prefix: string,
  attempt: Pick<Attempt, "branchKey" | "commit" | "editsAfter">,
  scanLimit = FRESHNESS_SCAN_LIMIT,
): Promise<Freshness> {
  const keys = branchKeys(prefix, attempt.branchKey);
  const recheck = attempt.editsAfter;
  if (!recheck) {
    const tip = await redis.get(keys.tip);
    return tip === null || tip === attempt.commit ? "current" : "moved";
  }
  const replies = await redis
    .multi()
    .get(keys.tip)
    .xrange(keys.inbox, `(${recheck.mark}`, "+", "COUNT", scanLimit)
    .exec();
  if (!replies) throw new Error("the freshness read was aborted");
  const [[tipErr, tip], [rangeErr, rows]] = replies as [
    [Error | null, string | null],
    [Error | null, Array<[string, string[]]>],
  ];
  if (tipErr) throw tipErr;
  if (rangeErr) throw rangeErr;
  if (tip !== null && tip !== attempt.commit) return "moved";
  if (rows.length >= scanLimit) return "edited";
  return rows.some(([, fields]) => isWriteTo(fields, recheck.folders)) ? "edited" : "current";
}
