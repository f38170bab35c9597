/**
 * Governance between the decision core and the cluster (pure): the claim status patch that shows
 * a `ClaimGate` (`ApplyAllowed`, `status.governance`), and which appliers' approvals the core asks
 * to be read. What the objects say of governance is read by queue/governance/objects.ts.
 */
import { type Condition, objectMeta } from "../crds/common.js";
import { APPLY_ALLOWED_CONDITION } from "../crds/governance.js";
import {
  approvalConflict,
  approvalRequired,
  type ClaimGate,
  type DecisionState,
  type OverrideUse,
  type SignatureSpec,
  signatureRequired,
  type TargetGovernance,
  targetsNaming,
} from "../decide/index.js";
import { claimStatusField, conditionIn, fieldOf, storedConditionsOf } from "../kube/readers.js";
import type { KObject } from "../kube/resources.js";

function stampedCondition(
  prev: Condition | undefined,
  wanted: { status: "True" | "False"; reason: string; message: string },
  now: number,
  generation: number | undefined,
): Condition {
  return {
    type: APPLY_ALLOWED_CONDITION,
    ...wanted,
    lastTransitionTime:
      prev && prev.status === wanted.status ? prev.lastTransitionTime : new Date(now).toISOString(),
    ...(generation !== undefined ? { observedGeneration: generation } : {}),
  };
}

/**
 * The status merge patch that makes the claim show `gate`, from the claim as read now; undefined
 * when it already does. Other conditions are kept as they are (the sidecar owns them).
 */
export function gatePatch(
  current: KObject,
  gate: ClaimGate,
  now: number,
): Record<string, unknown> | undefined {
  const status = {
    conditions: storedConditionsOf(current),
    governance: claimStatusField(current, "governance"),
  };
  const others = (status.conditions ?? []).filter((c) => c.type !== APPLY_ALLOWED_CONDITION);
  const generation = fieldOf(objectMeta, current.metadata, "generation");
  const conditions =
    gate.condition === null
      ? others
      : [
          ...others,
          stampedCondition(
            conditionIn(status.conditions, APPLY_ALLOWED_CONDITION),
            gate.condition,
            now,
            generation,
          ),
        ];
  const governance: Record<string, unknown> = {};
  if (gate.changeWindow) governance.changeWindow = gate.changeWindow;
  if (gate.syncWindow) governance.syncWindow = gate.syncWindow;
  if (gate.awaitingApproval && gate.awaitingApproval.length > 0)
    governance.awaitingApproval = gate.awaitingApproval;
  const nulled = {
    ...(gate.changeWindow
      ? { changeWindow: { nextOpening: null, closesAt: null, ...gate.changeWindow } }
      : {}),
    ...(gate.syncWindow ? { syncWindow: { nextOpening: null, closesAt: null, ...gate.syncWindow } } : {}),
  };
  const used: OverrideUse | null | undefined =
    gate.overrideUsed !== undefined ? gate.overrideUsed : status.governance?.overrideUsed;
  if (used) governance.overrideUsed = used;
  const same =
    JSON.stringify(conditions) === JSON.stringify(status.conditions ?? []) &&
    JSON.stringify(governance) === JSON.stringify(status.governance ?? {});
  if (same) return undefined;
  // A merge patch replaces the conditions list whole, and `governance` is replaced by nulling it first.
  return {
    conditions,
    governance:
      Object.keys(governance).length === 0
        ? null
        : {
            changeWindow: null,
            syncWindow: null,
            overrideUsed: null,
            awaitingApproval: null,
            ...governance,
            ...nulled,
          },
  };
}

export type CommitStatusSpec = NonNullable<NonNullable<TargetGovernance["approval"]>["commitStatus"]>;

/** One approval read the decisions ask for. */
export interface ApprovalReadAsked {
  key: string;
  tip: string;
  since: string | null;
  commitStatus?: CommitStatusSpec;
  signature?: SignatureSpec;
}

/** The appliers whose approval read is missing or out of date for the tip now (by claim key). */
export function approvalReadsAsked(s: DecisionState, again = false): ApprovalReadAsked[] {
  if (s.tip === null) return [];
  const out: ApprovalReadAsked[] = [];
  for (const [key, a] of Object.entries(s.appliers)) {
    const named = targetsNaming(s, key);
    if (approvalRequired(named).length === 0 || approvalConflict(named)) continue;
    const r = a.foreignRead;
    const commitStatus = named.find((t) => t.governance?.approval?.commitStatus)?.governance?.approval
      ?.commitStatus;
    // Statuses change on the host: a read that still waits for one is read again when asked.
    // So do tags in a tag mode: a signed tag pushed later (no new commit) approves a waiting one.
    const signature = signatureRequired(named);
    const waiting =
      (commitStatus !== undefined && r?.commits.some((c) => r.statuses?.[c] !== "success")) ||
      (signature !== undefined &&
        signature.mode !== "HEAD" &&
        r?.commits.some((c) => !r.signatures?.[c]?.ok));
    const current = r !== undefined && r.tip === s.tip && r.since === a.lastAppliedCommit;
    // A read that failed for this applier is read again at the next poll, or at once when the
    // keys it would check against moved (a keys Secret fixed); not at every step.
    const unreadable = current && r.unreadable !== undefined;
    // Signatures checked against other keys than the listing sees now are read again.
    const keysMoved =
      signature !== undefined && ((!r?.signatures && !unreadable) || r?.keys !== signature.keys);
    if (current && !(again && (waiting || unreadable)) && !keysMoved) continue;
    out.push({
      key,
      tip: s.tip,
      since: a.lastAppliedCommit,
      ...(commitStatus ? { commitStatus } : {}),
      ...(signature ? { signature } : {}),
    });
  }
  return out;
}
