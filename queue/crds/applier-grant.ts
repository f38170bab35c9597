/**
 * ApplierGrant: lets claims in other namespaces hold appliers in this one. Shaped like Gateway
 * API's ReferenceGrant: it lives in the applier's namespace, so only someone who may write there
 * can make it, and it names who may hold (`from`) and, optionally, which appliers (`to`).
 */
import { z } from "zod";
import { ageColumn, type KindInfo, kindObject, namespaceName, objectName } from "./common.js";
import { CLAIM_KINDS, type ClaimKind } from "./git-target.js";
import { k8s } from "./k8s-ext.js";

export const APPLIER_GRANT_KIND = "ApplierGrant";
export const APPLIER_GRANT_PLURAL = "appliergrants";

export const applierGrantFrom = z
  .object({
    namespace: namespaceName.describe("A namespace whose claims may hold appliers in this one."),
    kind: z
      .enum(CLAIM_KINDS)
      .optional()
      .describe(
        "Only claims of this kind (FluxClaim, ArgoCDClaim or WebhookClaim); every claim kind when omitted.",
      ),
  })
  .describe("Claims allowed to hold appliers in this namespace.");

export const applierGrantTo = z
  .object({ name: objectName.describe("An applier (Kustomization or Application) in this namespace.") })
  .describe("An applier the grant covers.");

export const applierGrantSpec = z.object({
  from: k8s(z.array(applierGrantFrom).min(1), { listType: "atomic" }).describe(
    "Who may hold appliers in this namespace.",
  ),
  to: k8s(z.array(applierGrantTo), { listType: "atomic" })
    .optional()
    .describe("The appliers they may hold; every applier in this namespace when omitted."),
});
export type ApplierGrantSpec = z.infer<typeof applierGrantSpec>;

export const applierGrantStatus = z.object({});

export const applierGrant = kindObject(APPLIER_GRANT_KIND, applierGrantSpec, applierGrantStatus);
export type ApplierGrant = z.infer<typeof applierGrant>;

export const applierGrantInfo: KindInfo = {
  kind: APPLIER_GRANT_KIND,
  plural: APPLIER_GRANT_PLURAL,
  singular: "appliergrant",
  shortNames: ["ag"],
  description:
    "Lets claims in the namespaces it names hold appliers in its own namespace (Gateway API ReferenceGrant style).",
  spec: applierGrantSpec,
  status: applierGrantStatus,
  printerColumns: [ageColumn],
};

/** What the grant rule reads of a claim and the applier it names. */
export interface HoldRequest {
  claimKind: ClaimKind | (string & {});
  claimNamespace: string;
  applierNamespace: string;
  applierName: string;
}

/** A grant as the rule reads it: its namespace and spec (malformed specs grant nothing). */
export interface GrantView {
  namespace: string;
  spec?: { from?: readonly { namespace?: string; kind?: string }[]; to?: readonly { name?: string }[] };
}

/**
 * Whether a claim may hold the applier it names (pure): always in its own namespace; in another
 * only when an ApplierGrant in the applier's namespace names the claim's namespace (and kind, if
 * it narrows kinds) and the applier (if it narrows appliers).
 */
export function mayHold(req: HoldRequest, grants: readonly GrantView[]): boolean {
  if (req.claimNamespace === req.applierNamespace) return true;
  return grants.some(
    (g) =>
      g.namespace === req.applierNamespace &&
      (g.spec?.from ?? []).some(
        (f) => f.namespace === req.claimNamespace && (f.kind === undefined || f.kind === req.claimKind),
      ) &&
      (g.spec?.to === undefined || g.spec.to.some((t) => t.name === req.applierName)),
  );
}

/** The message a refused claim carries. */
export function notAllowedMessage(req: HoldRequest): string {
  return (
    `the applier ${req.applierNamespace}/${req.applierName} is in another namespace, and no ApplierGrant ` +
    `there lets ${req.claimKind} claims from namespace ${req.claimNamespace} hold it`
  );
}
