/**
 * The claim reconciler's writes to a claim: conditions and kind status fields merged onto a fresh
 * read and written only when they change, and the finalizer; each retried on conflict.
 */
import {
  type ClaimType,
  claimStatusField,
  conditionIn,
  isRecord,
  type KObject,
  type Kube,
  retryOnConflict,
  statusWriter,
  storedConditionsOf,
} from "../../queue/kube/index.js";
import type { ClaimMetrics } from "../metrics.js";
import { type ConditionInput, sameConditions, setConditions } from "./conditions.js";

/** Held from before the first write to the applier until it is handed back or over. */
export const CLAIM_FINALIZER = "applygate.dev/claim";

export class ClaimWrites {
  constructor(
    private readonly kube: Kube,
    private readonly type: ClaimType,
    private readonly now: () => Date,
    private readonly metrics?: ClaimMetrics,
  ) {}

  async addFinalizer(claim: KObject): Promise<KObject> {
    const t = this.type;
    const out = await retryOnConflict(
      () => this.kube.get<KObject>(t, claim.metadata.namespace ?? "", claim.metadata.name),
      (c) => (c && !(c.metadata.finalizers ?? []).includes(CLAIM_FINALIZER) ? c : undefined),
      (_c, c) => this.kube.setFinalizer<KObject>(t, c, CLAIM_FINALIZER, true),
    );
    return (
      out ?? (await this.kube.get<KObject>(t, claim.metadata.namespace ?? "", claim.metadata.name)) ?? claim
    );
  }

  async dropFinalizer(claim: KObject): Promise<void> {
    const t = this.type;
    await retryOnConflict(
      () => this.kube.get<KObject>(t, claim.metadata.namespace ?? "", claim.metadata.name),
      (c) => (c && (c.metadata.finalizers ?? []).includes(CLAIM_FINALIZER) ? c : undefined),
      (_c, c) => this.kube.setFinalizer<KObject>(t, c, CLAIM_FINALIZER, false),
    );
  }

  /**
   * Merges conditions (and kind status fields) onto the claim; writes only a change. `claim` is
   * the claim as this pass just read it from the API server: the first try decides on it instead
   * of reading again (the write is guarded by its resourceVersion, so a claim changed since is a
   * 409 that reads again, and a change made since is queued as a pass of its own).
   */
  async status(
    claim: KObject,
    inputs: ConditionInput[],
    fields: Record<string, unknown> = {},
  ): Promise<void> {
    const t = this.type;
    let first: KObject | undefined = claim;
    // Later inputs of one type win (e.g. Waiting overrides eligibility's Configured).
    const byType = new Map<string, ConditionInput>();
    for (const c of inputs) byType.set(c.type, c);
    let ready: { status: string | undefined } | undefined;
    await retryOnConflict(
      async () => {
        const given = first;
        first = undefined;
        return (
          given ?? (await this.kube.get<KObject>(t, claim.metadata.namespace ?? "", claim.metadata.name))
        );
      },
      (current) => {
        if (!current) return undefined;
        const status = isRecord(current.status) ? current.status : {};
        const conditions = storedConditionsOf(current);
        const next = setConditions(conditions, [...byType.values()], this.now());
        ready = { status: conditionIn(next, "Ready")?.status };
        const changedFields = Object.entries(fields).filter(
          ([k, v]) => JSON.stringify(status[k]) !== JSON.stringify(v),
        );
        const generation = current.metadata.generation;
        const genChanged =
          generation !== undefined && claimStatusField(current, "observedGeneration") !== generation;
        if (sameConditions(conditions, next) && changedFields.length === 0 && !genChanged) return undefined;
        return {
          conditions: next,
          ...Object.fromEntries(changedFields),
          ...(generation !== undefined ? { observedGeneration: generation } : {}),
        };
      },
      (current, patch) =>
        statusWriter(this.kube, "claim", "claim-controller").patch(
          t,
          current!.metadata.namespace ?? "",
          current!.metadata.name,
          patch,
          current!.metadata.resourceVersion,
        ),
    );
    if (ready) {
      const identity = { namespace: claim.metadata.namespace ?? "", name: claim.metadata.name };
      this.metrics?.claimReady({ kind: t.kind, ...identity }, ready.status);
    }
  }
}
