/**
 * Reasons: their precedence, how an attempt picks one per target, and how an attempt carries
 * them away and gives them back.
 */
import type { Reason } from "../contract.js";
import type { PendingKind, PendingReasons } from "./model.js";

/** Highest first: ForeignCommit, Repair, Refusal, then CatchUp (adopt, requested, converge). */
const PRECEDENCE: readonly PendingKind[] = [
  "ForeignCommit",
  "Repair",
  "Refusal",
  "Adopt",
  "Requested",
  "Converge",
];

export function reasonOf(kind: PendingKind): Reason {
  return kind === "Adopt" || kind === "Requested" || kind === "Converge" ? "CatchUp" : kind;
}

/** Adds a kind to a list, keeping it in precedence order and free of repeats. */
export function withKind(list: readonly PendingKind[], kind: PendingKind): PendingKind[] {
  if (list.includes(kind)) return [...list];
  return PRECEDENCE.filter((k) => k === kind || list.includes(k));
}

export function emptyPending(): PendingReasons {
  return { all: [], byTarget: {} };
}

export function hasPending(p: PendingReasons): boolean {
  return p.all.length > 0 || Object.values(p.byTarget).some((l) => l.length > 0);
}

/** Every kind pending, over all targets. */
export function kindsPending(p: PendingReasons): PendingKind[] {
  let out: PendingKind[] = [...p.all];
  for (const l of Object.values(p.byTarget)) for (const k of l) out = withKind(out, k);
  return out;
}

export function addPending(p: PendingReasons, kind: PendingKind, targetUid?: string): void {
  if (targetUid === undefined) {
    p.all = withKind(p.all, kind);
    return;
  }
  p.byTarget[targetUid] = withKind(p.byTarget[targetUid] ?? [], kind);
}

/**
 * The one reason a target carries in an attempt: the highest-precedence kind pending for it,
 * whether pending for every target or for this one. Undefined when nothing is pending for it.
 */
export function reasonForTarget(p: PendingReasons, uid: string): Reason | undefined {
  const kinds = [...p.all, ...(p.byTarget[uid] ?? [])];
  const top = PRECEDENCE.find((k) => kinds.includes(k));
  return top === undefined ? undefined : reasonOf(top);
}

/** Merges reasons an attempt gave back into what is pending now; `keep` filters per target. */
export function giveBack(
  into: PendingReasons,
  carried: PendingReasons,
  keep: (kind: PendingKind, targetUid?: string) => boolean,
): void {
  for (const k of carried.all) if (keep(k)) addPending(into, k);
  for (const [uid, kinds] of Object.entries(carried.byTarget)) {
    for (const k of kinds) if (keep(k, uid)) addPending(into, k, uid);
  }
}

/** Drops every reason held for a target uid (the target is gone or names another claim). */
export function dropTarget(p: PendingReasons, uid: string): void {
  delete p.byTarget[uid];
}

/** Removes one kind everywhere (a converge answered without an apply). */
export function dropKind(p: PendingReasons, kind: PendingKind): void {
  p.all = p.all.filter((k) => k !== kind);
  for (const uid of Object.keys(p.byTarget)) {
    p.byTarget[uid] = (p.byTarget[uid] ?? []).filter((k) => k !== kind);
    if (p.byTarget[uid]?.length === 0) delete p.byTarget[uid];
  }
}
