/**
 * Release governance on claims and GitTargets: change windows, the one-apply override, and what
 * the claim's status shows of them. Each control is a rule of the decision core that makes an
 * applier not due; the claim says why (`ApplyAllowed`) and the executors check it again at the
 * moment of the write.
 */
import { z } from "zod";
import { localSecretRef, timestamp } from "./common.js";
import { checked, k8s } from "./k8s-ext.js";

// The vocabulary of these fields lives here, where the YAML is generated from, so this folder
// stays a leaf; the decision core and the approval readers import it from here.

/** A change window allows applies or denies them. */
export const CHANGE_WINDOW_KINDS = ["allow", "deny"] as const;
export type ChangeWindowKind = (typeof CHANGE_WINDOW_KINDS)[number];

/**
 * Go-style durations of hours, minutes and seconds, as Argo CD's sync windows write them; with
 * `.min(1)` the empty string is out. RE2 syntax (no lookahead): the API server compiles a CRD's
 * patterns with Go's regexp and refuses the whole CRD over one it cannot.
 */
export const DURATION_PATTERN = /^(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$/;

/** How a signature approves a commit (Flux's `GitRepository.spec.verify.mode`). */
export const SIGNATURE_MODES = ["HEAD", "Tag", "TagAndHEAD"] as const;
export type SignatureMode = (typeof SIGNATURE_MODES)[number];

/** The Git host APIs commit statuses are read from and written to. */
export const COMMIT_STATUS_APIS = ["github", "gitea"] as const;
export type CommitStatusApi = (typeof COMMIT_STATUS_APIS)[number];

export const changeWindow = z
  .object({
    kind: z.enum(CHANGE_WINDOW_KINDS).describe("allow: applies may start inside it; deny: none may."),
    schedule: z
      .string()
      .min(1)
      .max(128)
      .describe("Cron schedule of the window's openings: minute hour day-of-month month day-of-week."),
    duration: z
      .string()
      .min(1)
      .regex(DURATION_PATTERN)
      .max(32)
      .describe("How long each opening lasts, e.g. 2h, 90m, 1h30m."),
    timeZone: z.string().min(1).max(64).optional().describe("IANA time zone of the schedule; default UTC."),
  })
  .describe("One change window.");

export const changeWindows = z
  .array(changeWindow)
  .max(32)
  .describe(
    "Change windows: with allow windows, applies start only inside one; deny windows win over allow. The claim's windows and each GitTarget's hold together: an apply starts only where every one of them lets it.",
  );

export const signatureApproval = checked(
  z.object({
    secretRef: localSecretRef.describe(
      "Secret in this object's namespace holding the trusted public keys: armored OpenPGP public key blocks and authorized_keys lines (ssh-ed25519, ecdsa-sha2-nistp256/384/521, ssh-rsa), in any of its keys.",
    ),
    mode: z
      .enum(SIGNATURE_MODES)
      .optional()
      .describe(
        "HEAD (default): each foreign commit's own signature (gpgsig). Tag: a signed annotated tag points at the commit or at one above it on the branch's first-parent line (a release tag approves what it brings). TagAndHEAD: both.",
      ),
    tagPattern: z
      .string()
      .min(1)
      .max(255)
      .regex(/^[^\s]+$/)
      .optional()
      .describe(
        "Modes Tag and TagAndHEAD: only tags whose name matches are read (* any characters, ? one), e.g. v*.",
      ),
  }),
  {
    // A pattern in mode HEAD would be ignored without a word: refused, so nobody believes it holds.
    rule: "!has(self.tagPattern) || (has(self.mode) && self.mode != 'HEAD')",
    message: "tagPattern is read only in modes Tag and TagAndHEAD",
    fieldPath: ".tagPattern",
    check: (sig) => sig.tagPattern === undefined || (sig.mode !== undefined && sig.mode !== "HEAD"),
  },
).describe(
  "Each foreign commit is signed (OpenPGP, or SSH in namespace git) by a key of the Secret, as Flux's GitRepository spec.verify checks the head commit.",
);

/**
 * Where a commit-status API is, and which repository, is the GitProvider's to say: its token is
 * sent there. These fields were once set on claims and GitTargets, where any editor of the
 * namespace could point the token at a host of their choosing. They stay in the schema so objects
 * stored before are read (the worker ignores them), and the API server refuses them from now on.
 */
const MOVED_FIELDS = {
  apiURL: z
    .string()
    .optional()
    .describe("Not read, and refused: set the API root on the GitProvider (spec.commitStatus.apiURL)."),
  repository: z
    .string()
    .optional()
    .describe("Not read, and refused: set owner/name on the GitProvider (spec.commitStatus.repository)."),
};

function movedToProvider<T extends z.ZodTypeAny>(schema: T): T {
  return k8s(schema, {
    validations: [
      {
        rule: "!has(self.apiURL)",
        message:
          "apiURL is set on the GitProvider (spec.commitStatus.apiURL): the provider's credentials are sent there",
        fieldPath: ".apiURL",
      },
      {
        rule: "!has(self.repository)",
        message:
          "repository is set on the GitProvider (spec.commitStatus.repository): the provider's credentials are sent there",
        fieldPath: ".repository",
      },
    ],
  });
}

export const approval = z
  .object({
    manual: z
      .boolean()
      .optional()
      .describe(
        "A release manager approves each foreign commit with an Approval naming the claim and the commit (applygate-approver).",
      ),
    commitStatus: movedToProvider(
      z.object({
        context: z
          .string()
          .min(1)
          .max(255)
          .describe("The status context that must be success on the commit."),
        api: z.enum(COMMIT_STATUS_APIS).describe("The Git host's API: github or gitea."),
        ...MOVED_FIELDS,
      }),
    )
      .optional()
      .describe(
        "A commit status context on the Git host, read from the GitProvider's API (its spec.commitStatus) with the GitProvider's credentials.",
      ),
    signature: signatureApproval.optional(),
  })
  .describe(
    "Approvals a foreign commit needs before it is applied; every source set must approve it. The worker's own commits need none.",
  );
export type Approval = z.infer<typeof approval>;

export const commitStatusReport = movedToProvider(
  z.object({
    api: z.enum(COMMIT_STATUS_APIS).describe("The Git host's API: github or gitea."),
    ...MOVED_FIELDS,
  }),
).describe(
  "Post a commit status applygate/<namespace>/<claim> on each applied commit, on the GitProvider's API (its spec.commitStatus): pending while the apply runs, then success or failure.",
);

/** The condition a claim shows when governance is configured. */
export const APPLY_ALLOWED_CONDITION = "ApplyAllowed";

export const governanceStatus = z
  .object({
    changeWindow: z
      .object({
        open: z.boolean(),
        nextOpening: timestamp.optional().describe("When the next change window opens."),
        closesAt: timestamp.optional().describe("When the open window may close."),
      })
      .optional(),
    syncWindow: z
      .object({
        open: z.boolean().describe("Whether the AppProject's sync windows would let a sync run now."),
        nextOpening: timestamp.optional().describe("When Argo CD would next let a sync run."),
        closesAt: timestamp.optional().describe("When the sync windows may next hold a sync."),
      })
      .optional()
      .describe("Argo CD only: the Application's own sync windows (its AppProject's spec.syncWindows)."),
    awaitingApproval: z
      .array(
        z.object({
          commit: z.string().describe("A foreign commit since the last applied commit."),
          missing: z.array(z.string()).describe("The approval sources it still lacks."),
          signature: z
            .object({
              reason: z.string().describe("CommitUnsigned, SignatureUntrusted, SignatureInvalid, ..."),
              message: z.string().max(1024),
            })
            .optional()
            .describe("Why its signature does not approve it, when a signature is required."),
          notDescendantOf: z
            .string()
            .optional()
            .describe(
              "The tip is not a descendant of this last applied commit (a rollback, a rewritten history): an Approval must name the commit.",
            ),
        }),
      )
      .max(1000)
      .optional()
      .describe("Foreign commits that hold the apply until they are approved, newest first."),
    overrideUsed: z
      .object({
        value: z.string().max(1024).describe("The override's value (its Approval's changeWindowOverride)."),
        token: z.string().describe("The operation token of the apply that used it."),
        by: z.string().optional().describe("The approver of the override's Approval."),
      })
      .optional()
      .describe("The last change-window override an apply used; the same value grants nothing again."),
  })
  .describe("What the governance rules decide for this claim now.");
export type GovernanceStatus = z.infer<typeof governanceStatus>;

/** The approvals that let an apply through (as the attempt carried them). */
export const operationApprovals = z
  .array(
    z.object({
      commit: z.string().describe("A foreign commit the apply brought."),
      sources: z.array(z.string()).describe("The approvals it had."),
      by: z.array(z.string()).optional().describe("Who approved it, when known."),
      signedBy: z
        .string()
        .optional()
        .describe(
          "The key whose signature approved it (SSH SHA256:…, OpenPGP fingerprint): the tag's in mode Tag, the commit's own otherwise.",
        ),
      tag: z
        .object({
          name: z.string().describe("The signed annotated tag that approved it (without refs/tags/)."),
          signedBy: z.string().describe("The key that signed the tag."),
        })
        .optional()
        .describe("Modes Tag and TagAndHEAD: the release tag that approved it."),
    }),
  )
  .max(1000)
  .describe("The approvals that let this apply through.");

/** The one-apply override an apply used (outside the change windows). */
export const operationOverride = z
  .object({
    changeWindow: z.string().describe("The override's value (its Approval's changeWindowOverride)."),
    by: z.string().optional().describe("The approver of the override's Approval."),
  })
  .describe("The change-window override this apply used.");

/** How many ended operations a claim keeps in `status.history`, newest first. */
export const HISTORY_LIMIT = 10;

export const historyEntry = z
  .object({
    token: z.string(),
    commit: z.string(),
    reasons: z.array(z.string()).describe("The reasons it was started for (one per GitTarget)."),
    startedBy: z.string().describe("Who or what started it: the branch worker, or an external resume."),
    approvals: operationApprovals.optional(),
    override: operationOverride.optional(),
    requestedAt: timestamp,
    startedAt: timestamp.optional(),
    completedAt: timestamp.optional(),
    phase: z.string().describe("Succeeded or Failed."),
    outcome: z.string().optional(),
    message: z.string().max(4096).optional(),
  })
  .describe("One ended operation.");
export type HistoryEntry = z.infer<typeof historyEntry>;

export const history = z
  .array(historyEntry)
  .max(HISTORY_LIMIT)
  .describe(
    "The last ended operations, newest first: what was applied, why, with which approvals, and how it ended.",
  );
