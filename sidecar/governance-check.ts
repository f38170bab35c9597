/**
 * Governance at the moment of the write (pure): the change windows of the claim (or its
 * GitTargets) are judged again at `now`, so an attempt sent inside a window that has closed since
 * starts nothing. Outside the windows only the one-apply override the attempt carries lets it
 * through, and only while the claim still offers it and no other apply has used it. The approvals
 * the attempt carries must still hold: a manual one still on the claim, a commit status still
 * `success` on the Git host as read at the write (`commitStatuses`, read by the shell).
 */
import type { KubeLike } from "../queue/apply/catalog.js";
import { approvedCommits, governanceOf } from "../queue/apply/governance.js";
import type { Attempt } from "../queue/contract.js";
import { CHANGE_WINDOW_OVERRIDE_ANNOTATION, StatusReason } from "../queue/crds/index.js";
import {
  type ApprovalSource,
  approvalRequired,
  judgeChangeWindows,
  windowsOf,
} from "../queue/decide/index.js";
import type { KObject } from "../queue/kube/index.js";
import { signatureRefusal, type TrustedFingerprints } from "./signature-check.js";

export interface GovernanceRefusal {
  phase: "RequestFailed";
  reason: string;
  message: string;
}

/** Why governance refuses the attempt now, or undefined when it may start. */
export function judgeGovernance(
  attempt: Attempt,
  claim: KObject,
  targets: readonly KObject[],
  now: number,
  /** The keys the claim's signature approval trusts now, read at the write (`readTrustedFingerprints`). */
  signatureKeys?: TrustedFingerprints,
  /** The required status context's state per carried commit, as read at the write. */
  commitStatuses?: Readonly<Record<string, string>>,
): GovernanceRefusal | undefined {
  const c = claim as KubeLike;
  const named = targets.map((t) => governanceOf(t as KubeLike, c)).map((g) => (g ? { governance: g } : {}));
  const unapproved =
    approvalRefusal(attempt, c, approvalRequired(named)) ??
    commitStatusRefusal(attempt, approvalRequired(named), commitStatuses);
  if (unapproved) return unapproved;
  const unsigned = signatureRefusal(attempt, approvalRequired(named), signatureKeys);
  if (unsigned) return unsigned;
  const verdict = judgeChangeWindows(windowsOf(named), now);
  if (verdict.state === "Unrestricted" || verdict.state === "Open") return undefined;
  const offered = claim.metadata.annotations?.[CHANGE_WINDOW_OVERRIDE_ANNOTATION];
  const carried = attempt.override?.changeWindow;
  const used = (
    claim.status as { governance?: { overrideUsed?: { value?: string; token?: string } } } | undefined
  )?.governance?.overrideUsed;
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
 * With approval required, the attempt must carry the approvals the worker judged (every foreign
 * commit since the last applied one), and each must still hold on the claim: a manual approval
 * withdrawn since the send starts nothing.
 */
function approvalRefusal(
  attempt: Attempt,
  claim: KubeLike,
  sources: readonly ApprovalSource[],
): GovernanceRefusal | undefined {
  if (sources.length === 0) return undefined;
  if (!attempt.approvals)
    return {
      phase: "RequestFailed",
      reason: StatusReason.NotApproved,
      message: `the claim requires approval (${sources.join(", ")}) and the attempt carries none`,
    };
  const approved = approvedCommits(claim);
  const withdrawn = attempt.approvals.filter(
    (a) => sources.includes("Manual") && approved[a.commit]?.Manual === undefined,
  );
  if (withdrawn.length === 0) return undefined;
  return {
    phase: "RequestFailed",
    reason: StatusReason.NotApproved,
    message: `approval withdrawn since the send: ${withdrawn.map((a) => a.commit.slice(0, 12)).join(", ")} (Manual)`,
  };
}

/**
 * With a commit status required, each commit the attempt carries must still have the context
 * `success` as read at the write; anything else (pending, failure, missing, a read that failed or
 * was not made) starts nothing: a failure never counts as approval.
 */
function commitStatusRefusal(
  attempt: Attempt,
  sources: readonly ApprovalSource[],
  statuses: Readonly<Record<string, string>> | undefined,
): GovernanceRefusal | undefined {
  if (!sources.includes("CommitStatus") || !attempt.approvals) return undefined;
  const lost = attempt.approvals
    .filter((a) => a.sources.includes("CommitStatus"))
    .map((a) => ({ commit: a.commit, state: statuses?.[a.commit] ?? "unread" }))
    .filter((a) => a.state !== "success");
  if (lost.length === 0) return undefined;
  return {
    phase: "RequestFailed",
    reason: StatusReason.NotApproved,
    message: `commit status no longer success at the write: ${lost
      .map((a) => `${a.commit.slice(0, 12)} (${a.state})`)
      .join(", ")} (CommitStatus)`,
  };
}
