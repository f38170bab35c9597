/**
 * Release governance in the decision core (pure): rules that make an applier not due, and what
 * its claim shows of them. Change windows: outside an allowed window (or inside a deny window) no
 * apply starts and every reason stays pending, unless a person set a one-apply override on the
 * claim; the core wakes at the next opening and decides then.
 */
import { StatusReason } from "../crds/reasons.js";
import { judgeChangeWindows, type WindowVerdict } from "../governance/change-windows.js";
import {
  approvalConflict,
  approvalRequired,
  judgeCommits,
  signatureRequired,
  windowsOf,
} from "../governance/judge.js";
import type { ApprovalGate, ClaimGate, MissingApproval, SyncWindowSpec } from "../governance/model.js";
import type { ApplierState, TargetState } from "./model.js";
import { kindsPending, reasonOf } from "./reasons.js";
import { judgeSyncWindows, type SyncWindowVerdict } from "./sync-windows.js";

const iso = (t: number) => new Date(t).toISOString();

/** The override the claim offers now, if it has not been used: a value no apply has used yet. */
export function overrideAvailable(
  a: ApplierState,
  named: readonly TargetState[],
): { value: string; by?: string } | null {
  const offered = named.find((t) => t.governance?.override)?.governance?.override;
  if (!offered) return null;
  const used =
    a.overrideUsed !== undefined
      ? a.overrideUsed
      : (named.find((t) => t.governance?.overrideUsed)?.governance?.overrideUsed ?? null);
  return used?.value === offered.value ? null : offered;
}

export interface WindowGate {
  verdict: WindowVerdict;
  /** Closed, but a one-apply override lets the next attempt through. */
  override: { value: string; by?: string } | null;
}

export function windowGate(a: ApplierState, named: readonly TargetState[], now: number): WindowGate {
  const verdict = judgeChangeWindows(windowsOf(named), now);
  const closed = verdict.state === "Closed" || verdict.state === "Invalid";
  return { verdict, override: closed ? overrideAvailable(a, named) : null };
}

/** What governance holds an applier by now, with what a person needs to act on it. */
export type GovernanceHold =
  /** The approval settings of the claim and its GitTargets conflict: held until fixed. */
  | { hold: "approval settings conflict"; message: string }
  /** The foreign commits since the last applied commit are being read for this tip. */
  | { hold: "approval not read" }
  /** The read of the approvals failed for this applier alone: held until a read succeeds. */
  | { hold: "approval unreadable"; message: string }
  | {
      hold: "awaiting approval";
      missing: MissingApproval[];
    }
  | { hold: "outside change window"; verdict: Extract<WindowVerdict, { state: "Closed" | "Invalid" }> }
  | {
      hold: "blocked by sync window";
      verdict: Extract<SyncWindowVerdict, { state: "Blocked" | "Invalid" }>;
    };

/** What governance holds the applier by now, or null (for `whyNotDue`). */
export function governanceHold(
  tip: string | null,
  a: ApplierState,
  named: readonly TargetState[],
  now: number,
): GovernanceHold | null {
  const approval = approvalGate(tip, a, named);
  if (approval.state === "Invalid") return { hold: "approval settings conflict", message: approval.message };
  if (approval.state === "Unread") return { hold: "approval not read" };
  if (approval.state === "Unreadable") return { hold: "approval unreadable", message: approval.message };
  if (approval.state === "Awaiting") return { hold: "awaiting approval", missing: approval.missing };
  const g = windowGate(a, named, now);
  if ((g.verdict.state === "Closed" || g.verdict.state === "Invalid") && g.override === null)
    return { hold: "outside change window", verdict: g.verdict };
  const sync = syncWindowVerdict(named, now);
  if (sync.state === "Blocked" || sync.state === "Invalid")
    return { hold: "blocked by sync window", verdict: sync };
  return null;
}

/** Why governance holds the applier now, or null (for `notDueBecause`). */
export function governanceHolds(
  tip: string | null,
  a: ApplierState,
  named: readonly TargetState[],
  now: number,
): string | null {
  return governanceHold(tip, a, named, now)?.hold ?? null;
}

/** The Argo CD sync windows of the applier (every GitTarget naming it lists the same). */
export function syncWindowsOf(named: readonly Pick<TargetState, "governance">[]): SyncWindowSpec[] {
  return named.find((t) => t.governance?.syncWindows?.length)?.governance?.syncWindows ?? [];
}

/** Whether Argo CD's sync windows would hold an automated sync now (applygate's syncs are). */
export function syncWindowVerdict(
  named: readonly Pick<TargetState, "governance">[],
  now: number,
): SyncWindowVerdict {
  return judgeSyncWindows(syncWindowsOf(named), now, false);
}

/** When the core must look again: the next opening, or the next close of an open window. */
export function governanceWakeAt(named: readonly TargetState[], now: number): number | null {
  const v = judgeChangeWindows(windowsOf(named), now);
  const change = v.state === "Closed" ? v.opensAt : v.state === "Open" ? v.closesAt : null;
  const s = syncWindowVerdict(named, now);
  const sync = s.state === "Blocked" ? s.opensAt : s.state === "Open" ? s.closesAt : null;
  if (change === null) return sync;
  return sync === null ? change : Math.min(change, sync);
}

/**
 * What the claim shows: `ApplyAllowed` with the first rule holding (approval, then the windows),
 * the commits awaiting approval and the reasons they hold, the next opening, the override used.
 * Null while the commits since the last applied commit are being read (a moment: nothing to say).
 */
export function claimGate(
  tip: string | null,
  a: ApplierState,
  named: readonly TargetState[],
  now: number,
): ClaimGate | null {
  const approval = approvalGate(tip, a, named);
  if (approval.state === "Unread") return null;
  const windows = withSyncWindows(windowClaimGate(a, named, now), named, now);
  if (approval.state === "NotRequired") return windows;
  if (approval.state === "Invalid")
    return {
      ...windows,
      condition: {
        status: "False",
        reason: StatusReason.InvalidApproval,
        message: `${approval.message}: no apply starts until it is fixed`,
      },
      awaitingApproval: [],
    };
  if (approval.state === "Unreadable")
    return {
      ...windows,
      condition: {
        status: "False",
        reason: StatusReason.ApprovalUnreadable,
        message: `the approvals of the foreign commits since the last applied commit cannot be read: ${approval.message}; no apply starts until they can (read again every poll)`,
      },
    };
  if (approval.state === "Approved") {
    if (windows.condition && windows.condition.status === "False") return windows;
    const inside = windows.condition ? `; ${windows.condition.message}` : "";
    return {
      ...windows,
      condition: {
        status: "True",
        reason: StatusReason.Approved,
        message: `every foreign commit since the last applied commit is approved${inside}`,
      },
      awaitingApproval: [],
    };
  }
  const kinds = [...new Set(kindsPending(a.pending).map(reasonOf))];
  const list = approval.missing
    .map((m) => {
      const sources = m.sources.map((src) =>
        src === "Signature" && m.signature
          ? `Signature: ${m.signature.message}`
          : src === "Manual" && m.notDescendantOf
            ? `Manual: the tip is not a descendant of the last applied commit ${m.notDescendantOf.slice(0, 12)}, so an Approval must name it`
            : src,
      );
      return `${m.commit.slice(0, 12)} (${sources.join(", ")})`;
    })
    .join(", ");
  return {
    ...windows,
    condition: {
      status: "False",
      reason: StatusReason.AwaitingApproval,
      message: `${approval.missing.length} foreign commit(s) since the last applied commit lack approval: ${list}${
        kinds.length > 0 ? `; waiting: ${kinds.join(", ")}` : ""
      }`,
    },
    awaitingApproval: approval.missing.map((m) => ({
      commit: m.commit,
      missing: m.sources,
      ...(m.signature ? { signature: m.signature } : {}),
      ...(m.notDescendantOf ? { notDescendantOf: m.notDescendantOf } : {}),
    })),
  };
}

/**
 * Argo CD's sync windows on top of the change windows: a sync they would hold shows
 * `BlockedBySyncWindow` with the next opening (unless a change window already holds the applier);
 * an override does not open them (Argo CD would hold the sync all the same).
 */
function withSyncWindows(gate: ClaimGate, named: readonly TargetState[], now: number): ClaimGate {
  const v = syncWindowVerdict(named, now);
  if (v.state === "Unrestricted") return gate;
  if (v.state === "Open") {
    const until = v.closesAt === null ? "" : ` until ${iso(v.closesAt)}`;
    return {
      ...gate,
      condition: gate.condition ?? {
        status: "True",
        reason: StatusReason.InsideSyncWindow,
        message: `the AppProject's sync windows let a sync run${until}`,
      },
      syncWindow: { open: true, ...(v.closesAt !== null ? { closesAt: iso(v.closesAt) } : {}) },
    };
  }
  const syncWindow = {
    open: false,
    ...(v.state === "Blocked" && v.opensAt !== null ? { nextOpening: iso(v.opensAt) } : {}),
  };
  if (gate.condition?.status === "False") return { ...gate, syncWindow };
  const message =
    v.state === "Invalid"
      ? `${v.message}: Argo CD holds every sync of the Application until it is fixed`
      : `${v.by === "deny" ? "inside a deny sync window" : "outside every allow sync window"} of the AppProject: Argo CD would hold the sync, so none is asked for and reasons stay pending; ${
          v.opensAt === null ? "no opening within 400 days" : `next opening ${iso(v.opensAt)}`
        }`;
  return {
    ...gate,
    condition: { status: "False", reason: StatusReason.BlockedBySyncWindow, message },
    syncWindow,
  };
}

function windowClaimGate(a: ApplierState, named: readonly TargetState[], now: number): ClaimGate {
  const { verdict: v, override } = windowGate(a, named, now);
  const used = a.overrideUsed !== undefined ? { overrideUsed: a.overrideUsed } : {};
  switch (v.state) {
    case "Unrestricted":
      return { condition: null, ...used };
    case "Open":
      return {
        condition: {
          status: "True",
          reason: StatusReason.InsideChangeWindow,
          message:
            v.closesAt === null
              ? "inside a change window"
              : `inside a change window until ${iso(v.closesAt)}`,
        },
        changeWindow: { open: true, ...(v.closesAt !== null ? { closesAt: iso(v.closesAt) } : {}) },
        ...used,
      };
    case "Closed": {
      const next = v.opensAt === null ? "no opening within 400 days" : `next opening ${iso(v.opensAt)}`;
      const why = v.by === "deny" ? "inside a deny window" : "outside every allow window";
      return {
        condition: override
          ? {
              status: "True",
              reason: StatusReason.ChangeWindowOverride,
              message: `${why}; override ${JSON.stringify(override.value)} lets one apply start (${next})`,
            }
          : {
              status: "False",
              reason: StatusReason.OutsideChangeWindow,
              message: `${why}: no apply starts and reasons stay pending; ${next}`,
            },
        changeWindow: { open: false, ...(v.opensAt !== null ? { nextOpening: iso(v.opensAt) } : {}) },
        ...used,
      };
    }
    case "Invalid":
      return {
        condition: override
          ? {
              status: "True",
              reason: StatusReason.ChangeWindowOverride,
              message: `${v.message}; override ${JSON.stringify(override.value)} lets one apply start`,
            }
          : {
              status: "False",
              reason: StatusReason.InvalidChangeWindow,
              message: `${v.message}: no apply starts until it is fixed`,
            },
        changeWindow: { open: false },
        ...used,
      };
  }
}

/**
 * The tip-approval rule: the tip is approved when every foreign commit since the commit the
 * applier last applied carries every required approval. The worker's own commits are not in the
 * read (the shell leaves them out), so API edits on top of an approved commit need nothing. A read
 * of another tip or from another last-applied commit is no read: the applier waits for one.
 */
export function approvalGate(
  tip: string | null,
  a: ApplierState,
  named: readonly TargetState[],
): ApprovalGate {
  const sources = approvalRequired(named);
  if (sources.length === 0) return { state: "NotRequired" };
  const conflict = approvalConflict(named);
  if (conflict) return { state: "Invalid", message: conflict };
  const read = a.foreignRead;
  if (tip === null || !read || read.tip !== tip || read.since !== a.lastAppliedCommit)
    return { state: "Unread" };
  if (read.unreadable !== undefined) return { state: "Unreadable", message: read.unreadable };
  const approved = named.find((t) => t.governance?.approved)?.governance?.approved ?? {};
  // Signatures checked against other keys than the listing sees now (a key added or removed since)
  // are no read: the shell reads again.
  const sigSpec = signatureRequired(named);
  if (sigSpec && (!read.signatures || read.keys !== sigSpec.keys)) return { state: "Unread" };
  const { missing, approvals } = judgeCommits(read, sources, approved);
  return missing.length > 0 ? { state: "Awaiting", missing, approvals } : { state: "Approved", approvals };
}
