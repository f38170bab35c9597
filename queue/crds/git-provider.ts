/** GitProvider: a repository, its credentials and its webhook secret. */
import { z } from "zod";
import {
  accessFrom,
  ageColumn,
  conditions,
  type KindInfo,
  kindObject,
  localSecretRef,
  observedGeneration,
  readyColumn,
} from "./common.js";
import { checked, immutable } from "./k8s-ext.js";

export const GIT_PROVIDER_KIND = "GitProvider";
export const GIT_PROVIDER_PLURAL = "gitproviders";

export const GIT_PROVIDER_TYPES = ["github", "gitea", "gitlab", "generic-hmac"] as const;
export const gitProviderType = z.enum(GIT_PROVIDER_TYPES);
export type GitProviderType = z.infer<typeof gitProviderType>;

/** Secret keys the products reads from the Secrets a GitProvider names. */
export const WEBHOOK_SECRET_TOKEN_KEY = "token";
export const CREDENTIALS_USERNAME_KEY = "username";
export const CREDENTIALS_PASSWORD_KEY = "password";
export const CREDENTIALS_TOKEN_KEY = "token";

/** A clone URL whose path names owner and repository (at least two segments after the host). */
const NAMES_OWNER_AND_REPOSITORY = "^https?://[^/]+/[^/]+/[^/]+";

export const gitProviderSpec = checked(
  checked(
    z.object({
      url: immutable(
        z
          .string()
          .min(1)
          .max(2048)
          .regex(/^https?:\/\/[^\s/?#@]+\/[^\s?#]+$/),
        "url",
      ).describe(
        "Clone URL of the repository (https; plain http only where the operator allows credentials over it). No userinfo (credentials go in credentialsSecretRef), query or fragment. Immutable: the oldest GitProvider naming a repository holds it, so a provider names one repository for its whole life.",
      ),
      type: gitProviderType.describe(
        "Which Git host sends the push webhooks: decides how they are verified.",
      ),
      allowSha1Signature: z
        .boolean()
        .default(false)
        .describe("Accept the legacy SHA-1 webhook signature (github and gitea only)."),
      webhookSecretRef: localSecretRef.describe(
        "Secret whose key `token` names the receiver path (/hook/<hex sha256(token+name+namespace)>) " +
          "and is the HMAC secret or GitLab token.",
      ),
      credentialsSecretRef: localSecretRef
        .optional()
        .describe("Secret with `username` and `password` (or `token`) used to fetch and push."),
      accessFrom: accessFrom
        .optional()
        .describe(
          "Namespaces besides this one whose GitTargets may write this repository; a GitTarget from any other is refused (ProviderNamespaceNotAllowed).",
        ),
      commitStatus: z
        .object({
          apiURL: z
            .string()
            .max(2048)
            .regex(/^https?:\/\/[^\s/?#@]+(\/[^\s?#]*)?$/)
            .optional()
            .describe(
              "API root of the Git host (e.g. https://gitea.example/api/v1); default from url (api.github.com for github.com, <host>/api/v3, <host>/api/v1). The credentials are sent here.",
            ),
          repository: z
            .string()
            .regex(/^[^/\s]+\/[^/\s]+$/)
            .optional()
            .describe("owner/name on the Git host; default from url."),
        })
        .optional()
        .describe(
          "Where the commit statuses of this repository are read (approval.commitStatus) and posted (commitStatusReport).",
        ),
      baseBranch: z
        .string()
        .min(1)
        .max(255)
        .optional()
        .describe(
          "Branch a GitTarget's missing branch is created from when the GitTarget names none; defaults to the repository's default branch.",
        ),
    }),
    {
      rule: "!self.allowSha1Signature || self.type in ['github', 'gitea']",
      message: "allowSha1Signature is only meaningful for type github or gitea",
      fieldPath: ".allowSha1Signature",
      check: (spec) => !spec.allowSha1Signature || spec.type === "github" || spec.type === "gitea",
    },
  ),
  {
    // The commit-status API is per repository: a block that cannot tell which one would fail every
    // read of the claims asking for approval by commit status (ApprovalUnreadable).
    rule: `!has(self.commitStatus) || has(self.commitStatus.repository) || self.url.matches('${NAMES_OWNER_AND_REPOSITORY}')`,
    message: "commitStatus needs repository (owner/name) when url does not name owner and repository",
    fieldPath: ".commitStatus",
    check: (spec) =>
      spec.commitStatus === undefined ||
      spec.commitStatus.repository !== undefined ||
      new RegExp(NAMES_OWNER_AND_REPOSITORY).test(spec.url),
  },
);
export type GitProviderSpec = z.infer<typeof gitProviderSpec>;
export type GitProviderSpecInput = z.input<typeof gitProviderSpec>;

export const gitProviderStatus = z.object({
  conditions: conditions.optional(),
  webhookPath: z.string().optional().describe("Path on the gateway that receives this repository's pushes."),
  observedGeneration: observedGeneration.optional(),
});
export type GitProviderStatus = z.infer<typeof gitProviderStatus>;

export const gitProvider = kindObject(GIT_PROVIDER_KIND, gitProviderSpec, gitProviderStatus);
export type GitProvider = z.infer<typeof gitProvider>;

export const gitProviderInfo: KindInfo = {
  kind: GIT_PROVIDER_KIND,
  plural: GIT_PROVIDER_PLURAL,
  singular: "gitprovider",
  shortNames: ["gp"],
  description: "A Git repository, its credentials and the secret that authenticates its push webhooks.",
  spec: gitProviderSpec,
  status: gitProviderStatus,
  printerColumns: [
    readyColumn,
    { name: "Type", type: "string", jsonPath: ".spec.type" },
    { name: "URL", type: "string", jsonPath: ".spec.url" },
    ageColumn,
  ],
};
