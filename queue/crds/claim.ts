/** What FluxClaim, ArgoCDClaim and WebhookClaim share: the applier reference shape, the operation, the status. */
import { z } from "zod";
import { OPERATION_PHASES, Reason } from "../contract.js";
import {
  accessFrom,
  ageColumn,
  conditions,
  namespaceName,
  objectName,
  observedGeneration,
  type PrinterColumn,
  readyColumn,
  timestamp,
} from "./common.js";
import {
  approval,
  changeWindows,
  commitStatusReport,
  governanceStatus,
  history,
  operationApprovals,
  operationOverride,
} from "./governance.js";
import { immutable } from "./k8s-ext.js";

/**
 * The annotation a person (or `applygate reconcile`) sets on a claim to ask for an apply now, as
 * Flux's `reconcile.fluxcd.io/requestedAt`: any new value is one request, taken by the branch
 * worker as a reason (sent as CatchUp) that goes through the same rules as any other.
 */
export const RECONCILE_REQUESTED_ANNOTATION = "reconcile.applygate.dev/requestedAt";

/** Condition types a claim reports. */
export const CLAIM_CONDITIONS = ["Ready", "InControl", "Configured"] as const;

/** The operation's phases and the reasons an apply is due are the contract's: one list each. */
export const operationPhase = z.enum(OPERATION_PHASES);
export type OperationPhase = z.infer<typeof operationPhase>;

/** A reference to the applier object a claim holds; never changes after creation. */
export function applierRef(what: string, description: string) {
  return immutable(z.object({ name: objectName, namespace: namespaceName }).describe(description), what);
}

export const operationTarget = z.object({
  uid: z.string().min(1).describe("UID of a GitTarget this apply serves."),
  reason: Reason,
});
export type OperationTarget = z.infer<typeof operationTarget>;

export const operation = z
  .object({
    token: z.string().min(1).describe("Identifies this apply; written before the write that starts it."),
    phase: operationPhase,
    commit: z.string().min(1).describe("The commit this apply is for."),
    targets: z.array(operationTarget),
    requestedAt: timestamp,
    startedAt: timestamp.optional(),
    completedAt: timestamp.optional(),
    resumeToken: z.string().optional(),
    suspendToken: z.string().optional(),
    message: z.string().optional(),
    outcome: z.string().optional(),
    approvals: operationApprovals.optional(),
    override: operationOverride.optional(),
  })
  .describe("The current or last apply, followed until the applier's own status proves it ended.");
export type Operation = z.infer<typeof operation>;

/** Builds a claim status schema for the applier kind's own previous-state values. */
export function claimStatus<const S extends readonly [string, ...string[]]>(previousStates: S) {
  return z.object({
    conditions: conditions.optional(),
    observedGeneration: observedGeneration.optional(),
    previousSuspendState: z
      .enum(previousStates)
      .optional()
      .describe("How the applier was set before the claim took hold; restored when it lets go."),
    lastAppliedCommit: z.string().optional(),
    repairPending: z.boolean().optional(),
    lastHandledReconcileAt: z
      .string()
      .max(256)
      .optional()
      .describe(
        "The value of the reconcile.applygate.dev/requestedAt annotation the branch worker last took as a request for an apply.",
      ),
    operation: operation.optional(),
    governance: governanceStatus.optional(),
    history: history.optional(),
  });
}

/** Who may name a claim, besides GitTargets of its own namespace: every claim kind has it. */
export const claimAccessFrom = accessFrom
  .optional()
  .describe("GitTargets in these namespaces (besides the claim's own) may name this claim.");

/**
 * What a FluxClaim and an ArgoCDClaim have after the reference to the applier object they hold:
 * who may name them, and the governance of their applies. A WebhookClaim has accessFrom alone.
 */
export const heldApplierClaimFields = {
  accessFrom: claimAccessFrom,
  changeWindows: changeWindows.optional(),
  approval: approval.optional(),
  commitStatusReport: commitStatusReport.optional(),
};

export const claimPrinterColumns: PrinterColumn[] = [
  readyColumn,
  { name: "InControl", type: "string", jsonPath: '.status.conditions[?(@.type=="InControl")].status' },
  { name: "Phase", type: "string", jsonPath: ".status.operation.phase" },
  { name: "Commit", type: "string", jsonPath: ".status.operation.commit" },
  ageColumn,
];
