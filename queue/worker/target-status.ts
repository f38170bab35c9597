/**
 * What the branch's GitTargets are told: the publication report (`status.publication` and the
 * conditions Ready, Reconciling, Stalled) and WriteRefused. Written beside the branch worker's
 * loop, one report at a time, and only when what a reader sees changed, or to a GitTarget listed
 * since the last write.
 */

import { errorMessage } from "../errors.js";
import type { BranchContext, BranchState, HeldWrite } from "./branch-state.js";
import type { PublicationReport, TargetRef, WriteRefusal } from "./status.js";

/** The writes the worker holds: how many, their charged bytes, and when the oldest was accepted. */
export function retained(held: ReadonlyMap<string, HeldWrite>): {
  writes: number;
  bytes: number;
  oldestAt?: number;
} {
  let bytes = 0;
  let oldest: number | undefined;
  for (const h of held.values()) {
    bytes += h.charge;
    const at = Date.parse(h.write.acceptedAt);
    if (!Number.isNaN(at) && (oldest === undefined || at < oldest)) oldest = at;
  }
  return { writes: held.size, bytes, ...(oldest !== undefined ? { oldestAt: oldest } : {}) };
}

export function publicationReport(key: string, s: BranchState): PublicationReport {
  const kept = retained(s.held);
  const r: PublicationReport = {
    branchKey: key,
    state: s.retry ? "Retrying" : "Published",
    intakePaused: s.paused,
    retainedWrites: kept.writes,
    retainedBytes: kept.bytes,
  };
  if (s.remoteTip) r.commit = s.remoteTip;
  if (s.lastPublishedAt !== undefined) r.publishedAt = s.lastPublishedAt;
  if (s.retry) {
    if (s.retryReason) r.retryReason = s.retryReason;
    r.retryingSince = s.retry.since;
    r.lastError = s.retry.lastCause;
    r.nextRetryAt = s.retry.nextAt;
  }
  return r;
}

/**
 * Queues a status write behind the one under way (at most one waits): it reads the state when it
 * starts, so a flush asked meanwhile (an apply waiting on it) never waits for the API server.
 */
export function reportStatus(ctx: BranchContext, s: BranchState): void {
  const st = s.status;
  if (!ctx.o.status || st.queued) return;
  st.queued = true;
  st.writing = st.writing.then(async () => {
    st.queued = false;
    await writeStatus(ctx, s);
  });
}

/** Writes the report when the state, cause, pause or commit changed, and to GitTargets not told yet. */
async function writeStatus(ctx: BranchContext, s: BranchState): Promise<void> {
  const sink = ctx.o.status;
  if (!sink) return;
  const st = s.status;
  const r = publicationReport(ctx.key, s);
  const sig = JSON.stringify([r.state, r.commit, r.retryingSince, r.lastError, r.intakePaused]);
  const all = s.targets.map((t) => ({ namespace: t.namespace, name: t.name }));
  const changed = sig !== st.lastReport;
  const to = changed ? all : all.filter((t) => !st.reportedTo.has(`${t.namespace}/${t.name}`));
  if (to.length === 0) return;
  st.lastReport = sig;
  try {
    await sink.report(to, r);
    if (changed) st.reportedTo.clear();
    for (const t of to) st.reportedTo.add(`${t.namespace}/${t.name}`);
  } catch (err) {
    st.lastReport = "";
    ctx.log.warn({ err: errorMessage(err) }, "status write failed; will write again");
  }
}

/** A write of the GitTarget was settled as refused: WriteRefused True, with an Event. */
export async function recordRefusal(
  ctx: BranchContext,
  s: BranchState,
  target: TargetRef,
  refusal: WriteRefusal,
): Promise<void> {
  const key = `${target.namespace}/${target.name}`;
  s.status.refusedTargets.add(key);
  await ctx.o.status?.refused?.(target, refusal).catch((err: unknown) => {
    ctx.log.warn({ err: errorMessage(err), target: key }, "could not record the refusal on the GitTarget");
  });
}

/** A write of these GitTargets published: their WriteRefused goes back to False. */
export async function clearRefusals(ctx: BranchContext, s: BranchState, targets: TargetRef[]): Promise<void> {
  for (const t of targets) {
    if (!s.status.refusedTargets.delete(`${t.namespace}/${t.name}`)) continue;
    await ctx.o.status?.refused?.({ namespace: t.namespace, name: t.name }, undefined).catch(() => {});
  }
}
