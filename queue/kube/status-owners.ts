/**
 * Who writes which status field of our kinds. Each field has one writing party; every status
 * write goes through `statusWriter` (or `ownedStatus`, for a caller that patches with the raw
 * client), which takes only the party's own fields: the compiler refuses another party's field in
 * a patch written out, and a patch assembled at run time is checked field by field. Each party
 * writes under a field manager of its own, so the object's managedFields say who wrote what.
 * docs/design/cluster-access.md has the reasons.
 */
import type { Kube, PatchOptions } from "./client.js";
import type { KObject, ResourceType } from "./resources.js";

export const STATUS_OWNERS = {
  /** FluxClaim and ArgoCDClaim. */
  claim: {
    /** The claim reconciler and the kind's claim controller (hold, hand back, Argo CD's record). */
    "claim-controller": ["conditions", "observedGeneration", "previousSuspendState"],
    /** sidecar/operation-record.ts: the executors, the reconciler's unfollowed rule, Flux's external resume. */
    "operation-record": ["operation", "lastAppliedCommit"],
    /** The branch worker's decisions (queue/apply). */
    "branch-worker": ["repairPending"],
  },
  gitTarget: {
    /** The branch worker (queue/worker/status.ts). */
    "branch-worker": ["conditions", "observedGeneration", "publication"],
  },
  gitProvider: {
    /** The gateway (gateway/provider-status.ts). */
    gateway: ["conditions", "observedGeneration", "webhookPath"],
  },
} as const;

type Owners = typeof STATUS_OWNERS;
export type StatusObject = keyof Owners;
export type StatusParty<O extends StatusObject> = keyof Owners[O] & string;
export type OwnedField<
  O extends StatusObject,
  P extends StatusParty<O>,
> = Owners[O][P] extends readonly (infer F)[] ? F & string : never;
/** A status patch holding only fields `party` owns (null removes a field, as in a merge patch). */
export type OwnedStatus<O extends StatusObject, P extends StatusParty<O>> = {
  [K in OwnedField<O, P>]?: unknown;
};

/** The field manager a party writes status under. */
export function statusFieldManager(party: string): string {
  return `applygate-${party}`;
}

/** A status write touched a field its party does not own: a defect, never retried. */
export class StatusFieldNotOwned extends Error {
  override name = "StatusFieldNotOwned";
}

/** The fields of `object`'s status `party` owns. */
export function ownedFields<O extends StatusObject>(object: O, party: StatusParty<O>): readonly string[] {
  return (STATUS_OWNERS[object] as Record<string, readonly string[]>)[party] ?? [];
}

/** The party owning `field` of `object`'s status, if any. */
export function ownerOf(object: StatusObject, field: string): string | undefined {
  const parties = STATUS_OWNERS[object] as Record<string, readonly string[]>;
  return Object.keys(parties).find((p) => parties[p]?.includes(field));
}

/** `status` itself once every field in it is `party`'s; throws StatusFieldNotOwned otherwise. */
export function ownedStatus<O extends StatusObject, P extends StatusParty<O>>(
  object: O,
  party: P,
  status: OwnedStatus<O, P>,
): Record<string, unknown> {
  const own = ownedFields(object, party);
  for (const field of Object.keys(status)) {
    if (own.includes(field)) continue;
    const owner = ownerOf(object, field);
    throw new StatusFieldNotOwned(
      `${party} may not write status.${field} of a ${object}${owner ? ` (${owner} writes it)` : " (no party writes it)"}`,
    );
  }
  return status as Record<string, unknown>;
}

export interface StatusWriter<O extends StatusObject, P extends StatusParty<O>> {
  readonly party: P;
  readonly fieldManager: string;
  /** Merge patch of the status subresource with the party's own fields, guarded by the resourceVersion read. */
  patch<T = KObject>(
    t: ResourceType,
    namespace: string,
    name: string,
    status: OwnedStatus<O, P>,
    resourceVersion: string | undefined,
  ): Promise<T>;
}

/** The one way a party writes status through `Kube`. */
export function statusWriter<O extends StatusObject, P extends StatusParty<O>>(
  kube: Kube,
  object: O,
  party: P,
): StatusWriter<O, P> {
  const fieldManager = statusFieldManager(party);
  return {
    party,
    fieldManager,
    patch<T = KObject>(
      t: ResourceType,
      namespace: string,
      name: string,
      status: OwnedStatus<O, P>,
      resourceVersion: string | undefined,
    ): Promise<T> {
      const opts: PatchOptions = { status: true, resourceVersion, fieldManager };
      return kube.mergePatch<T>(t, namespace, name, { status: ownedStatus(object, party, status) }, opts);
    },
  };
}
