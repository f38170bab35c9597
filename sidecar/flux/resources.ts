/**
 * The Flux objects the sidecar reads and writes: Kustomization (kustomize.toolkit.fluxcd.io/v1)
 * and GitRepository (source.toolkit.fluxcd.io/v1). They are `KObject`s, their fields read through
 * the readers of queue/kube/readers.ts (`kustomizationSourceOf`, `fluxSpecField`, `fluxReadyOf`…).
 */
import { type KObject, RESOURCES } from "../../queue/kube/index.js";

export const KUSTOMIZATION = RESOURCES.kustomization;
export const GIT_REPOSITORY = RESOURCES.gitRepository;

/** The annotation whose new value makes a Flux controller reconcile; handled into status.lastHandledReconcileAt. */
export const REQUESTED_AT = "reconcile.fluxcd.io/requestedAt";

/** kustomize-controller's field manager for the objects it applies. */
export const KUSTOMIZE_CONTROLLER = "kustomize-controller";

export interface ObjectKey {
  namespace: string;
  name: string;
}

export const keyOf = (o: ObjectKey) => `${o.namespace}/${o.name}`;

export const requestedAtOf = (o: KObject | undefined): string | undefined =>
  o?.metadata.annotations?.[REQUESTED_AT];
