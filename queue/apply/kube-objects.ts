/**
 * The catalog's objects read from the Kubernetes API. Claim status is merge-patched through the
 * status subresource with a resourceVersion precondition, under the shared conflict-retry policy
 * (queue/kube/retry.ts): a lost race re-reads and retries, so a conflict with the sidecar's own
 * status writes never wedges the claim.
 */
import type { ClaimRef } from "../contract.js";
import {
  ConflictRetriesExhausted,
  isNotFound,
  type Kube,
  type OwnedStatus,
  type RetryOptions,
  resourceOf,
  retryOnConflict,
  type StatusParty,
  statusWriter,
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

export class KubeObjects implements ObjectSource {
  constructor(
    private readonly kube: Kube,
    private readonly log: Logger,
    private readonly retry: RetryOptions = {},
    /** Shared informers (the worker's ClusterCache): kinds it caches are read from it, not the API. */
    private readonly cache?: CachedKinds,
  ) {}

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
  private read(kind: ResourceKind, namespace: string, name: string): Promise<KObject | undefined> {
    // Undefined for a missing object, or a kind this cluster does not serve (no Argo CD installed).
    return this.kube.get(resourceOf(kind), namespace, name);
  }

  async list(kind: ResourceKind, namespace: string): Promise<KObject[]> {
    const cached = await this.cached(kind);
    if (cached) return cached.list(namespace);
    try {
      return (await this.kube.list(resourceOf(kind), namespace)).items;
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
    const writer = statusWriter(this.kube, "claim", party);
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
          writer.patch(
            resourceOf(kind),
            claim.namespace,
            claim.name,
            status,
            current.metadata.resourceVersion,
            current,
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
