/** Which watch events queue a reconcile: the predicates the Flux controllers register (pure). */
import { isTrue, READY } from "./conditions.js";
import type { Obj } from "./watcher.js";

export const REQUESTED_AT = "reconcile.fluxcd.io/requestedAt";

export const requestedAt = (o: Obj | undefined): string | undefined =>
  o?.metadata?.annotations?.[REQUESTED_AT];

/**
 * GenerationChangedPredicate or ReconcileRequestedPredicate: a create always queues; an update
 * queues when the generation moved or the requestedAt token changed or first appeared.
 */
export function queuesOwnReconcile(
  type: "add" | "update" | "delete",
  obj: Obj,
  old: Obj | undefined,
): boolean {
  if (type === "delete") return false;
  if (type === "add" || !old) return true;
  if (obj.metadata?.generation !== old.metadata?.generation) return true;
  const token = requestedAt(obj);
  return token !== undefined && token !== requestedAt(old);
}

export const artifactRevision = (src: Obj | undefined): string | undefined => src?.status?.artifact?.revision;

/** SourceRevisionChangePredicate: only an update that brings an artifact or a new revision. */
export function sourceRevisionChanged(
  type: "add" | "update" | "delete",
  src: Obj,
  old: Obj | undefined,
): boolean {
  if (type !== "update" || !old) return false;
  const rev = artifactRevision(src);
  return rev !== undefined && rev !== artifactRevision(old);
}

/** Whether a Kustomization reads this source (sourceRef namespace defaults to its own). */
export function readsSource(ks: Obj, src: Obj): boolean {
  const ref = ks.spec?.sourceRef;
  if (!ref || ref.kind !== src.kind || ref.name !== src.metadata?.name) return false;
  return (ref.namespace ?? ks.metadata?.namespace) === src.metadata?.namespace;
}

/**
 * The Kustomizations a new artifact queues: every reader of the source except those Ready that
 * already attempted that revision (kustomize-controller's requestsForRevisionChangeOf).
 */
export function dependentsOf(src: Obj, kustomizations: Obj[]): Obj[] {
  const rev = artifactRevision(src);
  return kustomizations.filter(
    (ks) =>
      readsSource(ks, src) &&
      !(isTrue(ks.status?.conditions, READY) && ks.status?.lastAttemptedRevision === rev),
  );
}
