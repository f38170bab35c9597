/**
 * One claim per applier (pure). Every claim writes under the same field manager, so two holding
 * one applier would take each other's writes for external ones. Of the claims of one kind in line
 * for one applier, exactly one holds it; the others are Configured=False, HeldByAnotherClaim.
 */

import { StatusReason } from "../../queue/crds/reasons.js";
import type { ConditionInput } from "./conditions.js";

export interface RankEntry {
  namespace: string;
  name: string;
  /** namespace/name of the applier object the claim names (Kustomization or Application). */
  applier: string;
  creationTimestamp: string;
  /** An eligible GitTarget names the claim. */
  referenced: boolean;
  /** The claim carries the finalizer: it holds the applier, or is handing it back. */
  hasFinalizer: boolean;
  /** status.operation is recorded and not completed. */
  operationInFlight: boolean;
  /** Being deleted: still in line while it carries the finalizer (it hands back first). */
  deleting?: boolean;
}

export interface RankingRules {
  /** A claim with an operation in flight goes first (default true). */
  inFlightFirst?: boolean;
  /** A claim that carries the finalizer goes before older ones (default true). */
  finalizerFirst?: boolean;
}

export type Standing =
  | { standing: "Holder" }
  | { standing: "Waiting"; holder: string }
  | { standing: "NotInLine" };

export const claimKey = (e: { namespace: string; name: string }) => `${e.namespace}/${e.name}`;

/** In line: an eligible GitTarget names it, or it carries the finalizer. */
export function inLine(e: RankEntry): boolean {
  return e.referenced || e.hasFinalizer;
}

/** Orders claims in line: in-flight operation, then finalizer holder, then oldest, then namespace/name. */
export function compareInLine(a: RankEntry, b: RankEntry, rules: RankingRules = {}): number {
  if (rules.inFlightFirst ?? true) {
    if (a.operationInFlight !== b.operationInFlight) return a.operationInFlight ? -1 : 1;
  }
  if (rules.finalizerFirst ?? true) {
    if (a.hasFinalizer !== b.hasFinalizer) return a.hasFinalizer ? -1 : 1;
  }
  const ta = Date.parse(a.creationTimestamp);
  const tb = Date.parse(b.creationTimestamp);
  if (ta !== tb) return (Number.isNaN(ta) ? Infinity : ta) - (Number.isNaN(tb) ? Infinity : tb);
  return a.namespace.localeCompare(b.namespace) || a.name.localeCompare(b.name);
}

/** Where every claim stands, keyed by namespace/name. */
export function rankClaims(entries: readonly RankEntry[], rules: RankingRules = {}): Map<string, Standing> {
  const out = new Map<string, Standing>();
  const byApplier = new Map<string, RankEntry[]>();
  for (const e of entries) {
    if (!inLine(e)) {
      out.set(claimKey(e), { standing: "NotInLine" });
      continue;
    }
    const list = byApplier.get(e.applier) ?? [];
    list.push(e);
    byApplier.set(e.applier, list);
  }
  for (const list of byApplier.values()) {
    const ordered = [...list].sort((a, b) => compareInLine(a, b, rules));
    const holder = claimKey(ordered[0]!);
    out.set(holder, { standing: "Holder" });
    for (const e of ordered.slice(1)) out.set(claimKey(e), { standing: "Waiting", holder });
  }
  return out;
}

/** The condition a claim waiting in line shows. */
export function waitingCondition(holder: string, generation?: number): ConditionInput {
  return {
    type: "Configured",
    status: "False",
    reason: StatusReason.HeldByAnotherClaim,
    message: `the applier is held by claim ${holder}; this claim waits in line`,
    ...(generation !== undefined ? { observedGeneration: generation } : {}),
  };
}
