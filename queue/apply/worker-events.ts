/**
 * What the branch worker tells the decisions, as decision events: the hooks a decision driver
 * gives its branch worker. A hook only queues: an event naming a GitTarget is built when its turn
 * comes, so its uid is resolved against the listing loaded by then (the restore's first, for
 * events the worker reports before it lands), and a new owner judges a write naming its GitTarget
 * by namespace and name only exactly as the first owner did.
 */
import type { PhaseReport } from "../contract.js";
import { StatusReason } from "../crds/reasons.js";
import type { DecisionEvent, EditedObject } from "../decide/index.js";
import { claimField, type Logger } from "../log.js";
import type { BranchHooks, WriteDecided } from "../worker/branch-worker.js";

/** Where the hooks put what they are told: the driver's queue of events. */
export interface EventSink {
  /** Queues an event (built when its turn comes); `saved` once the state after it is saved. */
  feed(event: DecisionEvent | (() => DecisionEvent), saved?: () => void): void;
  /** The uid of a GitTarget named by namespace and name, as the listing knows it. */
  uidOf(t: { namespace: string; name: string; uid?: string | undefined }): string;
  /** A write the decisions need not judge goes on to its commit window. */
  mirror(writeId: string): void;
  /** The state after an entry's event is saved: the entry may leave the inbox. */
  saved(entryId: string): void;
  /**
   * Holds a report until the observation it asks for (the tip as it is then); false when there
   * is no worker to look.
   */
  holdForObservation(r: PhaseReport): boolean;
  /** Reports held for an observation are fed now. */
  releaseHeld(): void;
  /** An operation's report arrived (its commit status is posted when the claim asks for one). */
  reported(r: PhaseReport): void;
  log: Logger;
}

/** When a write reached the inbox (its `acceptedAt`), as the decisions judge it; nothing when unreadable. */
const arrivalOf = (acceptedAt: string): { arrivedAt?: number } => {
  const arrivedAt = Date.parse(acceptedAt);
  return Number.isFinite(arrivedAt) ? { arrivedAt } : {};
};

/** A write's edited objects as the decisions take them: its acceptance as its arrival. */
const asEdited = (edited: WriteDecided["editedObjects"]): EditedObject[] =>
  edited.map(({ ref, editedAt, acceptedAt }) => ({ ref, editedAt, ...arrivalOf(acceptedAt) }));

export function decisionHooks(d: EventSink): BranchHooks {
  return {
    onObserved: (o) => {
      d.feed(() => ({
        type: "Observed",
        tip: o.tip ?? null,
        pushedByUs: o.pushedByUs,
        folders: (o.folders ?? []).map((t) => d.uidOf(t)),
      }));
      d.releaseHeld();
    },
    onWriteDecided: (w) => {
      d.feed(() => ({
        type: "WriteDecided",
        entryId: w.entryId,
        targetUid: d.uidOf(w.target),
        createdObjects: w.createdObjects,
        editedObjects: asEdited(w.editedObjects),
      }));
    },
    onWriteGathered: (w) => {
      d.feed(() => ({
        type: "WriteGathered",
        targetUid: d.uidOf(w.target),
        editedObjects: asEdited(w.editedObjects),
      }));
    },
    onPublished: (p) => {
      d.feed(() => ({
        type: "Published",
        upToMark: p.entryIds.at(-1) ?? null,
        tip: p.tip,
        folders: (p.folders ?? []).map((t) => d.uidOf(t)),
      }));
    },
    onWatchedApplierWrite: (w) => {
      const change = w.changes[0];
      const a = w.applierAuthored;
      if (!a || change?.op !== "upsert") return d.mirror(w.id);
      const m = change.object.metadata;
      d.feed(() => ({
        type: "WatchedApplierWrite",
        writeId: w.id,
        targetUid: d.uidOf(w.target),
        ref: {
          apiVersion: change.object.apiVersion,
          kind: change.object.kind,
          name: m.name,
          ...(m.namespace ? { namespace: m.namespace } : {}),
        },
        manager: a.manager,
        writtenAt: a.writtenAt,
        ...arrivalOf(w.acceptedAt),
      }));
    },
    onSnapshotWrite: (w) => {
      if (!w.snapshot) return d.mirror(w.id);
      const snapshot = w.snapshot;
      d.feed(() => ({
        type: "SnapshotWrite",
        writeId: w.id,
        targetUid: d.uidOf(w.target),
        snapshot,
      }));
    },
    onInitialSnapshotsStarted: (p) => {
      d.feed(() => ({ type: "InitialSnapshotsStarted", targetUid: d.uidOf(p.target), token: p.token }));
    },
    onInitialSnapshotsPublished: (p) => {
      // The marker's entry leaves the inbox only once the mark is saved: a stop before then
      // (which drops the events still queued) leaves it for the next owner to read again.
      d.feed(
        () => ({ type: "InitialSnapshotsPublished", targetUid: d.uidOf(p.target), token: p.token }),
        () => d.saved(p.entryId),
      );
    },
    onRefusal: (n, entryId) => {
      // As a marker: a refusal dropped by a stop before its save is read again by the next owner.
      d.feed(
        () => ({ type: "RefusalReceived", targetUid: d.uidOf(n.target) }),
        entryId === undefined ? undefined : () => d.saved(entryId),
      );
    },
    savesEntries: true,
    onReport: (r) => {
      if (r.type === "applierWrite") {
        d.log.debug(
          {
            object: r.object,
            claim: r.claim,
            token: r.token,
            manager: r.manager,
            writtenAt: r.writtenAt,
            resourceVersion: r.resourceVersion,
          },
          "applier write observed",
        );
        return d.feed({ type: "ApplierWrite", report: r });
      }
      // A stale attempt is decided again at once, at the tip as it is then: look at the remote
      // first, as a push notice would, so the retry is not for the tip that was already stale.
      // One stale for an edit after its flush mark needs no look: the remote did not move, and
      // the flush it is answered with reads the inbox and publishes the edit.
      const editedAfterFlush = r.phase === "Stale" && r.reason === StatusReason.EditedAfterFlush;
      if (
        (r.phase === "Stale" || r.revisionMismatch === true) &&
        !editedAfterFlush &&
        d.holdForObservation(r)
      )
        return;
      d.log.debug(
        { claim: claimField(r.claim), token: r.token, phase: r.phase, commit: r.commit },
        "operation report received",
      );
      d.reported(r);
      d.feed({ type: "Report", report: r });
    },
  };
}
