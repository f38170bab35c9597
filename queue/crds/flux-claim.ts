/** FluxClaim: holds one Flux Kustomization suspended and resumes it for each apply. */
import { z } from "zod";
import { applierRef, claimPrinterColumns, claimStatus, heldApplierClaimFields } from "./claim.js";
import { type KindInfo, kindObject } from "./common.js";

export const FLUX_CLAIM_KIND = "FluxClaim";
export const FLUX_CLAIM_PLURAL = "fluxclaims";

export const FLUX_PREVIOUS_SUSPEND_STATES = ["Suspended", "Resumed"] as const;
export type FluxPreviousSuspendState = (typeof FLUX_PREVIOUS_SUSPEND_STATES)[number];

export const fluxClaimSpec = z.object({
  kustomizationRef: applierRef("kustomizationRef", "The Flux Kustomization this claim holds."),
  ...heldApplierClaimFields,
});
export type FluxClaimSpec = z.infer<typeof fluxClaimSpec>;

export const fluxClaimStatus = claimStatus(FLUX_PREVIOUS_SUSPEND_STATES);
export type FluxClaimStatus = z.infer<typeof fluxClaimStatus>;

export const fluxClaim = kindObject(FLUX_CLAIM_KIND, fluxClaimSpec, fluxClaimStatus);
export type FluxClaim = z.infer<typeof fluxClaim>;

export const fluxClaimInfo: KindInfo = {
  kind: FLUX_CLAIM_KIND,
  plural: FLUX_CLAIM_PLURAL,
  singular: "fluxclaim",
  shortNames: ["fc"],
  description:
    "Holds a Flux Kustomization suspended; each apply resumes it once, started by the branch worker.",
  spec: fluxClaimSpec,
  status: fluxClaimStatus,
  printerColumns: claimPrinterColumns,
};
