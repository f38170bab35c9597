/**
 * Reading the remote: every piece of news about the branch's tip passes here. A moved tip is
 * recorded for the executors' recheck, and the writes whose trailers the new history carries are
 * settled as published (a push of ours, or of a previous owner, that landed).
 */
import type { BareRepo } from "../git/repo.js";
import {
  type BranchContext,
  type BranchState,
  forget,
  type HeldWrite,
  type Observation,
  remoteOf,
} from "./branch-state.js";
import { trailersOf } from "./commit-content.js";
import { foldersAt } from "./history.js";
import type { FetchReason } from "./metrics.js";
import { recordTip } from "./tip-record.js";

/** Reads the remote and classifies its tip. */
export async function observe(ctx: BranchContext, s: BranchState, reason: FetchReason): Promise<Observation> {
  const { o } = ctx;
  const previous = s.remoteTip;
  const haves = [previous, s.built.commits.at(-1)?.commit].filter((x): x is string => !!x);
  ctx.metrics.fetch(ctx.key, reason);
  ctx.log.debug({ reason, haves }, "reading the remote tip");
  const release =
    reason === "baseline" && o.baselineSlots ? await o.baselineSlots.acquire(ctx.stopSignal) : undefined;
  s.firstReadBegun = true;
  let read: Awaited<ReturnType<BareRepo["fetchBranch"]>>;
  try {
    const hint = s.noticeHint;
    s.noticeHint = undefined;
    read = await o.repo.fetchBranch(remoteOf(ctx, s), o.spec.branch, haves, hint);
  } finally {
    release?.();
  }
  const { tip, downloaded } = read;
  ctx.log.debug({ reason, commit: tip, downloaded }, "read the remote tip");
  const baseline = !s.baselined;
  s.baselined = true;
  s.nextFetchAt = ctx.clock.now() + (o.fetchIntervalMs ?? 60_000);
  const pushedByUs = tip !== undefined && s.pushedByUs.has(tip);
  if (tip !== previous || baseline) {
    s.remoteTip = tip;
    if (tip) await o.repo.writeRef(`refs/heads/${o.spec.branch}`, tip);
    // Recorded before the inbox lets go of the writes it carries (see `landed`).
    await recordTip(o.redis, o.prefix, ctx.key, ctx.token(), tip);
    await settleLanded(ctx, s, tip, previous);
  }
  const observation: Observation = {
    tip,
    previous,
    pushedByUs,
    baseline,
    reason,
    folders: await foldersAt(o.repo, s, tip, s.targets, ctx.log),
  };
  if (tip !== previous || baseline)
    ctx.log.info({ commit: tip, previous, reason, pushedByUs, baseline }, "observed the remote tip");
  await ctx.hooks.onObserved?.(observation);
  return observation;
}

/** Walks the history between `tip` and `previous` for trailers of writes still held. */
async function settleLanded(
  ctx: BranchContext,
  s: BranchState,
  tip: string | undefined,
  previous: string | undefined,
): Promise<void> {
  if (!tip || s.held.size === 0) return;
  let oldest = Number.POSITIVE_INFINITY;
  for (const h of s.held.values()) oldest = Math.min(oldest, Date.parse(h.write.acceptedAt) || 0);
  // A commit carrying a write is younger than the write; allow for clock skew between hosts.
  const cutoff = Math.floor((oldest - 15 * 60_000) / 1000);
  const landed = new Map<string, string>();
  const seen = new Set<string>();
  const queue = [tip];
  while (queue.length > 0 && seen.size < 2000) {
    const oid = queue.shift() as string;
    if (seen.has(oid) || oid === previous) continue;
    seen.add(oid);
    let c: Awaited<ReturnType<BareRepo["readCommit"]>>;
    try {
      c = await ctx.o.repo.readCommit(oid);
    } catch {
      continue;
    }
    for (const id of trailersOf(c.message)) if (s.held.has(id) && !landed.has(id)) landed.set(id, oid);
    if (c.timestamp < cutoff) continue;
    queue.push(...c.parents);
  }
  if (landed.size === 0) return;
  const settled = [...landed].map(([id, commit]) => ({ id, commit, held: s.held.get(id) as HeldWrite }));
  await ctx.inbox.settle(
    ctx.token(),
    settled.map(({ id, commit }) => ({ id, commit })),
    settled.map((x) => ({ entryId: x.held.entryId, charge: x.held.charge })),
  );
  forget(s, new Set(landed.keys()));
  ctx.log.info({ writes: landed.size, commit: tip }, "writes found already published");
}
