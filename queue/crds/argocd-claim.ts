/** ArgoCDClaim: holds one Argo CD Application's automated sync off and syncs it for each apply. */
import { z } from "zod";
import { applierRef, claimPrinterColumns, claimStatus, heldApplierClaimFields } from "./claim.js";
import { type KindInfo, kindObject } from "./common.js";

export const ARGOCD_CLAIM_KIND = "ArgoCDClaim";
export const ARGOCD_CLAIM_PLURAL = "argocdclaims";

export const ARGOCD_PREVIOUS_SUSPEND_STATES = ["AutomatedOn", "AutomatedOff", "NoAutomated"] as const;
export type ArgoCDPreviousSuspendState = (typeof ARGOCD_PREVIOUS_SUSPEND_STATES)[number];

export const argoCDClaimSpec = z.object({
  applicationRef: applierRef("applicationRef", "The Argo CD Application this claim holds."),
  ...heldApplierClaimFields,
});
export type ArgoCDClaimSpec = z.infer<typeof argoCDClaimSpec>;

export const argoCDClaimStatus = claimStatus(ARGOCD_PREVIOUS_SUSPEND_STATES);
export type ArgoCDClaimStatus = z.infer<typeof argoCDClaimStatus>;

export const argoCDClaim = kindObject(ARGOCD_CLAIM_KIND, argoCDClaimSpec, argoCDClaimStatus);
export type ArgoCDClaim = z.infer<typeof argoCDClaim>;

export const argoCDClaimInfo: KindInfo = {
  kind: ARGOCD_CLAIM_KIND,
  plural: ARGOCD_CLAIM_PLURAL,
  singular: "argocdclaim",
  shortNames: ["ac"],
  description:
    "Holds an Argo CD Application's automated sync off; each apply is one sync started by the branch worker.",
  spec: argoCDClaimSpec,
  status: argoCDClaimStatus,
  printerColumns: claimPrinterColumns,
};
