/**
 * Governance at the moment of the write (pure): the change windows of the claim and its
 * GitTargets are judged again at `now`, so an attempt sent inside a window that has closed since
 * starts nothing. Outside the windows only the one-apply override the attempt carries lets it
 * through, and only while an Approval of the claim still offers it and no other apply has used it.
 * Approval settings that conflict (the claim and a GitTarget set a source differently) start
 * nothing.
 *
 * Approval is not taken from the attempt: an attempt is a queue entry, and whoever can add one
 * (the dashboard, anyone who reaches Redis) could list any approvals. The executor reads itself,
 * at the write, what the apply would bring (`BroughtRead`, sidecar/approval-recheck.ts: every
 * foreign commit from the claim's last applied commit to the attempt's, with each one's commit
 * status and signature as read then), and every one of them must carry every approval the claim
 * requires, by the worker's own rule (`judgeCommits`): a manual approval is an Approval of the
 * claim as read at the write, and a tip that does not descend from the last applied commit needs
 * one naming it.
 */
import type { Attempt } from "../queue/contract.js";
import { governanceStatus, StatusReason } from "../queue/crds/index.js";
import { judgeChangeWindows } from "../queue/governance/change-windows.js";
import { approvalConflict, approvalRequired, judgeCommits, windowsOf } from "../queue/governance/judge.js";
import type { ApprovalSource, CommitApproval, SignatureRead } from "../queue/governance/model.js";
import { approvalsFor, approvedCommits, governanceOf } from "../queue/governance/objects.js";
import { claimStatusFields, fieldOf, type KObject, partOf } from "../queue/kube/index.js";

/**
 * What an apply of the attempt's commit would bring, read by the executor at the write: the
 * foreign commits (newest first) since the claim's last applied commit (`since`), with the
 * required commit status's state and each signature as checked then; or why it cannot be read.
 */
export type BroughtRead =
  | {
      ok: true;
      since: string | null;
      commits: string[];
      /** The attempt's commit does not descend from `since`: `commits` is its newest foreign commit. */
      notDescendant?: boolean;
      statuses?: Record<string, string>;
      signatures?: Record<string, SignatureRead>;
    }
  | { ok: false; message: string };

export interface GovernanceRefusal {
  phase: "RequestFailed";
  reason: StatusReason;
  message: string;
}

/** Why governance refuses the attempt now, or undefined when it may start. */
export function judgeGovernance(
  attempt: Attempt,
  claim: KObject,
  targets: readonly KObject[],
  now: number,
  /** What the apply would bring, read at the write (needed when the claim requires approval). */
  brought?: BroughtRead,
  /** The Approvals of the claim's namespace, read at the write. */
  approvals: readonly KObject[] = [],
): GovernanceRefusal | undefined {
  const given = approvalsFor(claim, approvals);
  const named = targets.map((t) => governanceOf(t, claim, given)).map((g) => (g ? { governance: g } : {}));
  const conflict = approvalConflict(named);
  if (conflict && approvalRequired(named).length > 0)
    return { phase: "RequestFailed", reason: StatusReason.InvalidApproval, message: conflict };
  const unapproved = approvalRefusal(attempt, given, approvalRequired(named), brought);
  if (unapproved) return unapproved;
  const verdict = judgeChangeWindows(windowsOf(named), now);
  if (verdict.state === "Unrestricted" || verdict.state === "Open") return undefined;
  const offered = named.find((t) => t.governance?.override)?.governance?.override?.value;
  const carried = attempt.override?.changeWindow;
  const used = fieldOf(
    governanceStatus,
    partOf(claimStatusFields, claim.status, "governance"),
    "overrideUsed",
  );
  const usedElsewhere = used?.value === carried && used?.token !== attempt.token;
  if (carried !== undefined && offered === carried && !usedElsewhere) return undefined;
  const why =
    verdict.state === "Invalid"
      ? verdict.message
      : `outside the change windows at ${new Date(now).toISOString()}${
          verdict.opensAt === null ? "" : `; next opening ${new Date(verdict.opensAt).toISOString()}`
        }`;
  return {
    phase: "RequestFailed",
    reason: verdict.state === "Invalid" ? StatusReason.InvalidChangeWindow : StatusReason.OutsideChangeWindow,
    message: carried === undefined ? why : `${why}; the override ${JSON.stringify(carried)} no longer holds`,
  };
}

/**
 * The approvals an apply of `brought` rests on (pure), given the Approvals of the claim;
 * `missing` lists the commits that lack some.
 */
export function broughtApprovals(
  given: readonly KObject[],
  sources: readonly ApprovalSource[],
  brought: Extract<BroughtRead, { ok: true }>,
): { missing: ReturnType<typeof judgeCommits>["missing"]; approvals: CommitApproval[] } {
  return judgeCommits(brought, sources, approvedCommits(given));
}

/**
 * With approval required, every commit the apply would bring must carry every required approval
 * as read at the write; a read that failed or was not made approves nothing (it fails closed).
 */
function approvalRefusal(
  attempt: Attempt,
  given: readonly KObject[],
  sources: readonly ApprovalSource[],
  brought: BroughtRead | undefined,
): GovernanceRefusal | undefined {
  if (sources.length === 0) return undefined;
  const refuse = (message: string): GovernanceRefusal => ({
    phase: "RequestFailed",
    reason: StatusReason.NotApproved,
    message,
  });
  const what = `the claim requires approval (${sources.join(", ")})`;
  if (!brought) return refuse(`${what} and the commits the apply would bring were not read at the write`);
  if (!brought.ok)
    return refuse(
      `${what} and the commits the apply would bring cannot be read at the write: ${brought.message}`,
    );
  const { missing } = broughtApprovals(given, sources, brought);
  if (missing.length === 0) return undefined;
  const list = missing
    .map((m) => {
      const why = m.sources.map((src) =>
        src === "Signature" && m.signature
          ? `Signature: ${m.signature.message}`
          : src === "Manual" && m.notDescendantOf
            ? `Manual: not a descendant of the last applied commit, so an Approval must name it`
            : src,
      );
      return `${m.commit.slice(0, 12)} (${why.join(", ")})`;
    })
    .join(", ");
  const since = brought.since === null ? "" : ` since ${brought.since.slice(0, 12)}`;
  return refuse(
    `applying ${attempt.commit.slice(0, 12)} would bring ${missing.length} commit(s)${since} that lack approval: ${list}`,
  );
}
