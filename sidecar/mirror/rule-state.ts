/**
 * What the mirror keeps per WatchRule, and the status it writes from it (ruleStatus, pure): Ready and
 * KindsResolved, the kinds resolved, unresolved, forbidden and out of scope, and the counts of
 * mirrored, refused and excluded writes; the write of each status that changed.
 */
import {
  type Condition,
  StatusReason,
  type WatchRule,
  type WatchRuleStatus,
} from "../../queue/crds/index.js";
import { errorMessage } from "../../queue/errors.js";
import { RESOURCES, type StatusWriter } from "../../queue/kube/index.js";
import type { Logger } from "../../queue/log.js";
import { outOfScope, type ResolvedKind } from "./rules.js";
import type { ResolvedTarget } from "./targets.js";
import { stable } from "./translate.js";

export interface RuleState {
  key: string;
  rule: WatchRule;
  /** Served kinds this rule selects whose watch has synced, by kindKey. */
  kinds: Map<string, ResolvedKind>;
  /** Served kinds whose watch has not synced yet (its first list not landed), by kindKey. */
  waiting: Map<string, ResolvedKind>;
  /** Kinds not watched yet: not served, or not listed yet. */
  unresolved: string[];
  /** Kinds the mirror may not watch, with why (its RBAC, or Secrets). */
  forbidden: string[];
  target: ResolvedTarget | undefined;
  targetProblem?: { reason: string; message: string };
  mirrored: number;
  refused: number;
  excluded: number;
  lastError?: { message: string; at: string };
  statusDirty: boolean;
  lastStatus: string;
  /** Whether a sweep skipped for want of an applied commit was logged (once per rule). */
  sweepWithoutApplyLogged?: boolean;
}

/** The WatchRule's status; a condition's lastTransitionTime moves only when its status does. */
export function ruleStatus(st: RuleState, at: string): WatchRuleStatus {
  const cond = (type: string, ok: boolean, reason: string, message: string): Condition => {
    const old = st.rule.status?.conditions?.find((c) => c.type === type);
    const status = ok ? "True" : "False";
    return {
      type,
      status,
      reason,
      message,
      lastTransitionTime: old && old.status === status ? old.lastTransitionTime : at,
      ...(st.rule.metadata.generation !== undefined
        ? { observedGeneration: st.rule.metadata.generation }
        : {}),
    };
  };
  const forbidden = st.forbidden.length > 0;
  const kindsOk = st.unresolved.length === 0 && !forbidden;
  const ready = kindsOk && st.target !== undefined && st.rule.spec.suspend !== true;
  const notWatched = forbidden
    ? `the mirror may not watch: ${st.forbidden.join("; ")}`
    : `not served or not listed yet (retried): ${st.unresolved.join(", ")}`;
  const readyReason =
    st.targetProblem?.reason ??
    (st.rule.spec.suspend
      ? StatusReason.Suspended
      : forbidden
        ? StatusReason.KindForbidden
        : kindsOk
          ? StatusReason.Watching
          : StatusReason.KindsNotResolved);
  const readyMessage =
    st.targetProblem?.message ?? (kindsOk ? `watching ${st.kinds.size} kind(s)` : notWatched);
  const beyond = st.target ? outOfScope(st.rule, st.target.scope, [...st.kinds.values()]) : [];
  return {
    conditions: [
      cond("Ready", ready, readyReason, readyMessage),
      cond(
        "KindsResolved",
        kindsOk,
        kindsOk ? StatusReason.Resolved : forbidden ? StatusReason.KindForbidden : StatusReason.KindNotServed,
        kindsOk ? "" : notWatched,
      ),
    ],
    ...(st.rule.metadata.generation !== undefined ? { observedGeneration: st.rule.metadata.generation } : {}),
    resolvedKinds: [...st.kinds.values()],
    unresolvedKinds: st.unresolved,
    forbiddenKinds: st.forbidden,
    outOfScope: beyond,
    mirrored: st.mirrored,
    refused: st.refused,
    excluded: st.excluded,
    ...(st.lastError ? { lastError: st.lastError.message.slice(0, 4000), lastErrorAt: st.lastError.at } : {}),
  };
}

/** Writes the status of each rule marked dirty whose status changed (times aside); a failure stays dirty. */
export async function writeRuleStatuses(
  rules: Iterable<RuleState>,
  writer: StatusWriter<"watchRule", "mirror">,
  at: string,
  log: Logger,
): Promise<void> {
  for (const st of rules) {
    if (!st.statusDirty) continue;
    const status = ruleStatus(st, at);
    const text = stable({
      ...status,
      conditions: status.conditions?.map(({ lastTransitionTime: _, ...c }) => c),
    });
    st.statusDirty = false;
    if (text === st.lastStatus) continue;
    const ns = st.rule.metadata.namespace ?? "";
    try {
      await writer.patch(RESOURCES.watchRule, ns, st.rule.metadata.name, status, undefined);
      st.lastStatus = text;
    } catch (err) {
      st.statusDirty = true;
      log.warn({ rule: st.key, err: errorMessage(err) }, "could not write the WatchRule's status");
    }
  }
}
