/**
 * The request the webhook applier sends for one attempt (pure): the JSON body a tool reads, and
 * the headers that sign it in the claim's style.
 */
import type { Attempt } from "../../queue/contract.js";
import {
  DELIVERY_HEADER,
  SIGNATURE_HEADER,
  type SignatureStyle,
  signBody,
  TOKEN_HEADER,
} from "../../queue/webhook-callback.js";

/** What the endpoint is told: the commit to apply, why, and what to report on. */
export interface WebhookRequestBody {
  repository: string;
  branch: string;
  commit: string;
  /** The attempt's first reason by precedence (ForeignCommit, Repair, Refusal, CatchUp). */
  reason: string;
  /** The operation token: the callback path and every report name it. */
  token: string;
  claim: { namespace: string; name: string };
}

const PRECEDENCE = ["ForeignCommit", "Repair", "Refusal", "CatchUp"];

export function requestBody(attempt: Attempt): WebhookRequestBody {
  const reasons = attempt.targets.map((t) => t.reason);
  const reason = PRECEDENCE.find((r) => reasons.includes(r as never)) ?? reasons[0] ?? "CatchUp";
  return {
    repository: attempt.repository,
    branch: attempt.branch,
    commit: attempt.commit,
    reason,
    token: attempt.token,
    claim: { namespace: attempt.claim.namespace, name: attempt.claim.name },
  };
}

/** The raw bytes sent and the headers that go with them. The signature covers exactly these bytes. */
export function signedRequest(
  body: WebhookRequestBody,
  o: { key: string; style: SignatureStyle; deliveryId: string },
): { bytes: Buffer; headers: Record<string, string> } {
  const bytes = Buffer.from(JSON.stringify(body));
  const headers: Record<string, string> = {
    "content-type": "application/json",
    "user-agent": "applygate-webhook",
    [SIGNATURE_HEADER[o.style]]: signBody(o.key, bytes),
    [DELIVERY_HEADER]: o.deliveryId,
    [TOKEN_HEADER]: body.token,
  };
  // What Tekton's GitHub interceptor and most CI tools also read (a push-like event, its delivery id).
  if (o.style === "github") {
    headers["x-github-event"] = "push";
    headers["x-github-delivery"] = o.deliveryId;
  }
  return { bytes, headers };
}
