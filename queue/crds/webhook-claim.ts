/**
 * WebhookClaim: an HTTP endpoint of any other tool (a Helm or kubectl pipeline, Tekton, Jenkins,
 * an in-house deployer) that applies a folder when the branch worker asks it to. The endpoint has
 * no timer applygate must hold off: it applies only when called, and every call is an apply the
 * branch worker started.
 */
import { z } from "zod";
import { claimAccessFrom, claimPrinterColumns, claimStatus } from "./claim.js";
import { type KindInfo, kindObject, objectName } from "./common.js";
import { checked, k8s } from "./k8s-ext.js";

export const WEBHOOK_CLAIM_KIND = "WebhookClaim";
export const WEBHOOK_CLAIM_PLURAL = "webhookclaims";

/** How the request is signed: the header and format the endpoint's own verifier reads. */
export const SIGNATURE_STYLES = ["generic-hmac", "github"] as const;
export type SignatureStyle = (typeof SIGNATURE_STYLES)[number];

/** How the operation's end is learnt: the answer itself, or reports the tool posts to the gateway. */
export const COMPLETION_MODES = ["response", "callback"] as const;
export type CompletionMode = (typeof COMPLETION_MODES)[number];

/** The Secret key holding the HMAC key when `secretRef.key` is not set. */
export const WEBHOOK_HMAC_KEY = "hmacKey";

export const DEFAULT_WEBHOOK_TIMEOUT_SECONDS = 30;
export const DEFAULT_CALLBACK_BUDGET_SECONDS = 300;

export const webhookSecretRef = z
  .object({
    name: objectName.describe("A Secret in the claim's namespace."),
    key: z
      .string()
      .min(1)
      .max(253)
      .default(WEBHOOK_HMAC_KEY)
      .describe("The key holding the HMAC key (default hmacKey). Read again on every change of the Secret."),
  })
  .describe("The Secret with the HMAC key requests are signed with (and callbacks are checked with).");

export const webhookCompletion = z
  .object({
    mode: z
      .enum(COMPLETION_MODES)
      .default("response")
      .describe(
        "response: a 2xx answer within the timeout is Succeeded, anything else Failed. callback: a 2xx answer means accepted (Running); the tool reports the end to the gateway at POST /v1/operations/{token}.",
      ),
    budgetSeconds: z
      .number()
      .int()
      .min(1)
      .max(86400)
      .default(DEFAULT_CALLBACK_BUDGET_SECONDS)
      .describe(
        "callback: without an end reported this long after the request, the operation is Unresolved and still followed.",
      ),
  })
  .describe("How the end of an apply is observed.");

const HTTP_URL = /^https?:\/\/[^\s/?#]+[^\s]*$/;

export const webhookClaimSpec = checked(
  z.object({
    url: k8s(z.string().min(1).max(2048).regex(HTTP_URL), { format: "uri" }).describe(
      "The endpoint each apply is posted to; https unless insecure is true. Redirects are never followed.",
    ),
    insecure: z.boolean().optional().describe("Allow a plain http URL (a test cluster, the playground)."),
    secretRef: webhookSecretRef,
    signature: z
      .enum(SIGNATURE_STYLES)
      .default("generic-hmac")
      .describe(
        "generic-hmac: X-Signature: sha256=<hex> over the raw body (Flux's generic-hmac Receiver). github: X-Hub-Signature-256: sha256=<hex> (Tekton's GitHub interceptor, most CI tools).",
      ),
    timeoutSeconds: z
      .number()
      .int()
      .min(1)
      .max(600)
      .default(DEFAULT_WEBHOOK_TIMEOUT_SECONDS)
      .describe("How long the request may take, answer included."),
    completion: webhookCompletion.default({}),
    fieldManagers: k8s(z.array(z.string().min(1).max(128)).max(16), { listType: "set" })
      .optional()
      .describe(
        "The field managers the tool writes the cluster with: its writes within the apply window are its apply, not an edit.",
      ),
    accessFrom: claimAccessFrom,
  }),
  {
    rule: "self.url.startsWith('https://') || (has(self.insecure) && self.insecure)",
    message: "url must be https unless insecure is true",
    fieldPath: ".url",
    check: (s) => s.url.startsWith("https://") || s.insecure === true,
  },
);
export type WebhookClaimSpec = z.infer<typeof webhookClaimSpec>;
export type WebhookClaimSpecInput = z.input<typeof webhookClaimSpec>;

/** A WebhookClaim holds no applier object, so it has no previous state to restore. */
export const webhookClaimStatus = claimStatus(["None"]).omit({ previousSuspendState: true });
export type WebhookClaimStatus = z.infer<typeof webhookClaimStatus>;

export const webhookClaim = kindObject(WEBHOOK_CLAIM_KIND, webhookClaimSpec, webhookClaimStatus);
export type WebhookClaim = z.infer<typeof webhookClaim>;

export const webhookClaimInfo: KindInfo = {
  kind: WEBHOOK_CLAIM_KIND,
  plural: WEBHOOK_CLAIM_PLURAL,
  singular: "webhookclaim",
  shortNames: ["wc"],
  description:
    "An HTTP endpoint that applies a folder when called; each call is one apply started by the branch worker, its end observed from the answer or the tool's report.",
  spec: webhookClaimSpec,
  status: webhookClaimStatus,
  printerColumns: [
    ...claimPrinterColumns.slice(0, -1),
    { name: "Mode", type: "string", jsonPath: ".spec.completion.mode" },
    { name: "URL", type: "string", jsonPath: ".spec.url", priority: 1 },
    claimPrinterColumns[claimPrinterColumns.length - 1]!,
  ],
};
