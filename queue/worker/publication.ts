/**
 * Publication: the pending writes become commits on the remote tip (materialize), pushed with
 * compare-and-swap; a rejection is answered by reading the remote, replaying and pushing again,
 * all within one deadline. A push that landed settles its writes; a failure keeps every pending
 * write and schedules the next attempt on the one retry clock the intake gate is told of.
 */
import { StatusReason } from "../crds/reasons.js";
import { errorMessage } from "../errors.js";
import type { BareRepo } from "../git/repo.js";
import { advertise, GitRemoteError, PushRejectedError } from "../git/smart-http.js";
import {
  type BranchContext,
  type BranchState,
  forget,
  type HeldWrite,
  type PublishResult,
  remoteOf,
} from "./branch-state.js";
import {
  type CommitSource,
  type Committer,
  cannotHeal,
  changesOf,
  commitSpec,
  failingAlone,
} from "./commit-content.js";
import { takeSettled } from "./entry-ledger.js";
import { foldersAt } from "./history.js";
import { LostLeaseError, type SettledEntry } from "./inbox.js";
import { DEFAULT_INTAKE_BUDGET_BYTES } from "./intake-budget.js";
import { observe } from "./observation.js";
import { refuse } from "./refusal.js";
import { afterFailure, contentionBackoff } from "./retry.js";
import { clearRefusals } from "./target-status.js";
import { recordTip } from "./tip-record.js";

/** Default deadline of one publication cycle, replays and contention retries included. */
export const DEFAULT_PUSH_CYCLE_TIMEOUT_MS = 300_000;

/** A publication cycle that did not end within its deadline: a failure like any other. */
export class PublicationDeadlineError extends Error {
  override name = "PublicationDeadlineError";
  constructor(readonly timeoutMs: number) {
    super(`the publication cycle passed its deadline of ${timeoutMs} ms`);
  }
}

/** The base branch a missing branch is to be created from does not exist (yet). */
export class BaseBranchMissingError extends Error {
  constructor(
    readonly base: string,
    branch: string,
  ) {
    super(`base branch ${base} does not exist: ${branch} is created from it once it does`);
  }
}

/**
 * One push cycle: materialize, push with compare-and-swap, and on a rejection fetch, replay and
 * push again with jittered backoff, within one deadline checked throughout: before each step,
 * and by every Git call, which is abandoned when the deadline passes. A failure (a stalled call
 * included) keeps every pending write and schedules the next attempt.
 */
export async function publish(ctx: BranchContext, s: BranchState, flush: boolean): Promise<PublishResult> {
  const { o } = ctx;
  const timeoutMs = o.pushCycleTimeoutMs ?? DEFAULT_PUSH_CYCLE_TIMEOUT_MS;
  const deadline = ctx.clock.now() + timeoutMs;
  const passed = () => new PublicationDeadlineError(timeoutMs);
  // One signal for the cycle's Git calls: aborted at the deadline, or when the worker stops.
  const cycle = new AbortController();
  const timer = setTimeout(() => cycle.abort(passed()), timeoutMs);
  const onStop = () => cycle.abort(ctx.stopSignal.reason);
  ctx.stopSignal.addEventListener("abort", onStop, { once: true });
  s.cycleSignal = cycle.signal;
  const inTime = () => {
    if (cycle.signal.aborted) throw cycle.signal.reason;
    if (ctx.clock.now() >= deadline) throw passed();
  };
  const maxRetries = o.maxContentionRetries ?? 10;
  const published = async (head: string | undefined): Promise<PublishResult> => {
    await landed(ctx, s, head);
    return { ok: true, tip: head, folders: await foldersAt(o.repo, s, head, s.targets, ctx.log) };
  };
  try {
    if (!s.baselined) await observe(ctx, s, "baseline");
    for (let attempt = 0; ; attempt++) {
      inTime();
      // A branch that does not exist yet starts from its base, never as a commit of one folder.
      s.startFrom =
        s.remoteTip === undefined && s.pending.length > 0 ? await baseOfNewBranch(ctx, s) : undefined;
      const head = await materialize(ctx, s);
      if (head === s.remoteTip) return await published(head);
      if (!(await o.lease.holds())) throw new LostLeaseError(`lost the lease of ${ctx.key}`);
      inTime();
      const oids = s.built.commits.flatMap((c) => c.newOids);
      ctx.log.debug({ attempt, commit: head, base: s.remoteTip, objects: oids.length }, "pushing");
      try {
        await o.repo.push(remoteOf(ctx, s), o.spec.branch, s.remoteTip, head as string, oids);
        ctx.metrics.push(ctx.key, "landed");
        return await published(head);
      } catch (err) {
        if (err instanceof PushRejectedError) {
          ctx.metrics.push(ctx.key, "rejected");
          ctx.log.info(
            { attempt, reason: err.reason },
            "push rejected: the branch moved; fetching and replaying",
          );
          if (attempt >= maxRetries || ctx.clock.now() >= deadline)
            throw new Error(`push still rejected after ${attempt + 1} attempts: ${err.reason}`);
          inTime();
          await observe(ctx, s, "rejected");
          ctx.metrics.contentionRetry(ctx.key);
          const backoff = contentionBackoff(attempt, o.random);
          await ctx.clock.sleep(Math.min(backoff, deadline - ctx.clock.now()), s.cycleSignal);
          continue;
        }
        if (!(err instanceof GitRemoteError)) throw err;
        // The push may have landed with only its reply lost: the remote decides, before any replay.
        ctx.metrics.fetch(ctx.key, "lostReply");
        const tip = await o.repo.remoteTip(remoteOf(ctx, s), o.spec.branch);
        if (tip === head) {
          ctx.metrics.push(ctx.key, "replyLost");
          ctx.log.info({ commit: head }, "push reply lost, but the remote holds our head: it landed");
          return await published(head);
        }
        ctx.metrics.push(ctx.key, "failed");
        throw err;
      }
    }
  } catch (err) {
    if (err instanceof LostLeaseError) throw err;
    // The probe after a failed push fails too once the deadline passed: say why the cycle ended.
    const cause = cycle.signal.aborted && err instanceof GitRemoteError ? cycle.signal.reason : err;
    if (s.stopped) return { ok: false, cause: errorMessage(cause) };
    return { ok: false, cause: failed(ctx, s, cause, flush ? "flush" : "publish") };
  } finally {
    clearTimeout(timer);
    ctx.stopSignal.removeEventListener("abort", onStop);
    s.cycleSignal = undefined;
  }
}

/**
 * Makes the checkout the remote tip plus one commit per pending write, reusing the commits
 * already built on this tip. The one routine that writes commits; a replay is this routine
 * after the tip moved.
 */
async function materialize(ctx: BranchContext, s: BranchState): Promise<string | undefined> {
  const onto = s.remoteTip ?? s.startFrom;
  if (s.built.base !== onto) {
    const replayed = s.built.commits.length;
    if (replayed > 0) ctx.metrics.replay(ctx.key, replayed);
    s.built = { base: onto, commits: [] };
  }
  const source: CommitSource = {
    repo: ctx.o.repo,
    foreignRanges: s.foreignRanges,
    isHeld: (id) => s.held.has(id),
  };
  const committer: Committer = { now: () => ctx.clock.now(), identity: ctx.o.committer };
  let parent = s.built.commits.at(-1)?.carriedBy ?? s.built.base;
  for (const p of s.pending.slice(s.built.commits.length)) {
    let written: Awaited<ReturnType<BareRepo["commitChanges"]>>;
    for (;;) {
      const { changes, refused } = await changesOf(source, parent, p);
      for (const r of refused)
        await refuse(ctx, s, r.held, { reason: StatusReason.Unstorable, message: r.reason });
      ctx.log.debug({ seq: p.seq, changes: changes.length, parent }, "committing a pending write");
      try {
        written = await ctx.o.repo.commitChanges(parent, changes, commitSpec(p, source.isHeld, committer));
        break;
      } catch (err) {
        // A commit that fails for a reason retrying cannot heal would block the branch for
        // good: the writes that fail are settled as refused and the rest committed.
        if (!cannotHeal(err)) throw err;
        const message = `commit failed: ${errorMessage(err)}`;
        const culprits = await failingAlone(source, parent, p, committer);
        const blamed = culprits.length > 0 ? culprits : p.writes.filter((h) => s.held.has(h.write.id));
        if (blamed.length === 0) throw err;
        for (const h of blamed) await refuse(ctx, s, h, { reason: StatusReason.CommitFailed, message });
      }
    }
    ctx.log.debug({ seq: p.seq, commit: written?.commit }, "committed a pending write");
    if (written) {
      ctx.metrics.commit(ctx.key);
      parent = written.commit;
    }
    s.built.commits.push({
      pending: p,
      commit: written?.commit,
      carriedBy: parent,
      newOids: written?.newOids ?? [],
    });
  }
  return parent;
}

/**
 * The commit a branch that does not exist yet is created on: the tip of the base branch its
 * GitTargets (or GitProvider) name, else of the repository's default branch. A named base that
 * does not exist fails the publication (writes stay pending, BaseBranchMissing); a repository
 * with no default branch (empty) gets a first commit.
 */
async function baseOfNewBranch(ctx: BranchContext, s: BranchState): Promise<string | undefined> {
  const own = ctx.o.spec.branch;
  let base = s.baseBranch === own ? undefined : s.baseBranch;
  if (base === undefined) {
    const ad = await advertise(remoteOf(ctx, s), "git-upload-pack");
    const head = [...ad.capabilities].find((c) => c.startsWith("symref=HEAD:refs/heads/"));
    const name = head?.slice("symref=HEAD:refs/heads/".length);
    if (!name || name === own || !ad.refs.has(`refs/heads/${name}`)) return undefined;
    base = name;
  }
  const { tip } = await ctx.o.repo.fetchBranch(remoteOf(ctx, s), base, s.startFrom ? [s.startFrom] : []);
  if (!tip) throw new BaseBranchMissingError(base, own);
  if (tip !== s.startFrom)
    ctx.log.info({ base, commit: tip }, "the branch does not exist yet: starting it from its base");
  return tip;
}

/** A publication (or a read of the remote) failed: the next attempt waits on the retry clock. */
export function failed(ctx: BranchContext, s: BranchState, err: unknown, during: string): string {
  const cause = err instanceof Error ? err.message : String(err);
  s.retry = afterFailure(s.retry, ctx.clock.now(), cause);
  s.retryReason = err instanceof BaseBranchMissingError ? StatusReason.BaseBranchMissing : undefined;
  ctx.log.warn(
    { during, cause, nextRetryAt: new Date(s.retry.nextAt).toISOString() },
    "publication failed; retrying later",
  );
  return cause;
}

/** A push carrying every built commit landed (or nothing needed pushing): forget those writes. */
async function landed(ctx: BranchContext, s: BranchState, head: string | undefined): Promise<void> {
  const { o } = ctx;
  const published: Array<{ id: string; commit: string }> = [];
  const entries: SettledEntry[] = [];
  const ids = new Set<string>();
  for (const c of s.built.commits) {
    if (c.commit) s.pushedByUs.add(c.commit);
    for (const h of c.pending.writes) {
      if (!s.held.has(h.write.id)) continue;
      ids.add(h.write.id);
      entries.push({ entryId: h.entryId, charge: h.charge });
      const commit = c.commit ?? c.carriedBy;
      if (commit) published.push({ id: h.write.id, commit });
    }
  }
  const carried = s.built.commits.filter((c) => c.pending.writes.some((h) => ids.has(h.write.id)));
  if (head) s.pushedByUs.add(head);
  if (s.pushedByUs.size > 10_000) s.pushedByUs.delete(s.pushedByUs.values().next().value as string);
  const moved = head !== s.remoteTip;
  // The tip is recorded before the inbox lets go of the writes it carries: an executor's edit
  // recheck that no longer finds a write in the inbox then finds the tip moved.
  if (moved) await recordTip(o.redis, o.prefix, ctx.key, ctx.token(), head);
  const fence = ctx.token();
  const settled = takeSettled(s.ledger);
  await ctx.inbox.settle(fence, published, [...entries, ...settled.entries], settled.refused);
  forget(s, ids);
  await clearRefusals(
    ctx,
    s,
    carried.flatMap((c) => c.pending.writes.map((h) => h.write.target)),
  );
  const now = ctx.clock.now();
  if (head !== s.remoteTip || entries.length > 0) s.lastPublishedAt = now;
  if (head !== s.remoteTip) {
    s.lastPushAt = now;
    ctx.log.info({ commit: head, writes: ids.size }, "published");
  }
  s.remoteTip = head;
  // A flush with nothing to push lands the tip the clone's ref already names: no write.
  if (head && moved) await o.repo.writeRef(`refs/heads/${o.spec.branch}`, head);
  s.built = { base: head, commits: [] };
  if (head && (moved || carried.length > 0))
    await ctx.hooks.onPublished?.({
      tip: head,
      folders: await foldersAt(o.repo, s, head, s.targets, ctx.log),
      entryIds: carried.map((c) => c.pending.entryId ?? (c.pending.writes.at(-1) as HeldWrite).entryId),
    });
  s.retry = undefined;
  s.retryReason = undefined;
  // The gate learns at once that no retry is pending (which releases its latch).
  if (s.paused || s.intake?.retrying) await syncIntake(ctx, s);
}

/**
 * Tells the intake gate the budget and whether a publication retry is pending, and reads back
 * its pause latch. The gate itself charges writes and latches the pause; a healthy branch that
 * told it so once has nothing more to say.
 */
export async function syncIntake(ctx: BranchContext, s: BranchState): Promise<void> {
  const budget = ctx.o.budgetBytes ?? DEFAULT_INTAKE_BUDGET_BYTES;
  const retrying = s.retry !== undefined;
  const told = s.intake;
  if (!retrying && !s.paused && told && !told.retrying && told.budget === budget) return;
  const retryAfter = s.retry ? (s.retry.nextAt - ctx.clock.now()) / 1000 : 0;
  const state = await ctx.inbox.syncIntake(ctx.token(), {
    pending: retrying,
    retryAfterSeconds: retryAfter,
    budgetBytes: budget,
    // The first word of a new owner: the count is rebuilt from the inbox it takes over.
    recount: told === undefined,
  });
  s.intake = { budget, retrying, chargedBytes: state.chargedBytes };
  if (state.paused && !s.paused)
    ctx.log.warn(
      { chargedBytes: state.chargedBytes, budgetBytes: budget },
      "intake paused: a write would pass the budget while publication retries",
    );
  if (!state.paused && s.paused) ctx.log.info("intake resumed");
  s.paused = state.paused;
}
