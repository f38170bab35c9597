/**
 * Reading a Kustomization after a resume (pure): whether a token was handled, whether a real
 * reconcile ran since the resume, and what the apply came to, by the outcome table of the Flux
 * applier. A handled token alone proves nothing was applied: a suspended reconcile handles it too.
 */

import { StatusReason } from "../../queue/crds/reasons.js";
import {
  artifactRevisionOf,
  fluxHistoryHeadOf,
  fluxReadyOf,
  fluxStatusField,
  type KObject,
} from "../../queue/kube/index.js";
import { requestedAtOf } from "./resources.js";

/** The commit a Flux revision names: `main@sha1:<hex>`, `sha1:<hex>`, or the legacy `main/<hex>`. */
export function commitOfRevision(revision: string | undefined): string | undefined {
  if (!revision) return undefined;
  const m = /(?:^|@)sha1:([0-9a-f]{40})$/.exec(revision) ?? /\/([0-9a-f]{40})$/.exec(revision);
  return m?.[1];
}

export const revisionHolds = (revision: string | undefined, commit: string) =>
  commitOfRevision(revision) === commit;

/** Whether the source's artifact holds the commit. */
export const artifactHolds = (source: KObject | undefined, commit: string) =>
  revisionHolds(artifactRevisionOf(source), commit);

/**
 * Whether `token` was handled: the controller copied it to status.lastHandledReconcileAt, or a
 * token stamped over it later (flux reconcile, our own suspend) was handled, which proves the
 * reconcile that would have handled ours has ended too (reconciles of one object never overlap).
 */
export function tokenHandled(obj: KObject | undefined, token: string): boolean {
  const handled = fluxStatusField(obj, "lastHandledReconcileAt");
  if (handled === undefined) return false;
  if (handled === token) return true;
  const current = requestedAtOf(obj);
  return current !== undefined && current !== token && handled === current;
}

/**
 * Whether the object carries `token`, as its requestedAt or as the last one it handled: a watch
 * cache's copy that does not is behind the write of it, and judging it would take that write for
 * one not made (or stamped over).
 */
export function showsToken(obj: KObject, token: string): boolean {
  return requestedAtOf(obj) === token || fluxStatusField(obj, "lastHandledReconcileAt") === token;
}

/** What a reconcile moves: the Ready condition and the newest history entry. */
export interface ReconcileMark {
  ready?: ReturnType<typeof fluxReadyOf>;
  history?: ReturnType<typeof fluxHistoryHeadOf>;
}

export function markOf(ks: KObject | undefined): ReconcileMark {
  const r = fluxReadyOf(ks);
  const h = fluxHistoryHeadOf(ks);
  return {
    ...(r
      ? {
          ready: {
            status: r.status,
            reason: r.reason,
            message: r.message,
            lastTransitionTime: r.lastTransitionTime,
          },
        }
      : {}),
    ...(h
      ? {
          history: {
            digest: h.digest,
            lastReconciledStatus: h.lastReconciledStatus,
            totalReconciliations: h.totalReconciliations,
            lastReconciled: h.lastReconciled,
          },
        }
      : {}),
  };
}

const same = (a: object | undefined, b: object | undefined) =>
  JSON.stringify(a ?? null) === JSON.stringify(b ?? null);

/** Whole seconds, as metav1.Time carries them. */
const floorSecond = (iso: string) => Math.floor(Date.parse(iso) / 1000) * 1000;

/**
 * Proof a real reconcile ran since the resume: Ready or the newest history entry moved past the
 * mark read with the resume (a real reconcile marks Ready Unknown first, and records history).
 * Without a mark (restart recovery), a Ready transition or a history entry at or after `at`
 * (whole seconds) counts.
 */
export function reconcileRanSince(ks: KObject, since: { mark?: ReconcileMark; at?: string }): boolean {
  const now = markOf(ks);
  if (since.mark) return !same(now.ready, since.mark.ready) || !same(now.history, since.mark.history);
  if (!since.at) return false;
  const from = floorSecond(since.at);
  const t = (s: string | undefined) => (s ? Date.parse(s) : Number.NEGATIVE_INFINITY);
  return t(now.ready?.lastTransitionTime) >= from || t(now.history?.lastReconciled) >= from;
}

export type Outcome =
  /** The resume's token is not handled yet: keep following. */
  | { state: "Pending" }
  | { state: "Succeeded"; revision: string; revisionMismatch: boolean; message: string }
  | { state: "Failed"; reason: string; message: string };

export interface OutcomeInput {
  /** T1, the token the resume carried. */
  resumeToken: string;
  /** The commit the operation is for. */
  commit: string;
  /** The mark read with the resume, or the time of the resume (recovery). */
  since: { mark?: ReconcileMark; at?: string };
  /** The revision the GitRepository's artifact holds now. */
  sourceRevision?: string;
}

/** The outcome table, read once T1 is handled and no reconcile runs. */
export function readOutcome(ks: KObject, input: OutcomeInput): Outcome {
  if (!tokenHandled(ks, input.resumeToken)) return { state: "Pending" };
  // A reconcile runs now (Ready goes Unknown at its start). Resumed, the Kustomization reconciles
  // on its interval and each reconcile handles T1 again, so this one's end is the outcome: a
  // follower that missed the first one's end (a sidecar restarted meanwhile) reads the next running.
  if (fluxReadyOf(ks)?.status === "Unknown") return { state: "Pending" };
  if (!reconcileRanSince(ks, input.since)) {
    return {
      state: "Failed",
      reason: StatusReason.NotReconciled,
      message: "the resume's token was handled without a reconcile (suspended again before it ran)",
    };
  }
  const ready = fluxReadyOf(ks);
  const applied = fluxStatusField(ks, "lastAppliedRevision");
  if (ready?.status === "True") {
    if (revisionHolds(applied, input.commit)) {
      return {
        state: "Succeeded",
        revision: applied!,
        revisionMismatch: false,
        message: `applied ${applied}`,
      };
    }
    if (applied && applied === input.sourceRevision) {
      return {
        state: "Succeeded",
        revision: applied,
        revisionMismatch: true,
        message: `applied ${applied}, which the source fetched after ${input.commit}`,
      };
    }
    return {
      state: "Failed",
      reason: StatusReason.RevisionNotApplied,
      message: `Ready, but the applied revision is ${applied ?? "none"}, not ${input.commit} (the controller's source lagged)`,
    };
  }
  if (ready?.status === "False") {
    const reason = ready.reason || StatusReason.ReconciliationFailed;
    return { state: "Failed", reason, message: ready.message ?? reason };
  }
  return {
    state: "Failed",
    reason: StatusReason.NotReady,
    message: "the reconcile ended with no Ready condition",
  };
}
