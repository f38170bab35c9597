/**
 * What one pass does with one claim (pure): the conditions it states and the action it takes, from
 * the judged eligibility, the claim's standing in line, its finalizer and the kind's check of the
 * applier. The reconciler reads what these take and acts on what they return (ClaimReconciler).
 */
import { StatusReason } from "../../queue/crds/reasons.js";
import type { ExternalCheck } from "../applier-kind.js";
import type { ConditionInput, ConditionStatus } from "./conditions.js";
import { type Eligibility, eligibilityConditions } from "./eligibility.js";
import { type Standing, waitingCondition } from "./ranking.js";

/** The condition types a claim carries (CONDITION_ORDER orders them). */
export const ClaimCondition = {
  Ready: "Ready",
  InControl: "InControl",
  Configured: "Configured",
} as const;
export type ClaimConditionType = (typeof ClaimCondition)[keyof typeof ClaimCondition];

/** One condition as a decision states it, at the claim's generation when it has one. */
export function mark(
  type: ClaimConditionType,
  status: ConditionStatus,
  reason: string,
  message: string,
  generation?: number,
): ConditionInput {
  return {
    type,
    status,
    reason,
    message,
    ...(generation !== undefined ? { observedGeneration: generation } : {}),
  };
}

export interface ClaimFacts {
  eligibility: Eligibility;
  standing: Standing;
  generation?: number;
  deleting: boolean;
  hasFinalizer: boolean;
  /** InControl says a hand-back was given up (ReleaseFailed): nothing is held. */
  gaveUp: boolean;
}

export type ClaimPlan =
  /** Not the holder, or let go for good: state it; `handBack` first when the finalizer is on. */
  | { act: "Release"; conditions: ConditionInput[]; handBack: boolean }
  /** The holder in line, not judgeable yet: state it and look again. */
  | { act: "Wait"; conditions: ConditionInput[]; requeueMs: number }
  /** The holder in line and bound: the kind checks the applier (planHold), then holds it. */
  | { act: "Check" };

/** How soon an Undecided claim (an unread source, an unknown provider) is judged again. */
export const UNDECIDED_REQUEUE_MS = 10_000;

export function planClaim(f: ClaimFacts): ClaimPlan {
  const { eligibility: e, standing: s, generation } = f;
  const conclusive = f.deleting || e.state === "NotReferenced" || e.state === "Refused";
  if (conclusive || s.standing !== "Holder") {
    const conditions = eligibilityConditions(e, generation);
    if (s.standing === "Waiting" && !f.deleting) {
      const message = `claim ${s.holder} holds the applier`;
      conditions.push(
        waitingCondition(s.holder, generation),
        mark(ClaimCondition.Ready, "False", StatusReason.HeldByAnotherClaim, message, generation),
        mark(ClaimCondition.InControl, "False", StatusReason.HeldByAnotherClaim, message, generation),
      );
    }
    const handBack = f.hasFinalizer && (conclusive || s.standing === "Holder");
    if (!handBack && !f.hasFinalizer && s.standing !== "Waiting" && !f.gaveUp) {
      const reason = e.state === "NotReferenced" ? StatusReason.NotReferenced : StatusReason.NotConfigured;
      conditions.push(mark(ClaimCondition.InControl, "False", reason, "the claim holds nothing", generation));
    }
    return { act: "Release", conditions, handBack };
  }
  if (e.state === "Undecided")
    return { act: "Wait", conditions: eligibilityConditions(e, generation), requeueMs: UNDECIDED_REQUEUE_MS };
  return { act: "Check" };
}

export type HoldPlan =
  /** The applier cannot be held as it stands: state why; Unknown is looked at again. */
  | { act: "Wait"; conditions: ConditionInput[]; requeueMs?: number }
  /** Configured: put the finalizer on if missing, follow up the record, then hold. */
  | { act: "Hold"; conditions: ConditionInput[] };

/** After the kind's check of the applier, for the bound holder naming `targets`. */
export function planHold(
  check: ExternalCheck,
  targets: readonly string[],
  hasFinalizer: boolean,
  generation?: number,
): HoldPlan {
  if (check.configured === true)
    return {
      act: "Hold",
      conditions: [
        mark(
          ClaimCondition.Configured,
          "True",
          StatusReason.Bound,
          `GitTarget ${targets.join(", ")} applies through this claim`,
          generation,
        ),
      ],
    };
  const s = check.configured === false ? "False" : "Unknown";
  const conditions = [
    mark(ClaimCondition.Configured, s, check.reason, check.message, generation),
    mark(ClaimCondition.Ready, s, check.reason, check.message, generation),
    hasFinalizer
      ? mark(
          ClaimCondition.InControl,
          "Unknown",
          StatusReason.NotConfigured,
          `the applier is left as this claim last held it (under field manager applygate): ${check.message}`,
          generation,
        )
      : mark(ClaimCondition.InControl, "False", StatusReason.NotConfigured, check.message, generation),
  ];
  return check.configured === "Unknown"
    ? { act: "Wait", conditions, requeueMs: UNDECIDED_REQUEUE_MS }
    : { act: "Wait", conditions };
}
