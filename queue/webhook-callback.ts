/**
 * What the gateway and the webhook applier share about callbacks: the Redis keys of an operation
 * a tool may report on, the report's shape, and the signature a request or report carries. A
 * tool reports to `POST /v1/operations/{token}`, signed with its claim's HMAC key as the request
 * it answers was; the gateway appends the report to the operation's list and the sidecar
 * following the operation reads it from there.
 */
import { createHmac } from "node:crypto";
import { z } from "zod";
import { SIGNATURE_STYLES, type SignatureStyle } from "./crds/webhook-claim.js";

export type { SignatureStyle } from "./crds/webhook-claim.js";

/** The header each style carries its `sha256=<hex>` signature in (lower case, as Node reads it). */
export const SIGNATURE_HEADER: Record<SignatureStyle, string> = {
  "generic-hmac": "x-signature",
  github: "x-hub-signature-256",
};

/** `sha256=<hex>` of HMAC-SHA256(key, body): Flux's generic-hmac format and GitHub's. */
export function signBody(key: string, body: Buffer | string): string {
  return `sha256=${createHmac("sha256", key).update(body).digest("hex")}`;
}

/** Headers every request carries besides the signature. */
export const DELIVERY_HEADER = "x-applygate-delivery";
export const TOKEN_HEADER = "x-applygate-token";

export const callbackKeys = (prefix: string, token: string) => ({
  /**
   * JSON `CallbackRecord` while the operation may be reported on: written before the request is
   * sent, deleted once its end is recorded. Absent: the token is unknown or finished.
   */
  record: `${prefix}:webhook:op:${token}`,
  /** List of `CallbackReport` JSON, appended by the gateway, drained by the sidecar in order. */
  reports: `${prefix}:webhook:op:${token}:reports`,
});

/** A record outlives no operation by more than this (a safety net; the sidecar deletes it). */
export const CALLBACK_RECORD_TTL_SECONDS = 7 * 24 * 3600;

export const CallbackRecord = z.object({
  claim: z.object({ namespace: z.string().min(1), name: z.string().min(1) }),
  signature: z.enum(SIGNATURE_STYLES),
});
export type CallbackRecord = z.infer<typeof CallbackRecord>;

/** What a tool posts: the phase it reached, and a message for people. */
export const CallbackBody = z.object({
  phase: z.enum(["Running", "Succeeded", "Failed"]),
  message: z.string().max(4000).optional(),
});
export type CallbackBody = z.infer<typeof CallbackBody>;

export const CallbackReport = CallbackBody.extend({ receivedAt: z.string() });
export type CallbackReport = z.infer<typeof CallbackReport>;
