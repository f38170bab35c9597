/**
 * The contract every component depends on: queue names, the shapes of the jobs and records that
 * cross process boundaries, and the key of a repository branch. Schemas are zod so that every
 * boundary validates what it receives and names the bad field.
 */
import { z } from "zod";

/** BullMQ queue names (BullMQ forbids ':' in names). The Redis prefix is configured separately. */
export const QUEUES = {
  /** Push and refusal notices from the gateway; job id derived from the delivery, so redelivery is idempotent. */
  notices: "notices",
  /** "This branch has work" signals, deduplicated per branch key (at most one active and one waiting). */
  branches: "branches",
  /** Reports from executors (sidecars) back to the branch worker. */
  reports: "reports",
} as const;

export const APPLIER_KINDS = ["flux", "argocd", "webhook"] as const;
export type ApplierKind = (typeof APPLIER_KINDS)[number];

/** Apply attempts for one applier kind, consumed by that kind's executors. */
export function attemptsQueue(kind: ApplierKind): string {
  return `attempts-${kind}`;
}

export const DEFAULT_REDIS_PREFIX = "applygate";

/**
 * How long after an attempt's operation completed the applier's writes may still reach the window
 * observer: the worker keeps the apply window open this long, and the observers watch as long.
 */
export const WINDOW_GRACE_MS = 10_000;

// ---------------------------------------------------------------------------------------------
// Repository and branch identity

/**
 * A pure function of one string, remembered. Repository URLs are parsed again and again with the
 * same few values (a replica's start reads each of 10,000 GitTargets' URLs several times; every
 * push of a repository carries the same few), and a parse is a `new URL` or two. Arguments can
 * come from outside (a webhook's payload), so at most `max` answers are kept, all forgotten at
 * once when full. A call that throws is not remembered.
 */
export function remembered<R>(fn: (s: string) => R, max = 1024): (s: string) => R {
  const known = new Map<string, R>();
  return (s) => {
    if (known.has(s)) return known.get(s) as R;
    const r = fn(s);
    if (known.size >= max) known.clear();
    known.set(s, r);
    return r;
  };
}

/**
 * Normalises a repository URL so that every form a Git host reports matches: lower-case host,
 * no credentials, no port for the default schemes, no trailing `.git` or `/`, and ssh forms
 * (`git@host:owner/repo`, `ssh://git@host/owner/repo`) mapped to the same `host/owner/repo`.
 */
export function normalizeRepoUrl(url: string): string {
  return normalizedUrls(url);
}

const normalizedUrls = remembered(normalizeUncached);

function normalizeUncached(url: string): string {
  let s = url.trim();
  const scp = /^[\w.-]+@([^:/]+):(.+)$/.exec(s);
  let host: string;
  let path: string;
  if (scp && !s.includes("://")) {
    host = scp[1]!;
    path = scp[2]!;
  } else {
    if (!s.includes("://")) s = `https://${s}`;
    const u = new URL(s);
    host = u.hostname;
    const defaultPort = u.port === "" || u.port === "443" || u.port === "80" || u.port === "22";
    if (!defaultPort) host = `${host}:${u.port}`;
    path = decodeURIComponent(u.pathname);
  }
  path = path
    .replace(/^\/+/, "")
    .replace(/\/+$/, "")
    .replace(/\.git$/, "");
  return `${host.toLowerCase()}/${path}`;
}

/**
 * The key of one branch of a GitProvider's repository: the unit one branch worker owns, with that
 * provider's credentials and nobody else's. `<namespace>/<name>:<normalised URL>@<branch>`: the
 * provider first (two GitProviders naming one repository are two branches, each with its own
 * credentials), then the repository it names (a provider made again under the same name for
 * another repository is another branch).
 */
export function branchKey(
  provider: { namespace: string; name: string },
  repoUrl: string,
  branch: string,
): string {
  return `${provider.namespace}/${provider.name}:${normalizeRepoUrl(repoUrl)}@${branch}`;
}

// ---------------------------------------------------------------------------------------------
// Shared small shapes

export const ObjectRef = z.object({
  apiVersion: z.string().min(1),
  kind: z.string().min(1),
  namespace: z.string().optional(),
  name: z.string().min(1),
});
export type ObjectRef = z.infer<typeof ObjectRef>;

export const NamespacedName = z.object({ namespace: z.string().min(1), name: z.string().min(1) });
export type NamespacedName = z.infer<typeof NamespacedName>;

export const Author = z.object({ name: z.string().min(1), email: z.string().min(1) });
export type Author = z.infer<typeof Author>;

export const Sha = z.string().regex(/^[0-9a-f]{40}$/, "a 40-hex commit id");

const KubeObject = z
  .object({
    apiVersion: z.string().min(1),
    kind: z.string().min(1),
    metadata: z.object({ name: z.string().min(1), namespace: z.string().optional() }).passthrough(),
  })
  .passthrough();

// ---------------------------------------------------------------------------------------------
// Intake: writes (API-side edits to be mirrored into a GitTarget's folder)

export const WriteChange = z.discriminatedUnion("op", [
  z.object({
    op: z.literal("upsert"),
    object: KubeObject,
    /**
     * The object as the writer saw it just before its edit. With it, the write stores only the
     * change from `base` to `object`, carried over the file Git holds when the commit is written
     * (a field the writer did not change keeps Git's value); without it, `object` is stored whole.
     * Must name the same object (API group, kind, namespace, name). See docs/design/intake.md.
     */
    base: KubeObject.optional(),
  }),
  z.object({ op: z.literal("delete"), ref: ObjectRef }),
]);
export type WriteChange = z.infer<typeof WriteChange>;

/** What a tool posts to `/v1/targets/{ns}/{name}/writes`. */
export const WriteRequest = z.object({
  changes: z.array(WriteChange).min(1).max(1000),
  author: Author,
  message: z.string().max(4000).optional(),
  /** Closes the target's commit window at once: a commit boundary. */
  save: z.boolean().optional(),
  /** When the edit happened on the cluster (RFC 3339); defaults to the time the gateway accepted it. */
  editedAt: z.string().datetime({ offset: true }).optional(),
});
export type WriteRequest = z.infer<typeof WriteRequest>;

/**
 * A watched write whose touched managedFields entries are the applier's own managers alone. The
 * watch plane cannot tell an echo of the applier's apply from a late apply or a write with no
 * window open: the branch worker's decision core judges it (not mirrored, withheld with a Repair
 * due, or mirrored as late) before the write joins a commit window.
 */
export const ApplierAuthored = z.object({
  manager: z.string().min(1),
  /** managedFields time of the applier's entry (RFC 3339, whole seconds). */
  writtenAt: z.string().min(1),
  resourceVersion: z.string(),
});
export type ApplierAuthored = z.infer<typeof ApplierAuthored>;

/** A write as it is held durably in its branch's inbox until a push carrying it lands. */
/**
 * A snapshot's prune sweep (set by the watch plane only, for a WatchRule with `prune.mode: Always`):
 * the worker turns it into delete changes, one per file of this kind in these namespaces whose
 * object is not live and whose stored labels the rule's selector matches, and the write then
 * passes the same checks as any other. `live` holds every live object of the kind in those
 * namespaces (`<namespace>/<name>`, `/<name>` when cluster-scoped), selected or not, so a file
 * another rule holds for a live object is never swept.
 */
export const SnapshotSweep = z.object({
  apiVersion: z.string().min(1),
  kind: z.string().min(1),
  /** The namespaces swept; empty for a cluster-scoped kind. */
  namespaces: z.array(z.string().min(1)),
  selector: z
    .object({
      matchLabels: z.record(z.string()).optional(),
      matchExpressions: z
        .array(
          z.object({
            key: z.string().min(1),
            operator: z.enum(["In", "NotIn", "Exists", "DoesNotExist"]),
            values: z.array(z.string()).optional(),
          }),
        )
        .optional(),
    })
    .optional(),
  live: z.array(z.string()),
  /**
   * The commit the folder's applier last applied (its claim's `status.lastAppliedCommit`). Only a
   * file also present, at the same path, at this commit is swept: a file added since was never
   * applied, so its object's absence proves nothing. Absent: the sweep deletes nothing.
   */
  appliedCommit: z.string().min(1).optional(),
});
export type SnapshotSweep = z.infer<typeof SnapshotSweep>;

/**
 * What the watch plane saw when a snapshot's collection started (set by the watch plane only): the
 * branch worker's apply epoch and whether Git was ahead of the cluster, read from the branch's
 * published apply state (`branchKeys(…).applyState`) just before the collection was listed. Every
 * write of one snapshot, and its sweep, carries the same stamp. The worker discards a snapshot
 * collected while Git was ahead, across an epoch change, or arriving while Git is ahead, unless it
 * is `initial` (the first of its collection: the startup baseline) or the branch has no trigger.
 */
export const SnapshotStamp = z.object({
  id: z.string().min(1),
  /** The epoch read; null when the branch had published none (unknown: judged as stale). */
  epoch: z.number().int().nullable(),
  gitAhead: z.boolean(),
  initial: z.boolean(),
  /**
   * The commits the cluster may hold the GitTarget's objects from when the collection started, as
   * its claim's status said: the commit its applier last applied and the commit of its latest
   * operation (in flight, or ended without success). A field of a snapshot's object equal to its
   * value at any of them (or at the tip the worker read the write at) is the applier's, not an
   * edit, where a foreign commit since that commit changed the object's file: an initial snapshot
   * taken while a push was not applied yet never undoes the push. Absent: the tip alone is the
   * base.
   */
  appliedCommits: z.array(z.string().min(1)).max(2).optional(),
});
export type SnapshotStamp = z.infer<typeof SnapshotStamp>;

export const AcceptedWrite = WriteRequest.extend({
  /** At least one change, unless the write is a sweep (whose changes the worker fills in). */
  changes: z.array(WriteChange).max(1000),
  /** Set by the watch plane only (never by the intake API): delete the files of objects gone live. */
  sweep: SnapshotSweep.optional(),
  id: z.string().min(1),
  target: NamespacedName.extend({ uid: z.string().optional() }),
  branchKey: z.string().min(1),
  path: z.string(),
  acceptedAt: z.string(),
  /** Set by the watch plane only (never by the intake API): the write is for the worker to judge. */
  applierAuthored: ApplierAuthored.optional(),
  /** Set by the watch plane only: the write belongs to a snapshot collected as the stamp says. */
  snapshot: SnapshotStamp.optional(),
  /**
   * Set by the watch plane only, on a write with no changes: a marker of the GitTarget's initial
   * snapshots for one round (the mirror's coverage token, `watchedTargetKey`). `started` comes
   * before the round's first write, `done` after its last: once every write before `done` is
   * settled, the GitTarget is past the initial-snapshot barrier.
   */
  initialSnapshots: z.object({ token: z.string().min(1), phase: z.enum(["started", "done"]) }).optional(),
});
export type AcceptedWrite = z.infer<typeof AcceptedWrite>;

// ---------------------------------------------------------------------------------------------
// Notices

export const PushNotice = z.object({
  type: z.literal("push"),
  provider: NamespacedName,
  deliveryId: z.string().min(1),
  /** Every repository URL the host gave, normalised with normalizeRepoUrl. */
  repository: z.array(z.string()).min(1),
  branch: z.string().min(1),
  before: z.string(),
  after: z.string(),
  deleted: z.boolean(),
  forced: z.boolean(),
  receivedAt: z.string(),
  /** The branch keys of GitTargets that write this repository and branch. */
  branchKeys: z.array(z.string()).default([]),
});
export type PushNotice = z.infer<typeof PushNotice>;

/** What a tool posts to `/v1/targets/{ns}/{name}/refusals`. */
export const RefusalRequest = z.object({
  object: ObjectRef,
  reason: z.string().min(1).max(4000),
  author: Author.partial().optional(),
  refusedAt: z.string().datetime({ offset: true }).optional(),
});
export type RefusalRequest = z.infer<typeof RefusalRequest>;

export const RefusalNotice = RefusalRequest.extend({
  type: z.literal("refusal"),
  id: z.string().min(1),
  target: NamespacedName.extend({ uid: z.string().optional() }),
  branchKey: z.string().min(1),
  receivedAt: z.string(),
});
export type RefusalNotice = z.infer<typeof RefusalNotice>;

export const Notice = z.discriminatedUnion("type", [PushNotice, RefusalNotice]);
export type Notice = z.infer<typeof Notice>;

/** Data of a `branches` job: only the key; the work itself waits in the branch's inbox. */
export const BranchSignal = z.object({ branchKey: z.string().min(1) });
export type BranchSignal = z.infer<typeof BranchSignal>;

// ---------------------------------------------------------------------------------------------
// Apply attempts and reports

/** Why an apply is due, in precedence order within one attempt. */
export const REASONS = ["ForeignCommit", "Repair", "Refusal", "CatchUp"] as const;
export const Reason = z.enum(REASONS);
export type Reason = z.infer<typeof Reason>;

export const ClaimRef = z.object({
  kind: z.enum(["FluxClaim", "ArgoCDClaim", "WebhookClaim"]),
  namespace: z.string().min(1),
  name: z.string().min(1),
});
export type ClaimRef = z.infer<typeof ClaimRef>;

export const ApplierRef = z.object({
  kind: z.enum(APPLIER_KINDS),
  namespace: z.string().min(1),
  name: z.string().min(1),
  /** A webhook endpoint's field managers (its WebhookClaim's spec.fieldManagers): its own writes. */
  fieldManagers: z.array(z.string()).optional(),
});
export type ApplierRef = z.infer<typeof ApplierRef>;

/** One apply attempt for one applier, for one checked commit. The executor carries out exactly one. */
export const Attempt = z.object({
  token: z.string().min(1),
  claim: ClaimRef,
  applier: ApplierRef,
  branchKey: z.string().min(1),
  repository: z.string().min(1),
  branch: z.string().min(1),
  commit: Sha,
  targets: z
    .array(z.object({ uid: z.string(), namespace: z.string(), name: z.string(), reason: Reason }))
    .min(1),
  sentAt: z.string(),
  /**
   * The edit recheck, when the decision core allows one: just before the write that starts the
   * apply, the executor asks whether the branch's inbox took a write after `mark` (the inbox entry
   * the flush had read when it closed the windows: every write up to it is in `commit` or refused)
   * for one of `folders` (the paths of the GitTargets naming the claim). One did: the attempt ends
   * `Stale` with reason `EditedAfterFlush`, nothing started, and the worker flushes and sends again.
   */
  editsAfter: z.object({ mark: z.string().min(1), folders: z.array(z.string()).min(1) }).optional(),
  /**
   * Sent outside the claim's change windows on a one-apply override: the value of the claim's
   * override annotation it uses (and who set it, when known). The executor checks it still holds.
   */
  override: z.object({ changeWindow: z.string().min(1), by: z.string().optional() }).optional(),
  /**
   * When the claim requires approval: the foreign commits since the last applied commit, each
   * with the approvals that let it through. The executor checks they still hold.
   */
  approvals: z
    .array(
      z.object({
        commit: Sha,
        sources: z.array(z.string()),
        by: z.array(z.string()).optional(),
        signedBy: z.string().optional(),
        tag: z.object({ name: z.string(), signedBy: z.string() }).optional(),
      }),
    )
    .optional(),
});
export type Attempt = z.infer<typeof Attempt>;

/** The reason of a Stale report whose attempt found an edit accepted after its flush mark. */

/** Phases of a claim's operation (its `status.operation.phase`). */
export const OPERATION_PHASES = [
  "Requested",
  "Running",
  "Settling",
  "Unresolved",
  "Succeeded",
  "Failed",
  /** Ended because a newer tip superseded its commit (Argo CD: terminated); never reported Succeeded. */
  "Superseded",
] as const;
/** Phases an executor reports: the operation's phases plus the outcomes of an attempt that started nothing. */
export const REPORT_PHASES = [...OPERATION_PHASES, "RequestFailed", "Rejected", "Dropped", "Stale"] as const;
export const ReportPhase = z.enum(REPORT_PHASES);
export type ReportPhase = z.infer<typeof ReportPhase>;
export const TERMINAL_PHASES: readonly ReportPhase[] = [
  "Succeeded",
  "Failed",
  "Superseded",
  "RequestFailed",
  "Rejected",
  "Dropped",
  "Stale",
];

export const PhaseReport = z.object({
  type: z.literal("phase"),
  token: z.string().min(1),
  claim: ClaimRef,
  branchKey: z.string().min(1),
  phase: ReportPhase,
  at: z.string(),
  commit: z.string().optional(),
  /** Machine reason (e.g. DependencyNotReady, OperationUnfollowed). */
  reason: z.string().optional(),
  message: z.string().optional(),
  /** Flux: the Kustomization applied another revision than the one asked for. */
  revisionMismatch: z.boolean().optional(),
  /**
   * Running, waiting for the applier's own retry (Argo CD's sync retry): the attempt that comes
   * next counting the first one, how many there are at most (absent: no limit), and when.
   */
  retry: z
    .object({
      attempt: z.number().int().min(1),
      of: z.number().int().min(1).optional(),
      at: z.string(),
    })
    .optional(),
});
export type PhaseReport = z.infer<typeof PhaseReport>;

/** The window observer saw an applier's own field manager write an object while the apply window was open. */
export const ApplierWriteReport = z.object({
  type: z.literal("applierWrite"),
  token: z.string().min(1),
  claim: ClaimRef,
  branchKey: z.string().min(1),
  object: ObjectRef,
  manager: z.string(),
  /** managedFields time of the applier's entry (RFC 3339, whole seconds). */
  writtenAt: z.string(),
  resourceVersion: z.string(),
  observedAt: z.string(),
});
export type ApplierWriteReport = z.infer<typeof ApplierWriteReport>;

export const Report = z.discriminatedUnion("type", [PhaseReport, ApplierWriteReport]);
export type Report = z.infer<typeof Report>;

/**
 * What a Git clone says of a revision against a newer commit: a proper ancestor of it, not one
 * (the same commit, a descendant, another line), or it cannot tell (a commit it does not hold).
 */
export type Ancestry = "ancestor" | "not-ancestor" | "unknown";

/**
 * The branch worker found operation `token` superseded by `tip` (its commit a proven ancestor of
 * it): kept in Redis (`supersededKey`) and announced on `supersededChannel`, for the sidecar that
 * follows it to end it. The sidecar proves it again, against the tip recorded then, before it does.
 */
export const SupersededNotice = z.object({
  token: z.string().min(1),
  claim: ClaimRef,
  branchKey: z.string().min(1),
  commit: Sha,
  tip: Sha,
  at: z.string(),
});
export type SupersededNotice = z.infer<typeof SupersededNotice>;

/**
 * Field manager applygate writes with; appliers' own managers, for the apply window. A webhook
 * endpoint's are its claim's (`ApplierRef.fieldManagers`), none by default.
 */
export const FIELD_MANAGER = "applygate";
export const APPLIER_FIELD_MANAGERS: Record<ApplierKind, readonly string[]> = {
  flux: ["kustomize-controller"],
  argocd: ["argocd-controller", "argocd-application-controller"],
  webhook: [],
};

/** The applier's own field managers: its kind's, or for a webhook endpoint its claim's. */
export function applierManagersOf(applier: ApplierRef): readonly string[] {
  return applier.kind === "webhook" ? (applier.fieldManagers ?? []) : APPLIER_FIELD_MANAGERS[applier.kind];
}
