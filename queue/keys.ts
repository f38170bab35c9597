export const branchKeys = (prefix: string, branchKey: string) => {
  const base = `${prefix}:branch:${branchKey}`;
  return {
    /** Stream of everything a branch worker must handle, in arrival order: fields `kind` and `data` (JSON). */
    inbox: `${base}:inbox`,
    /** Hash the worker keeps: `paused` ("1" while intake is paused), `retryAfter` (seconds). */
    intake: `${base}:intake`,
    /** Ownership lease and fencing number of the branch. */
    lease: `${base}:lease`,
    fence: `${base}:fence`,
    /**
     * Set (with a short TTL) by a replica that handed the branch over while balancing: its id. While
     * it lives and the lease is free, that replica does not take the branch back and a replica at
     * or over its share leaves it to one under its share.
     */
    handoff: `${base}:handoff`,
    /** The decision core's state (JSON), written only while the lease is held. */
    decisions: `${base}:decisions`,
    /**
     * The remote tip the owner last observed or published (a commit SHA), written only while the
     * lease is held; absent until the first observation and while the branch is empty. The
     * sidecars read it to tell whether an attempt's commit is still the tip.
     */
    tip: `${base}:tip`,
    /**
     * The decisions' apply state, JSON `{epoch, gitAhead}`: the apply epoch (raised at every send of
     * an attempt and every end of one) and whether Git is ahead of the cluster. Written with the
     * decision state, before the actions of the step that changed it are carried out, only while
     * the lease is held. The watch plane reads it when a snapshot's collection starts.
     */
    applyState: `${base}:apply-state`,
  };
};

/** Kinds of inbox entries. */
export type InboxKind = "write" | "push" | "refusal" | "report";

/** Set of every branch key that has ever had work, so a worker can sweep them after a restart. */
export const knownBranchesKey = (prefix: string) => `${prefix}:branches`;

/**
 * Worker replicas alive: a sorted set of replica ids scored by when their heartbeat lapses (Redis
 * time, ms), and per replica a heartbeat key with that TTL holding `{owned, at}` (JSON).
 */
export const replicasKey = (prefix: string) => `${prefix}:replicas`;
export const replicaKey = (prefix: string, replicaId: string) => `${prefix}:replica:${replicaId}`;

/** BullMQ job options for a branch signal: at most one active and one waiting job per branch. */
export const branchSignalOptions = (branchKey: string) => ({
  deduplication: { id: branchKey, keepLastIfActive: true },
  removeOnComplete: { count: 1000 },
  removeOnFail: { count: 1000 },
});

/**
 * Publication of an accepted write, recorded by the worker once the push carrying it has landed:
 * a string holding the commit SHA (TTL `PUBLISHED_TTL_SECONDS`), and a pub/sub message
 * `{id, commit}` on `publishedChannel`, so an intake call with `wait=published` can answer.
 */
export const writePublishedKey = (prefix: string, writeId: string) => `${prefix}:write:${writeId}:published`;
export const publishedChannel = (prefix: string) => `${prefix}:published`;
export const PUBLISHED_TTL_SECONDS = 3600;
/**
 * A refused write's published key holds this prefix and the reason instead of a commit, so a
 * later owner skips it and a waiting intake call learns the outcome.
 */
export const REFUSED_PREFIX = "refused: ";

/**
 * An operation a branch worker found superseded (`SupersededNotice`, JSON, TTL
 * `SUPERSEDED_TTL_SECONDS`), and the pub/sub channel announcing each one: the sidecar following the
 * operation wakes on the message, and one that starts following it later reads the key.
 */
export const supersededKey = (prefix: string, token: string) => `${prefix}:operation:${token}:superseded`;
export const supersededChannel = (prefix: string) => `${prefix}:operation:superseded`;
export const SUPERSEDED_TTL_SECONDS = 24 * 3600;

/**
 * Pub/sub channel on which a branch worker asks the watch plane to collect a GitTarget again
 * (`{branchKey, namespace, name}`): its snapshots were discarded while Git was ahead, and Git no
 * longer is (or the 5-minute bound passed).
 */
export const recollectChannel = (prefix: string) => `${prefix}:mirror:recollect`;

/**
 * A GitTarget the watch plane covers: the mirror's coverage token (`<instance>:<round>`, a new
 * round whenever it starts initial snapshots for the GitTarget), kept with a TTL the mirror
 * refreshes while it lives (`WATCHED_TTL_MS`). Present: the GitTarget is past the initial-snapshot
 * barrier only once the mirror's `initialSnapshotsDone` of that token is published. Absent (no
 * WatchRule, no mirror deployed, or one down longer than the TTL): the folder barrier alone.
 */
export const watchedTargetKey = (prefix: string, branchKey: string, namespace: string, name: string) =>
  `${prefix}:branch:${branchKey}:watched:${namespace}/${name}`;
export const WATCHED_TTL_MS = 30_000;

/**
 * Set (NX, with a TTL) by the executor that takes an apply attempt's job: an attempt runs once. A
 * job run a second time (retried from a writable dashboard or by hand) finds it and is refused:
 * every retry is the branch worker's decision, as a new attempt with a new token.
 */
export const attemptTakenKey = (prefix: string, token: string) => `${prefix}:attempt:${token}:taken`;
export const ATTEMPT_TAKEN_TTL_SECONDS = 30 * 24 * 3600;
