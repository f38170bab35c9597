/**
 * What a branch worker says about publication, and where it says it. The report is the branch's
 * state; each GitTarget on the branch shows it as `status.publication` plus the conditions Ready,
 * Reconciling and Stalled. A sink is an interface so the worker's loop needs no Kubernetes.
 */
import type { Publication } from "../crds/index.js";
import { StatusReason } from "../crds/reasons.js";

export interface PublicationReport {
  branchKey: string;
  state: "Published" | "Retrying";
  commit?: string;
  publishedAt?: number;
  retryingSince?: number;
  lastError?: string;
  /** Why it retries, when the GitTargets should say more than PublicationRetrying (BaseBranchMissing). */
  retryReason?: string;
  nextRetryAt?: number;
  intakePaused: boolean;
  retainedWrites: number;
  retainedBytes: number;
}

export interface TargetRef {
  namespace: string;
  name: string;
}

/** A write the worker settled as refused: it will never be committed. */
export interface WriteRefusal {
  writeId: string;
  /** CamelCase rule: Unstorable, ForeignNamespace, ClusterScoped, PrivilegedKind, KindNotAllowed, UnknownTarget, CommitFailed. */
  reason: string;
  message: string;
  /** The first object the write named, `ConfigMap web/a`. */
  object?: string;
  at: number;
}

export interface StatusSink {
  /** Writes the report on every GitTarget of the branch; resolves when written (or given up, logged). */
  report(targets: TargetRef[], report: PublicationReport): Promise<void>;
  /**
   * Records a refused write on its GitTarget (condition WriteRefused True, and an Event), or,
   * with `undefined`, that a later write of the target published (WriteRefused False).
   */
  refused?(target: TargetRef, refusal: WriteRefusal | undefined): Promise<void>;
}

/** The GitTarget condition a refused write sets, and a later publication clears. */
export function refusalCondition(
  refusal: WriteRefusal | undefined,
  previous: Condition[] | undefined,
  now: number,
  generation?: number,
): Condition {
  const wanted: Omit<Condition, "lastTransitionTime"> = refusal
    ? {
        type: "WriteRefused",
        status: "True",
        reason: refusal.reason,
        message: `write ${refusal.writeId} refused at ${new Date(refusal.at).toISOString()}: ${refusal.message}`,
      }
    : {
        type: "WriteRefused",
        status: "False",
        reason: StatusReason.Published,
        message: "a later write published",
      };
  // Each refusal is news: its time moves even when the condition was already True.
  return stamped(wanted, refusal ? undefined : previous, now, generation);
}

/**
 * A condition as it is written: it keeps the previous lastTransitionTime while its status does
 * not change, and carries the generation it was written for.
 */
function stamped(
  wanted: Omit<Condition, "lastTransitionTime">,
  previous: Condition[] | undefined,
  now: number,
  generation: number | undefined,
): Condition {
  const prev = previous?.find((p) => p.type === wanted.type);
  const lastTransitionTime =
    prev && prev.status === wanted.status ? prev.lastTransitionTime : new Date(now).toISOString();
  return {
    ...wanted,
    lastTransitionTime,
    ...(generation !== undefined ? { observedGeneration: generation } : {}),
  };
}

/** Why the worker could not read a GitProvider's credentials Secret. */
export interface CredentialsProblem {
  reason:
    | typeof StatusReason.SecretForbidden
    | typeof StatusReason.SecretNotFound
    | typeof StatusReason.SecretUnreadable
    | typeof StatusReason.InsecureTransport;
  message: string;
}

/** `CredentialsAvailable`: whether the worker can read the credentials its GitProvider names. */
export function credentialsCondition(
  problem: CredentialsProblem | undefined,
  previous: Condition[] | undefined,
  now: number,
  generation?: number,
): Condition {
  const wanted: Omit<Condition, "lastTransitionTime"> = problem
    ? { type: "CredentialsAvailable", status: "False", ...problem }
    : {
        type: "CredentialsAvailable",
        status: "True",
        reason: StatusReason.SecretRead,
        message: "credentials read",
      };
  return stamped(wanted, previous, now, generation);
}

/** Why the worker refuses a GitTarget altogether (its GitProvider does not admit its namespace). */
export interface AcceptanceProblem {
  reason: string;
  message: string;
}

/**
 * `Accepted`, and while refused `Ready` too: whether the worker takes the GitTarget at all. A
 * refused GitTarget takes no writes, holds no applier and gets no publication status.
 */
export function acceptanceConditions(
  problem: AcceptanceProblem | undefined,
  previous: Condition[] | undefined,
  now: number,
  generation?: number,
): Condition[] {
  const wanted: Array<Omit<Condition, "lastTransitionTime">> = problem
    ? [
        { type: "Accepted", status: "False", ...problem },
        { type: "Ready", status: "False", ...problem },
      ]
    : [
        {
          type: "Accepted",
          status: "True",
          reason: StatusReason.Accepted,
          message: "the GitProvider admits this namespace",
        },
      ];
  return wanted.map((c) => stamped(c, previous, now, generation));
}

/**
 * Whether a GitTarget's conditions already say what `problem` says, so nothing is written: refused
 * with this reason and message, or not refused (Accepted True, or never refused at all).
 */
export function acceptanceShown(
  problem: AcceptanceProblem | undefined,
  previous: Condition[] | undefined,
): boolean {
  const accepted = previous?.find((c) => c.type === "Accepted");
  if (!problem) return accepted === undefined || accepted.status === "True";
  const ready = previous?.find((c) => c.type === "Ready");
  return (
    accepted?.status === "False" &&
    accepted.reason === problem.reason &&
    accepted.message === problem.message &&
    ready?.status === "False" &&
    ready.reason === problem.reason
  );
}

export interface Condition {
  type: "Ready" | "Reconciling" | "Stalled" | "WriteRefused" | "CredentialsAvailable" | "Accepted";
  status: "True" | "False" | "Unknown";
  reason: string;
  message: string;
  lastTransitionTime: string;
  observedGeneration?: number;
}

const iso = (ms: number | undefined) => (ms === undefined ? undefined : new Date(ms).toISOString());

export function publicationStatus(r: PublicationReport): Publication {
  const p: Publication = { state: r.state, intakePaused: r.intakePaused };
  if (r.commit) p.commit = r.commit;
  if (r.publishedAt !== undefined) p.publishedAt = iso(r.publishedAt) as string;
  if (r.retryingSince !== undefined) p.retryingSince = iso(r.retryingSince) as string;
  if (r.lastError) p.lastError = r.lastError;
  if (r.nextRetryAt !== undefined) p.nextRetryAt = iso(r.nextRetryAt) as string;
  p.retainedWrites = r.retainedWrites;
  p.retainedBytes = r.retainedBytes;
  return p;
}

/**
 * The three conditions for a report. A retrying branch is Reconciling (it will publish once Git
 * answers), Stalled only when intake is paused, since then edits are being refused. A condition
 * keeps its lastTransitionTime while its status does not change.
 */
export function publicationConditions(
  r: PublicationReport,
  previous: Condition[] | undefined,
  now: number,
  generation?: number,
): Condition[] {
  const since = r.retryingSince !== undefined ? iso(r.retryingSince) : undefined;
  const retryMsg = `publication retrying since ${since}: ${r.lastError ?? "unknown cause"}; next attempt ${iso(r.nextRetryAt)}`;
  const wanted: Array<Omit<Condition, "lastTransitionTime">> =
    r.state === "Published"
      ? [
          {
            type: "Ready",
            status: "True",
            reason: StatusReason.Published,
            message: r.commit ? `published up to ${r.commit}` : "nothing to publish",
          },
          { type: "Reconciling", status: "False", reason: StatusReason.Published, message: "" },
          { type: "Stalled", status: "False", reason: StatusReason.Published, message: "" },
        ]
      : [
          {
            type: "Ready",
            status: "False",
            reason: r.retryReason ?? StatusReason.PublicationRetrying,
            message: retryMsg,
          },
          {
            type: "Reconciling",
            status: "True",
            reason: r.retryReason ?? StatusReason.PublicationRetrying,
            message: retryMsg,
          },
          r.intakePaused
            ? {
                type: "Stalled",
                status: "True",
                reason: StatusReason.IntakePaused,
                message: `${retryMsg}; new writes are refused until the ${r.retainedWrites} retained writes (${r.retainedBytes} bytes) are published`,
              }
            : { type: "Stalled", status: "False", reason: StatusReason.PublicationRetrying, message: "" },
        ];
  return wanted.map((c) => stamped(c, previous, now, generation));
}

/** Keeps the last report per GitTarget in memory (tests, and running without a cluster). */
export class MemoryStatusSink implements StatusSink {
  readonly byTarget = new Map<string, PublicationReport>();
  readonly history: PublicationReport[] = [];
  /** Refusals recorded per GitTarget, in order (undefined: cleared by a later publication). */
  readonly refusals = new Map<string, Array<WriteRefusal | undefined>>();
  async refused(target: TargetRef, refusal: WriteRefusal | undefined): Promise<void> {
    const key = `${target.namespace}/${target.name}`;
    this.refusals.set(key, [...(this.refusals.get(key) ?? []), refusal]);
  }
  async report(targets: TargetRef[], report: PublicationReport): Promise<void> {
    this.history.push(report);
    for (const t of targets) this.byTarget.set(`${t.namespace}/${t.name}`, report);
  }
}
