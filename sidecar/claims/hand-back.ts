/**
 * Handing a claim's applier back (deleted, no longer referenced, refused) or over to the next
 * claim in line: the kind's hook does the work on every pass until it is done; the release
 * deadline and the one Event of the outcome (Released, HandedOver or ReleaseFailed) are kept here.
 */
import { StatusReason } from "../../queue/crds/reasons.js";
import { errorMessage } from "../../queue/errors.js";
import type { Claim, KObject } from "../../queue/kube/index.js";
import type { ClaimContext, ClaimController, HandBackResult } from "../applier-kind.js";
import type { EventRecorder, EventRegarding } from "../events.js";
import type { Operation } from "../operation-record.js";
import { type ConditionInput, findCondition } from "./conditions.js";

export interface HandBackDeps {
  controller: Pick<ClaimController, "handBack">;
  events: EventRecorder;
  now: () => Date;
  /** A hand-back still unfinished this long after Releasing lets the claim go. */
  releaseTimeoutMs: number;
  regarding(claim: KObject): EventRegarding;
  ctx(extra: Partial<ClaimContext>): ClaimContext;
}

export async function handBack(
  d: HandBackDeps,
  j: { claim: KObject; typed: Claim; applier: { namespace: string; name: string } },
  o: { successor?: string; inFlight?: Operation; branchKey?: string },
): Promise<HandBackResult> {
  const { claim, typed } = j;
  const { successor, inFlight, branchKey } = o;
  const g = typed.metadata.generation !== undefined ? { observedGeneration: typed.metadata.generation } : {};
  const inControl = findCondition(typed.status?.conditions, "InControl");
  const releasingSince =
    inControl?.reason === StatusReason.Releasing && inControl.status === "False"
      ? new Date(inControl.lastTransitionTime)
      : d.now();
  const releasing: ConditionInput = {
    type: "InControl",
    status: "False",
    reason: StatusReason.Releasing,
    message: successor ? `handing the applier over to claim ${successor}` : "handing the applier back",
    ...g,
  };
  const timeoutMs = d.releaseTimeoutMs;
  let result: HandBackResult;
  try {
    result = await d.controller.handBack(
      claim,
      j.applier,
      d.ctx({
        releasingSince,
        ...(successor ? { successor } : {}),
        ...(inFlight ? { operation: inFlight } : {}),
        ...(branchKey ? { branchKey } : {}),
      }),
    );
  } catch (err) {
    result = {
      done: false,
      conditions: [{ ...releasing, message: `hand-back failed: ${errorMessage(err)}` }],
    };
  }
  // One Event per outcome, recorded here alone: handed back (or over), or given up.
  if (result.done) {
    const how = result.conditions?.find((c) => c.type === "InControl")?.message;
    await d.events.emit({
      type: "Normal",
      reason: successor ? StatusReason.HandedOver : StatusReason.Released,
      action: "Release",
      note:
        how ?? (successor ? `the applier is left held for claim ${successor}` : "the applier is handed back"),
      regarding: d.regarding(claim),
    });
    return result;
  }
  if (d.now().getTime() - releasingSince.getTime() > timeoutMs) {
    const message = `hand-back unfinished after ${formatDuration(timeoutMs)}; the applier is left ${result.leftAs ?? "as this claim last held it"}`;
    await d.events.emit({
      type: "Warning",
      reason: StatusReason.ReleaseFailed,
      action: "Release",
      note: message,
      regarding: d.regarding(claim),
    });
    return {
      done: true,
      conditions: [{ type: "InControl", status: "False", reason: StatusReason.ReleaseFailed, message, ...g }],
    };
  }
  const conds = result.conditions?.some((c) => c.type === "InControl")
    ? result.conditions
    : [...(result.conditions ?? []), releasing];
  return { ...result, conditions: conds };
}

/** "10 minutes", "90 seconds", "400 ms": a deadline as a person reads it. */
function formatDuration(ms: number): string {
  if (ms >= 60_000 && ms % 60_000 === 0) return `${ms / 60_000} minute${ms === 60_000 ? "" : "s"}`;
  if (ms >= 1_000 && ms % 1_000 === 0) return `${ms / 1_000} seconds`;
  return `${ms} ms`;
}
