/**
 * The claim lifecycle of a WebhookClaim. An endpoint has no trigger of its own to hold off: it
 * applies only when called, and only the branch worker's attempts call it. So holding is being
 * ready to send (a URL the rules allow, a readable HMAC key), and handing back is immediate.
 */
import { StatusReason, type WebhookClaim, webhookClaim } from "../../queue/crds/index.js";
import { type KObject, readObject } from "../../queue/kube/index.js";
import type { ClaimController, ExternalCheck, HandBackResult, HoldResult } from "../applier-kind.js";
import type { ApplierSource } from "../claims/eligibility.js";
import { refusedUrl } from "./address.js";
import type { HmacKeys } from "./keys.js";

export class WebhookClaimController implements ClaimController {
  constructor(private readonly keys: HmacKeys) {}

  /** The endpoint lives on the claim: the claim is its own applier. */
  applierOf(claim: KObject) {
    return { namespace: claim.metadata.namespace ?? "", name: claim.metadata.name };
  }

  /** The endpoint applies whatever commit it is sent: any GitTarget's repository and branch. */
  async source(): Promise<ApplierSource> {
    return { state: "Any" };
  }

  async checkExternal(claim: KObject): Promise<ExternalCheck> {
    const r = readObject(webhookClaim, claim);
    if (!r.ok) return { configured: false, reason: StatusReason.InvalidSpec, message: r.error };
    const spec: WebhookClaim["spec"] = r.value.spec;
    const bad = refusedUrl(spec.url, { insecure: spec.insecure === true });
    if (bad) return { configured: false, reason: StatusReason.URLRefused, message: bad };
    const key = await this.keys.read(claim.metadata.namespace ?? "", spec.secretRef.name, spec.secretRef.key);
    if (!key.ok) return { configured: "Unknown", reason: key.reason, message: key.message };
    return { configured: true };
  }

  async hold(claim: KObject): Promise<HoldResult> {
    const g =
      claim.metadata.generation !== undefined ? { observedGeneration: claim.metadata.generation } : {};
    return {
      conditions: [
        {
          type: "InControl",
          status: "True",
          reason: StatusReason.EndpointHeld,
          message: "the endpoint is called only for the branch worker's attempts",
          ...g,
        },
        {
          type: "Ready",
          status: "True",
          reason: StatusReason.EndpointReady,
          message: "requests are signed and sent",
          ...g,
        },
      ],
    };
  }

  async handBack(): Promise<HandBackResult> {
    return { done: true };
  }

  async stop(): Promise<void> {
    await this.keys.close();
  }
}
