/**
 * Approval: a release manager's approval of one commit for one claim, or a one-apply override of
 * its change windows. A kind of its own, so that who may approve is not who may edit: the
 * ClusterRole `applygate-approver` grants it and is aggregated into no built-in role, so a
 * namespace's editors cannot approve their own commits. Who approved is the API server's word:
 * `spec.approver` must equal the requester's username, which the ValidatingAdmissionPolicy
 * `applygate-approver-identity` (manifests/base/approval-policy.yaml) enforces on every create
 * and update, and the spec never changes once made (a changed approval is a new one).
 */
import { z } from "zod";
import { ageColumn, type KindInfo, kindObject, objectName } from "./common.js";
import { CLAIM_KINDS } from "./git-target.js";
import { checked, immutable } from "./k8s-ext.js";

export const APPROVAL_KIND = "Approval";
export const APPROVAL_PLURAL = "approvals";

/** The ValidatingAdmissionPolicy (and its binding) that makes `spec.approver` the requester. */
export const APPROVER_IDENTITY_POLICY = "applygate-approver-identity";

export const approvalSpec = immutable(
  checked(
    z.object({
      claimRef: z
        .object({
          kind: z.enum(CLAIM_KINDS),
          name: objectName,
        })
        .describe("The claim, in this namespace, whose apply this approves."),
      approver: z
        .string()
        .min(1)
        .max(253)
        .describe(
          "Your username as the API server knows it (kubectl auth whoami); admission refuses any other name.",
        ),
      commit: z
        .string()
        .regex(/^[0-9a-f]{40}$/)
        .optional()
        .describe("The full SHA of a commit the claim may apply (its manual approval)."),
      changeWindowOverride: z
        .string()
        .min(1)
        .max(1024)
        .optional()
        .describe(
          "Let one apply start outside the claim's change windows; the value is recorded (a ticket). A value grants one apply.",
        ),
      note: z.string().max(1024).optional().describe("Why: a ticket, a change request."),
    }),
    {
      rule: "has(self.commit) != has(self.changeWindowOverride)",
      message: "an Approval names either a commit or a changeWindowOverride",
      check: (s) => (s.commit !== undefined) !== (s.changeWindowOverride !== undefined),
    },
  ),
  "an Approval's spec",
);
export type ApprovalSpec = z.infer<typeof approvalSpec>;

export const approvalStatus = z.object({});

export const approvalObject = kindObject(APPROVAL_KIND, approvalSpec, approvalStatus);
export type ApprovalObject = z.infer<typeof approvalObject>;

export const approvalInfo: KindInfo = {
  kind: APPROVAL_KIND,
  plural: APPROVAL_PLURAL,
  singular: "approval",
  shortNames: [],
  description:
    "A release manager's approval of one commit for one claim, or a one-apply change-window override; the approver is the requester (admission policy).",
  spec: approvalSpec,
  status: approvalStatus,
  printerColumns: [
    { name: "Claim", type: "string", jsonPath: ".spec.claimRef.name" },
    { name: "Commit", type: "string", jsonPath: ".spec.commit" },
    { name: "Override", type: "string", jsonPath: ".spec.changeWindowOverride", priority: 1 },
    { name: "Approver", type: "string", jsonPath: ".spec.approver" },
    ageColumn,
  ],
};
