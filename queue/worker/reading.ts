/**
 * Reading the branch's inbox, in order: a write passes the same storability and scope checks as
 * at the door (else it is refused), is held, and goes to a commit window, or first to the
 * decision core's judgement (a snapshot's write, the applier's own write); a notice goes to its
 * hook; the watch plane's markers wait for the writes before them. Nothing read is lost: an
 * entry leaves the inbox only through the entry ledger or a landed push.
 */
import { AcceptedWrite, PushNotice, RefusalNotice, Report } from "../contract.js";
import { StatusReason } from "../crds/reasons.js";
import { errorMessage } from "../errors.js";
import { checkChanges, checkScope } from "../scope.js";
import { objectRefProblem, writeProblem } from "../write-check.js";
import type { BranchContext, BranchState, HeldWrite, SnapshotMark } from "./branch-state.js";
import { sweepChanges } from "./commit-content.js";
import { handOn, leave } from "./entry-ledger.js";
import { addWrite, updateTargets } from "./gathering.js";
import { compareEntryIds, type InboxEntry } from "./inbox.js";
import { writeCharge } from "./intake-budget.js";
import { observe } from "./observation.js";
import { type Refusal, refuse } from "./refusal.js";

/** Least time between two rereads of the spec a refused write asks for. */
const SPEC_REFRESH_GAP_MS = 1000;

/** Reads every inbox entry after the last one read. */
export async function drainInbox(ctx: BranchContext, s: BranchState): Promise<void> {
  for (;;) {
    const entries = await ctx.inbox.read(s.lastEntryId);
    if (entries.length === 0) return;
    const parsedWrites = entries.map((e) =>
      e.kind === "write" ? safeJson(e.data, AcceptedWrite) : undefined,
    );
    // A snapshot's write is judged against the tip it was read at (`tipWhenRead`): read the
    // remote first, before the batch counts as read. Read before the first observation, it had
    // no tip, was written whole, and undid pushes that landed while it waited (soak --mirror
    // seed 71015: a worker restarted just after a mirror restart).
    if (!s.baselined && parsedWrites.some((w) => w?.snapshot)) await observe(ctx, s, "baseline");
    s.lastEntryId = (entries[entries.length - 1] as InboxEntry).entryId;
    const writes: HeldWrite[] = [];
    for (const [i, e] of entries.entries()) {
      if (e.kind === "write") {
        const parsed = parsedWrites[i];
        if (!parsed) {
          ctx.log.warn({ entry: e.entryId }, "dropping an inbox write that does not parse");
          leave(s.ledger, { entryId: e.entryId, charge: e.charge ?? 0 });
          continue;
        }
        // The charge the gate made (an entry from before the gate charged is charged alike).
        const charge = e.charge ?? writeCharge(Buffer.byteLength(e.data));
        writes.push({
          write: parsed,
          entryId: e.entryId,
          charge,
          ...(s.remoteTip ? { tipWhenRead: s.remoteTip } : {}),
        });
      } else {
        await handleNotice(ctx, s, e);
      }
    }
    const already = await ctx.inbox.alreadyPublished(writes.map((w) => w.write.id));
    const now = ctx.clock.now();
    for (const h of writes) await readWrite(ctx, s, h, already.has(h.write.id), now);
    if (entries.length < 2000) return;
  }
}

async function readWrite(
  ctx: BranchContext,
  s: BranchState,
  h: HeldWrite,
  publishedAlready: boolean,
  now: number,
): Promise<void> {
  const entry = { entryId: h.entryId, charge: h.charge };
  // A write published already, or a second copy of one held (a client's retry): its entry
  // leaves at once, with its charge; the held copy is kept until its push lands.
  if (publishedAlready || s.held.has(h.write.id)) return leave(s.ledger, entry);
  // The watch plane's markers: a round of a GitTarget's initial snapshots starts, or is all before it.
  const mark = h.write.initialSnapshots;
  if (mark !== undefined) {
    const t = h.write.target;
    const target = { namespace: t.namespace, name: t.name, ...(t.uid ? { uid: t.uid } : {}) };
    if (mark.phase === "started") {
      leave(s.ledger, entry);
      await ctx.hooks.onInitialSnapshotsStarted?.({ target, token: mark.token });
    }
    // Its entry is settled once the mark is (see `snapshotMarks`).
    else s.snapshotMarks.push({ target, token: mark.token, ...entry });
    return;
  }
  // A snapshot's prune sweep becomes the delete changes it makes on the tip, then is judged
  // like any write; one that finds nothing to delete leaves without a commit.
  if (h.write.sweep) {
    // The sweep needs the folder as Git holds it: read the remote first if nothing was read yet.
    if (!s.baselined) await observe(ctx, s, "baseline");
    h.write.changes = await sweepChanges(ctx.o.repo, s.remoteTip, h.write, ctx.log);
    if (h.write.changes.length === 0) return leave(s.ledger, entry);
  }
  const refusal = await admission(ctx, s, h.write);
  if (refusal) return refuse(ctx, s, h, refusal);
  s.held.set(h.write.id, h);
  const stale = ctx.hooks.onSnapshotWrite;
  if (h.write.snapshot && !h.write.snapshot.initial && stale) {
    s.judging.set(h.write.id, { ...h, stage: "snapshot" });
    await stale(h.write);
    return;
  }
  if (await judgeApplierWrite(ctx, s, h)) return;
  addWrite(ctx, s, h, now);
}

/** Hands a watched applier write to the apply window's judge; true when it is held for it. */
async function judgeApplierWrite(ctx: BranchContext, s: BranchState, h: HeldWrite): Promise<boolean> {
  const judge = ctx.hooks.onWatchedApplierWrite;
  if (!h.write.applierAuthored || !judge) return false;
  s.judging.set(h.write.id, { ...h, stage: "applier" });
  await judge(h.write);
  return true;
}

/** Carries out the judgements of held writes that arrived since the last step. */
export async function applyVerdicts(ctx: BranchContext, s: BranchState, now: number): Promise<void> {
  for (const v of s.verdicts.splice(0)) {
    const j = s.judging.get(v.writeId);
    if (!j) continue;
    s.judging.delete(v.writeId);
    const { stage, ...h } = j;
    if (v.mirror) {
      // A snapshot's write used: an applier's write still goes to the apply window's judge.
      if (stage === "snapshot" && (await judgeApplierWrite(ctx, s, h))) continue;
      addWrite(ctx, s, h, now);
      continue;
    }
    s.held.delete(v.writeId);
    // It leaves the inbox with its charge: a later snapshot brings what it held.
    leave(s.ledger, { entryId: h.entryId, charge: h.charge });
    ctx.log.debug(
      { write: v.writeId, snapshot: h.write.snapshot?.id },
      stage === "snapshot"
        ? "a snapshot write collected while Git was ahead: discarded"
        : "the applier's own write: settled without a commit",
    );
  }
}

/** Initial-snapshot markers with nothing before them held any more: their GitTarget's snapshots are in Git. */
export async function settleSnapshotMarks(ctx: BranchContext, s: BranchState): Promise<void> {
  if (s.snapshotMarks.length === 0) return;
  const held = [...s.held.values()];
  const waiting: SnapshotMark[] = [];
  for (const m of s.snapshotMarks) {
    const before = held.some(
      (h) =>
        h.write.target.namespace === m.target.namespace &&
        h.write.target.name === m.target.name &&
        compareEntryIds(h.entryId, m.entryId) < 0,
    );
    if (before) {
      waiting.push(m);
      continue;
    }
    ctx.log.info(
      { target: `${m.target.namespace}/${m.target.name}`, token: m.token },
      "the watch plane's initial snapshots are published",
    );
    const record = ctx.hooks.onInitialSnapshotsPublished;
    handOn(s.ledger, { entryId: m.entryId, charge: m.charge }, !!record, ctx.hooks.savesEntries === true);
    await record?.({ target: m.target, token: m.token, entryId: m.entryId });
  }
  s.snapshotMarks = waiting;
}

/**
 * Why the worker will not hold a write, or undefined: every write passes the same storability
 * and scope checks as at the door, whoever put it in the inbox. A refusal first rereads the spec
 * (at most once a second), so a grant made since the worker started is not missed.
 */
async function admission(
  ctx: BranchContext,
  s: BranchState,
  write: AcceptedWrite,
): Promise<Refusal | undefined> {
  const problem = writeProblem(write.changes);
  if (problem) return { reason: StatusReason.Unstorable, message: `${problem.field}: ${problem.message}` };
  const verdict = (): Refusal | undefined => {
    const t = write.target;
    const target = s.targets.find((x) => x.namespace === t.namespace && x.name === t.name);
    const refused = s.refusedSpecs.find((x) => x.namespace === t.namespace && x.name === t.name);
    if (!target && refused) return { reason: refused.reason, message: refused.message };
    if (!target)
      return {
        reason: StatusReason.UnknownTarget,
        message: `GitTarget ${t.namespace}/${t.name} does not write this branch`,
      };
    const v = checkChanges(target.scope, write.changes);
    return v.ok ? undefined : { reason: v.reason, message: v.message };
  };
  return judgedAfresh(ctx, s, verdict);
}

/** A refusing verdict is judged again after reading the spec anew (at most once a second). */
async function judgedAfresh<T>(
  ctx: BranchContext,
  s: BranchState,
  verdict: () => T | undefined,
): Promise<T | undefined> {
  const first = verdict();
  const refresh = ctx.o.refreshSpec;
  if (!first || !refresh || ctx.clock.now() < s.specReadAt + SPEC_REFRESH_GAP_MS) return first;
  s.specReadAt = ctx.clock.now();
  try {
    const fresh = await refresh();
    if (fresh)
      updateTargets(ctx, s, fresh.targets, {
        refused: fresh.refused,
        baseBranch: fresh.baseBranch,
        remote: fresh.remote,
      });
  } catch (err) {
    ctx.log.warn({ err: errorMessage(err) }, "could not read the branch's GitTargets again");
  }
  return verdict();
}

/**
 * A refusal notice names an object its GitTarget may hold, as a write must (the door checks it
 * too): one naming any other object, or a GitTarget that does not write here, is dropped.
 */
async function noticeInScope(ctx: BranchContext, s: BranchState, n: RefusalNotice): Promise<boolean> {
  const why = await judgedAfresh(ctx, s, () => {
    const t = s.targets.find((x) => x.namespace === n.target.namespace && x.name === n.target.name);
    if (!t) return `GitTarget ${n.target.namespace}/${n.target.name} does not write this branch`;
    const problem = objectRefProblem(n.object, "object");
    if (problem) return `${problem.field}: ${problem.message}`;
    const v = checkScope(t.scope, n.object);
    return v.ok ? undefined : v.message;
  });
  if (why === undefined) return true;
  ctx.log.warn(
    { notice: n.id, target: `${n.target.namespace}/${n.target.name}`, why },
    "refusal notice dropped",
  );
  return false;
}

async function handleNotice(ctx: BranchContext, s: BranchState, e: InboxEntry): Promise<void> {
  const { hooks } = ctx;
  if (e.kind === "push") {
    const n = safeJson(e.data, PushNotice);
    if (n) {
      s.observeAsked = "notice";
      // The commit it names is downloaded beside the read of the tip (a hint, never trusted).
      s.noticeHint = n.deleted ? undefined : n.after;
    }
  } else if (e.kind === "refusal") {
    const parsed = safeJson(e.data, RefusalNotice);
    const n = parsed && (await noticeInScope(ctx, s, parsed)) ? parsed : undefined;
    handOn(
      s.ledger,
      { entryId: e.entryId, charge: 0 },
      !!(n && hooks.onRefusal),
      hooks.savesEntries === true,
    );
    if (n) await hooks.onRefusal?.(n, e.entryId);
    return;
  } else if (e.kind === "report") {
    const r = safeJson(e.data, Report);
    if (r) await hooks.onReport?.(r);
  }
  leave(s.ledger, { entryId: e.entryId, charge: 0 });
}

function safeJson<T>(
  data: string,
  schema: { safeParse(v: unknown): { success: true; data: T } | { success: false } },
): T | undefined {
  try {
    const r = schema.safeParse(JSON.parse(data));
    return r.success ? r.data : undefined;
  } catch {
    return undefined;
  }
}
