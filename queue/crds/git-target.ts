/** GitTarget: a folder on a branch, written by the branch worker and applied by its claim's applier. */
import { z } from "zod";
import {
  ageColumn,
  conditions,
  type KindInfo,
  kindObject,
  localSecretRef,
  namespaceName,
  objectName,
  observedGeneration,
  readyColumn,
  timestamp,
} from "./common.js";
import { approval, changeWindows } from "./governance.js";
import { checked, immutable } from "./k8s-ext.js";
import { kindRef } from "./scope-grant.js";

export const GIT_TARGET_KIND = "GitTarget";
export const GIT_TARGET_PLURAL = "gittargets";

/** Condition types a GitTarget reports. */
export const GIT_TARGET_CONDITIONS = [
  "Ready",
  "Reconciling",
  "Stalled",
  "WriteRefused",
  "CredentialsAvailable",
  "Accepted",
] as const;

export const CLAIM_KINDS = ["FluxClaim", "ArgoCDClaim", "WebhookClaim"] as const;
export type ClaimKind = (typeof CLAIM_KINDS)[number];

export const ON_REFUSAL = ["Ignore", "Reapply"] as const;
export type OnRefusal = (typeof ON_REFUSAL)[number];

export const DEFAULT_COMMIT_WINDOW = { idleSeconds: 5, maxSeconds: 60 } as const;

/** Secret keys read from a GitTarget's intake Secret. */
export const INTAKE_TOKEN_KEY = "token";
export const INTAKE_HMAC_KEY = "hmacKey";

/**
 * A folder relative to the repository root: no leading or trailing slash, no empty, `.` or `..`
 * segment; `.` alone means the root. Written without look-arounds so JavaScript and the API server
 * (RE2) read the same pattern.
 */
const SEGMENT = String.raw`(?:[^/.][^/]*|\.[^/.][^/]*|\.\.[^/]+)`;
export const TARGET_PATH_PATTERN = new RegExp(`^(?:\\.|${SEGMENT}(?:/${SEGMENT})*)$`);

export const providerRef = z
  .object({
    name: objectName,
    namespace: namespaceName.optional().describe("Defaults to the GitTarget's namespace."),
  })
  .describe("The GitProvider holding the repository.");
export type ProviderRef = z.infer<typeof providerRef>;

export const claimRef = z
  .object({
    kind: z.enum(CLAIM_KINDS),
    name: objectName,
    namespace: namespaceName.optional().describe("Defaults to the GitTarget's namespace."),
  })
  .describe("The claim holding the applier that applies this folder.");
export type ClaimRef = z.infer<typeof claimRef>;

export const commitWindow = checked(
  z.object({
    idleSeconds: z
      .number()
      .int()
      .min(1)
      .max(3600)
      .default(DEFAULT_COMMIT_WINDOW.idleSeconds)
      .describe("Close the window after this many seconds without a new edit."),
    maxSeconds: z
      .number()
      .int()
      .min(1)
      .max(3600)
      .default(DEFAULT_COMMIT_WINDOW.maxSeconds)
      .describe("Close the window at the latest this many seconds after it opened."),
  }),
  {
    rule: "self.maxSeconds >= self.idleSeconds",
    message: "maxSeconds must be at least idleSeconds",
    fieldPath: ".maxSeconds",
    check: (w) => w.maxSeconds >= w.idleSeconds,
  },
).describe("How edits are gathered into one commit.");
export type CommitWindow = z.infer<typeof commitWindow>;

export const gitTargetSpec = z.object({
  providerRef: immutable(providerRef, "providerRef"),
  branch: immutable(z.string().min(1).max(255), "branch").describe("Branch the folder lives on."),
  baseBranch: z
    .string()
    .min(1)
    .max(255)
    .optional()
    .describe(
      "Branch that `branch` is created from when it does not exist yet; defaults to the GitProvider's spec.baseBranch, then the repository's default branch. Until it exists, writes stay pending.",
    ),
  path: immutable(z.string().min(1).max(1024).regex(TARGET_PATH_PATTERN), "path").describe(
    "Folder relative to the repository root, no leading slash, no `..`.",
  ),
  claimRef: claimRef.optional(),
  onRefusal: z
    .enum(ON_REFUSAL)
    .default("Ignore")
    .describe("Reapply: a refused edit makes an apply due (reason Refusal) so Git wins again."),
  commitWindow: commitWindow.optional(),
  intakeSecretRef: localSecretRef
    .optional()
    .describe("Secret with key `token` (bearer for the intake API) and optional `hmacKey`."),
  suspend: z
    .boolean()
    .optional()
    .describe("Freeze the folder: no publication and no apply; writes are still accepted and kept."),
  allowedKinds: z
    .array(kindRef)
    .optional()
    .describe(
      "Narrows what this folder may hold: writes of other kinds are refused. Never widens: other namespaces and privileged kinds still need a ScopeGrant.",
    ),
  changeWindows: changeWindows
    .optional()
    .describe(
      "Change windows for the claim this GitTarget names; they hold together with the claim's own (neither opens what the other closes).",
    ),
  approval: approval
    .optional()
    .describe(
      "Approvals the claim this GitTarget names requires; required together with the claim's own (a source both set must be set alike).",
    ),
});
export type GitTargetSpec = z.infer<typeof gitTargetSpec>;
export type GitTargetSpecInput = z.input<typeof gitTargetSpec>;

export const PUBLICATION_STATES = ["Published", "Retrying"] as const;

export const publication = z
  .object({
    state: z.enum(PUBLICATION_STATES),
    commit: z.string().optional().describe("Last commit published for this folder."),
    publishedAt: timestamp.optional(),
    retryingSince: timestamp.optional(),
    lastError: z.string().optional(),
    nextRetryAt: timestamp.optional(),
    intakePaused: z.boolean().describe("New writes are refused until the retained writes are published."),
    retainedWrites: z.number().int().min(0).optional(),
    retainedBytes: z.number().int().min(0).optional(),
  })
  .describe("Where publication of this folder's pending writes stands.");
export type Publication = z.infer<typeof publication>;

export const gitTargetStatus = z.object({
  conditions: conditions.optional(),
  observedGeneration: observedGeneration.optional(),
  publication: publication.optional(),
});
export type GitTargetStatus = z.infer<typeof gitTargetStatus>;

export const gitTarget = kindObject(GIT_TARGET_KIND, gitTargetSpec, gitTargetStatus);
export type GitTarget = z.infer<typeof gitTarget>;

export const gitTargetInfo: KindInfo = {
  kind: GIT_TARGET_KIND,
  plural: GIT_TARGET_PLURAL,
  singular: "gittarget",
  shortNames: ["gt"],
  description:
    "A folder on a branch, written by the branch worker and applied by the applier its claim holds.",
  spec: gitTargetSpec,
  status: gitTargetStatus,
  printerColumns: [
    readyColumn,
    { name: "Branch", type: "string", jsonPath: ".spec.branch" },
    { name: "Path", type: "string", jsonPath: ".spec.path" },
    { name: "Commit", type: "string", jsonPath: ".status.publication.commit" },
    ageColumn,
  ],
};
