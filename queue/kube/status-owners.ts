/**
 * Who writes which status field of our kinds. Each field has one writing party; every status
 * write goes through `statusWriter` (or `ownedStatus`, for a caller that patches with the raw
 * client), which takes only the party's own fields: the compiler refuses another party's field in
 * a patch written out, and a patch assembled at run time is checked field by field. Each party
 * writes under a field manager of its own, so the object's managedFields say who wrote what.
 * docs/design/cluster-access.md has the reasons.
 */
import type { Kube, PatchOptions } from "./client.js";
import { isRecord } from "./readers.js";
import type { KObject, ResourceType } from "./resources.js";

export const STATUS_OWNERS = {
  /** FluxClaim, ArgoCDClaim and WebhookClaim. */
  claim: {
    /** The claim reconciler and the kind's claim controller (hold, hand back, Argo CD's record). */
    "claim-controller": ["conditions", "observedGeneration", "previousSuspendState"],
    /** sidecar/operation-record.ts: the executors, the reconciler's unfollowed rule, Flux's external resume. */
    "operation-record": ["operation", "lastAppliedCommit", "history"],
    /** The branch worker's decisions (queue/apply), governance included (queue/apply/governance.ts). */
    "branch-worker": ["repairPending", "governance", "lastHandledReconcileAt"],
  },
  gitTarget: {
    /** The branch worker (queue/worker/status.ts). */
    "branch-worker": ["conditions", "observedGeneration", "publication"],
  },
  gitProvider: {
    /** The gateway (gateway/provider-status.ts). */
    gateway: ["conditions", "observedGeneration", "webhookPath"],
  },
  watchRule: {
    /** The watch plane (sidecar/mirror). */
    mirror: [
      "conditions",
      "observedGeneration",
      "resolvedKinds",
      "unresolvedKinds",
      "forbiddenKinds",
      "outOfScope",
      "mirrored",
      "refused",
      "excluded",
      "lastError",
      "lastErrorAt",
    ],
  },
} as const;

/**
 * Condition types written by a party other than the owner of `conditions`: it writes the list with
 * its own types changed and every other entry exactly as read (a merge patch replaces the list
 * whole), so the check needs the object the patch was made from.
 */
export const CONDITION_TYPE_OWNERS = {
  claim: { "branch-worker": ["ApplyAllowed", "Retrying"] },
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
  [K in OwnedField<O, P> | (P extends ConditionParty<O> ? "conditions" : never)]?: unknown;
};
type ConditionParty<O extends StatusObject> = O extends keyof typeof CONDITION_TYPE_OWNERS
  ? keyof (typeof CONDITION_TYPE_OWNERS)[O] & string
  : never;

/** The condition types `party` writes in `object`'s conditions without owning the list. */
export function ownedConditionTypes(object: StatusObject, party: string): readonly string[] {
  const table = (CONDITION_TYPE_OWNERS as Record<string, Record<string, readonly string[]>>)[object];
  return table?.[party] ?? [];
}

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
  current?: { status?: unknown },
): Record<string, unknown> {
  const own = ownedFields(object, party);
  for (const field of Object.keys(status)) {
    if (own.includes(field)) continue;
    if (
      field === "conditions" &&
      keepsOthersConditions(object, party, (status as Record<string, unknown>).conditions, current)
    )
      continue;
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
  /**
   * Merge patch of the status subresource with the party's own fields, guarded by the
   * resourceVersion read. `current`, the object the patch was made from, is needed when the party
   * writes condition types in a list another party owns (CONDITION_TYPE_OWNERS).
   */
  patch<T = KObject>(
    t: ResourceType,
    namespace: string,
    name: string,
    status: OwnedStatus<O, P>,
    resourceVersion: string | undefined,
    current?: { status?: unknown },
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
      current?: { status?: unknown },
    ): Promise<T> {
      const opts: PatchOptions = { status: true, resourceVersion, fieldManager };
      const owned = ownedStatus(object, party, status, current);
      return kube.mergePatch<T>(t, namespace, name, { status: owned }, opts);
    },
  };
}

type ConditionLike = { type?: unknown };
const conditionList = (v: unknown): ConditionLike[] => (Array.isArray(v) ? (v as ConditionLike[]) : []);

/**
 * Whether a conditions list written by a party owning only some condition types leaves every
 * other type exactly as it was in `current` (same entries, same order).
 */
function keepsOthersConditions(
  object: StatusObject,
  party: string,
  written: unknown,
  current: { status?: unknown } | undefined,
): boolean {
  const mine = ownedConditionTypes(object, party);
  if (mine.length === 0 || current === undefined || !Array.isArray(written)) return false;
  const others = (list: ConditionLike[]) =>
    JSON.stringify(list.filter((c) => !mine.includes(String(c.type))));
  const before = isRecord(current.status) ? current.status.conditions : undefined;
  return others(conditionList(written)) === others(conditionList(before));
}
