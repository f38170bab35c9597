/**
 * The catalog's objects read from the Kubernetes API. Claim status is merge-patched through the
 * status subresource with a resourceVersion precondition, under the shared conflict-retry policy
 * (queue/kube/retry.ts): a lost race re-reads and retries, so a conflict with the sidecar's own
 * status writes never wedges the claim.
 */
import * as k8s from "@kubernetes/client-node";
import type { ClaimRef } from "../contract.js";
import {
  addressOf,
  ConflictRetriesExhausted,
  isNotFound,
  type OwnedStatus,
  ownedStatus,
  type RetryOptions,
  resourceOf,
  retryOnConflict,
  type StatusParty,
  statusFieldManager,
} from "../kube/index.js";
import type { KObject, ResourceKind } from "../kube/resources.js";
import { claimField, type Logger } from "../log.js";
import type { ObjectSource } from "./catalog.js";

/** What KubeObjects needs of a cache of the kinds it reads (queue/worker/cluster-cache.ts). */
export interface CachedKinds {
  start(): Promise<void>;
  objects(
    kind: string,
  ): { get(name: string, ns: string): KObject | undefined; list(ns: string): KObject[] } | undefined;
  /** A read of a kind not cached that the cache still answers (kept a short while), if it does. */
  readUncached?(kind: string, namespace: string, name: string): Promise<KObject | undefined> | undefined;
}

const MERGE = k8s.setHeaderOptions("Content-Type", k8s.PatchStrategy.MergePatch);

export class KubeObjects implements ObjectSource {
  private readonly custom: k8s.CustomObjectsApi;

  constructor(
    kc: k8s.KubeConfig,
    private readonly log: Logger,
    private readonly retry: RetryOptions = {},
    /** Shared informers (the worker's ClusterCache): kinds it caches are read from it, not the API. */
    private readonly cache?: CachedKinds,
  ) {
    this.custom = kc.makeApiClient(k8s.CustomObjectsApi);
  }

  async get(kind: ResourceKind, namespace: string, name: string): Promise<KObject | undefined> {
    const cached = await this.cached(kind);
    if (cached) return cached.get(name, namespace);
    const kept = this.cache?.readUncached?.(kind, namespace, name);
    if (kept) return kept;
    return this.read(kind, namespace, name);
  }

  private async cached(kind: ResourceKind) {
    if (!this.cache) return undefined;
    await this.cache.start();
    return this.cache.objects(kind);
  }

  /** Always from the API server: a status write computes from the object as it is. */
  private async read(kind: ResourceKind, namespace: string, name: string): Promise<KObject | undefined> {
    try {
      // The API server's answer is an object of the kind: a KObject, its fields read through readers.
      const o: KObject = await this.custom.getNamespacedCustomObject({
        ...addressOf(resourceOf(kind)),
        namespace,
        name,
      });
      return o;
    } catch (err) {
      // A missing object, or a kind this cluster does not serve (no Argo CD installed).
      if (isNotFound(err)) return undefined;
      throw err;
    }
  }

  async list(kind: ResourceKind, namespace: string): Promise<KObject[]> {
    const cached = await this.cached(kind);
    if (cached) return cached.list(namespace);
    try {
      const out: { items?: KObject[] } = await this.custom.listNamespacedCustomObject({
        ...addressOf(resourceOf(kind)),
        namespace,
      });
      return out.items ?? [];
    } catch (err) {
      if (isNotFound(err)) return [];
      throw err;
    }
  }

  /**
   * Patches the claim's status as `party` (the branch worker's repairPending; a test's scripted
   * executor stands in for the operation record), with only that party's fields.
   */
  async patchClaimStatus<P extends StatusParty<"claim"> = "branch-worker">(
    claim: ClaimRef,
    patch: (current: KObject) => OwnedStatus<"claim", P> | undefined,
    party: P = "branch-worker" as P,
  ): Promise<boolean> {
    const kind = claim.kind;
    const ref = { ...addressOf(resourceOf(kind)), namespace: claim.namespace, name: claim.name };
    let found = true;
    try {
      await retryOnConflict(
        () => this.read(kind, claim.namespace, claim.name),
        (current) => {
          found = current !== undefined;
          const status = current && patch(current);
          return status ? { current, status } : undefined;
        },
        (_c, { current, status }) =>
          this.custom.patchNamespacedCustomObjectStatus(
            {
              ...ref,
              body: {
                metadata: { resourceVersion: current.metadata.resourceVersion },
                status: ownedStatus("claim", party, status, current),
              },
              fieldManager: statusFieldManager(party),
            },
            MERGE,
          ),
        { ...this.retry, what: `status of ${kind} ${claim.namespace}/${claim.name}` },
      );
    } catch (err) {
      if (isNotFound(err)) return false;
      if (err instanceof ConflictRetriesExhausted) this.log.warn({ claim: claimField(claim) }, err.message);
      throw err;
    }
    return found;
  }
}
