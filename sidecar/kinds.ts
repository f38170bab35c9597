/**
 * The applier kinds a sidecar can run beside, keyed by ApplierKind: each entry names the claim
 * type the shared reconciler follows and loads the kind's module, typed by the kind's settings.
 * Adding a kind (as the webhook applier was) is one entry here and its module under sidecar/<kind>/;
 * the other kinds are not touched.
 */
import type { ApplierKind } from "../queue/contract.js";
import { RESOURCES } from "../queue/kube/index.js";
import type { ApplierKindModule } from "./applier-kind.js";
import type { ArgoCDKindOptions } from "./argocd/index.js";
import type { ClaimReconcilerOptions } from "./claims/reconciler.js";
import type { FluxKindOptions } from "./flux/index.js";
import type { WebhookKindOptions } from "./webhook/index.js";

/** Each kind's settings, as its module declares them. */
export interface KindOptions {
  flux: FluxKindOptions;
  argocd: ArgoCDKindOptions;
  webhook: WebhookKindOptions;
}

export type SidecarApplier = keyof KindOptions & ApplierKind;

export interface KindEntry<K extends SidecarApplier> {
  /** The claim type the shared reconciler follows for this kind. */
  claimType: ClaimReconcilerOptions["claimType"];
  load(): Promise<ApplierKindModule<KindOptions[K]>>;
}

export const KINDS: { readonly [K in SidecarApplier]: KindEntry<K> } = {
  flux: { claimType: RESOURCES.fluxClaim, load: () => import("./flux/index.js") },
  argocd: { claimType: RESOURCES.argoCDClaim, load: () => import("./argocd/index.js") },
  webhook: { claimType: RESOURCES.webhookClaim, load: () => import("./webhook/index.js") },
};
