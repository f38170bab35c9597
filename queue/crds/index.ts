/** applygate's own kinds: zod schemas (the source of truth), inferred types and constants. */
import { applierGrantInfo } from "./applier-grant.js";
import { approvalInfo } from "./approval.js";
import { argoCDClaimInfo } from "./argocd-claim.js";
import type { KindInfo } from "./common.js";
import { fluxClaimInfo } from "./flux-claim.js";
import { gitProviderInfo } from "./git-provider.js";
import { gitTargetInfo } from "./git-target.js";
import { scopeGrantInfo } from "./scope-grant.js";
import { watchRuleInfo } from "./watch-rule.js";
import { webhookClaimInfo } from "./webhook-claim.js";

export * from "./applier-grant.js";
export * from "./approval.js";
export * from "./argocd-claim.js";
export * from "./claim.js";
export * from "./common.js";
export * from "./flux-claim.js";
export * from "./git-provider.js";
export * from "./git-target.js";
export * from "./governance.js";
export * from "./reasons.js";
export * from "./scope-grant.js";
export * from "./watch-rule.js";
export * from "./webhook-claim.js";

/** Every kind we define, in the order the CRD files are written. */
export const KINDS: readonly KindInfo[] = [
  gitProviderInfo,
  gitTargetInfo,
  fluxClaimInfo,
  argoCDClaimInfo,
  webhookClaimInfo,
  applierGrantInfo,
  scopeGrantInfo,
  watchRuleInfo,
  approvalInfo,
];
