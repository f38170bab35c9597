/**
 * The Flux objects the sidecar reads and writes, as far as it reads them: Kustomization
 * (kustomize.toolkit.fluxcd.io/v1) and GitRepository (source.toolkit.fluxcd.io/v1).
 */
import { type KObject, RESOURCES } from "../../queue/kube/index.js";

export const KUSTOMIZATION = RESOURCES.kustomization;
export const GIT_REPOSITORY = RESOURCES.gitRepository;

/** The annotation whose new value makes a Flux controller reconcile; handled into status.lastHandledReconcileAt. */
export const REQUESTED_AT = "reconcile.fluxcd.io/requestedAt";

/** kustomize-controller's field manager for the objects it applies. */
export const KUSTOMIZE_CONTROLLER = "kustomize-controller";

export interface FluxCondition {
  type: string;
  status: "True" | "False" | "Unknown";
  reason?: string;
  message?: string;
  lastTransitionTime?: string;
  observedGeneration?: number;
}

/** One status.history snapshot (kustomize-controller v1.7+), newest first. */
export interface HistoryEntry {
  digest?: string;
  firstReconciled?: string;
  lastReconciled?: string;
  lastReconciledStatus?: string;
  totalReconciliations?: number;
  metadata?: Record<string, string>;
}

export interface ManagedFieldsEntry {
  manager?: string;
  operation?: "Apply" | "Update" | string;
  apiVersion?: string;
  time?: string;
  fieldsType?: string;
  fieldsV1?: Record<string, unknown>;
  subresource?: string;
}

export interface Kustomization extends KObject {
  spec?: {
    suspend?: boolean;
    sourceRef?: { kind?: string; name?: string; namespace?: string };
    path?: string;
    [key: string]: unknown;
  };
  status?: {
    lastHandledReconcileAt?: string;
    lastAppliedRevision?: string;
    lastAttemptedRevision?: string;
    observedGeneration?: number;
    conditions?: FluxCondition[];
    history?: HistoryEntry[];
    inventory?: { entries?: { id: string; v: string }[] };
  };
}

export interface GitRepository extends KObject {
  spec?: {
    url?: string;
    suspend?: boolean;
    ref?: { branch?: string; tag?: string; semver?: string; name?: string; commit?: string };
    [key: string]: unknown;
  };
  status?: {
    lastHandledReconcileAt?: string;
    artifact?: { revision?: string; digest?: string; lastUpdateTime?: string };
    conditions?: FluxCondition[];
  };
}

export interface ObjectKey {
  namespace: string;
  name: string;
}

export const keyOf = (o: ObjectKey) => `${o.namespace}/${o.name}`;

export const requestedAtOf = (o: KObject | undefined): string | undefined =>
  o?.metadata.annotations?.[REQUESTED_AT];

export const readyOf = (o: { status?: { conditions?: FluxCondition[] } } | undefined) =>
  o?.status?.conditions?.find((c) => c.type === "Ready");
