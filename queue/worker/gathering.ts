/**
 * Writes gathered into commit windows, and windows closed into pending writes: a window belongs
 * to one GitTarget and one author, a save closes it at once, and a suspended GitTarget's writes
 * are frozen (held, charged, never decided) until it resumes. Each closed window is announced to
 * the decisions before anything publishes it.
 */
import type { ObjectRef } from "../contract.js";
import type { RefusedTarget, TargetSpec } from "../directory.js";
import { objectPath, refOf } from "../git/layout.js";
import type { Remote } from "../git/smart-http.js";
import type { BranchContext, BranchState, HeldWrite, WriteDecided } from "./branch-state.js";
import { isSuspended } from "./branch-state.js";
import { addToWindow, DEFAULT_WINDOW, dueWindows, type OpenWindow } from "./windows.js";

/** A write judged fit for a commit: into its GitTarget's window, or frozen while it is suspended. */
export function addWrite(ctx: BranchContext, s: BranchState, h: HeldWrite, now: number): void {
  const t = h.write.target;
  const target = `${t.namespace}/${t.name}`;
  if (isSuspended(s, target)) {
    const frozen = s.frozen.get(target) ?? [];
    frozen.push(h);
    s.frozen.set(target, frozen);
    return;
  }
  const open = s.windows.get(target);
  // A window belongs to one author: another author's write is a commit boundary.
  if (open && authorOf(open.writes[0] as HeldWrite) !== authorOf(h)) closeWindow(ctx, s, open, now);
  const spec = s.targets.find((x) => x.namespace === t.namespace && x.name === t.name);
  const saved = addToWindow(s.windows, target, h, now, spec?.window ?? DEFAULT_WINDOW, h.write.save === true);
  if (saved) closeWindow(ctx, s, saved, now);
  // Waiting in an open window: the decisions guard its edits now, not only once the window closes.
  else if (ctx.hooks.onWriteGathered) s.gathered.push(h);
}

/** Closes the windows due at `now`, or every window (`all`: a flush). */
export function closeWindows(ctx: BranchContext, s: BranchState, now: number, all = false): void {
  for (const w of dueWindows(s.windows, now, all)) closeWindow(ctx, s, w, now);
}

function closeWindow(ctx: BranchContext, s: BranchState, w: OpenWindow<HeldWrite>, now: number): void {
  s.windows.delete(w.target);
  const last = w.writes.at(-1) as HeldWrite;
  const p = { seq: ++s.seq, target: w.target, writes: w.writes, closedAt: now, entryId: last.entryId };
  s.pending.push(p);
  if (ctx.hooks.onWriteDecided) s.decided.push(p);
}

/** What a write changes, with when the edit happened and when the write was accepted. */
function editedObjects(h: HeldWrite): WriteDecided["editedObjects"] {
  const editedAt = h.write.editedAt ?? h.write.acceptedAt;
  return h.write.changes.map((c) => ({
    ref: c.op === "upsert" ? (refOf(c.object as Parameters<typeof refOf>[0]) as ObjectRef) : c.ref,
    editedAt,
    acceptedAt: h.write.acceptedAt,
  }));
}

/**
 * Tells the decisions of the writes that joined a window still open, then of the windows closed
 * since the last call, before anything publishes them.
 */
export async function announceDecided(ctx: BranchContext, s: BranchState): Promise<void> {
  const gathered = ctx.hooks.onWriteGathered;
  // One announcement per GitTarget for the writes read since the last call (a burst is one event).
  const byTarget = new Map<string, HeldWrite[]>();
  for (const h of s.gathered.splice(0)) {
    const t = `${h.write.target.namespace}/${h.write.target.name}`;
    const writes = byTarget.get(t) ?? [];
    writes.push(h);
    byTarget.set(t, writes);
  }
  for (const writes of byTarget.values())
    await gathered?.({
      target: (writes[0] as HeldWrite).write.target,
      editedObjects: writes.flatMap(editedObjects),
    });
  const hook = ctx.hooks.onWriteDecided;
  if (!hook) return;
  for (const p of s.decided.splice(0)) {
    const last = p.writes.at(-1) as HeldWrite;
    const created: ObjectRef[] = [];
    const edited: WriteDecided["editedObjects"] = [];
    for (const h of p.writes) {
      edited.push(...editedObjects(h));
      for (const c of h.write.changes) {
        if (c.op !== "upsert") continue;
        const ref = refOf(c.object as Parameters<typeof refOf>[0]) as ObjectRef;
        let known: Buffer | undefined;
        try {
          if (s.remoteTip) known = await ctx.o.repo.readFile(s.remoteTip, objectPath(h.write.path, ref));
        } catch {
          continue; // a path the layout refuses is refused at commit time, not created
        }
        if (!known) created.push(ref);
      }
    }
    await hook({
      entryId: p.entryId ?? last.entryId,
      target: last.write.target,
      createdObjects: created,
      editedObjects: edited,
    });
  }
}

/**
 * The branch's GitTargets as they are now. A GitTarget that became suspended keeps the writes of
 * its open window (and every later one) frozen; one that resumed has them gathered into windows
 * again, in order. A changed remote (rotated credentials) is used from the next Git call on.
 */
export function updateTargets(
  ctx: BranchContext,
  s: BranchState,
  targets: TargetSpec[],
  more: { refused?: RefusedTarget[]; baseBranch?: string | undefined; remote?: Remote },
): void {
  const was = new Set(s.targets.filter((t) => t.suspended).map((t) => `${t.namespace}/${t.name}`));
  s.targets = targets;
  if ("refused" in more) s.refusedSpecs = more.refused ?? [];
  if ("baseBranch" in more) s.baseBranch = more.baseBranch;
  const now = ctx.clock.now();
  if (more.remote && !sameRemote(more.remote, s.remoteNow)) {
    s.remoteNow = more.remote;
    ctx.log.info(
      { credentials: more.remote.auth ? "present" : "none" },
      "the GitProvider's remote or credentials changed: used from the next Git call",
    );
    // A publication retrying (a refused credential, most likely) is tried again at once.
    if (s.retry) s.retry = { ...s.retry, nextAt: now };
  }
  for (const t of targets) {
    const key = `${t.namespace}/${t.name}`;
    if (t.suspended && !was.has(key)) {
      const open = s.windows.get(key);
      if (open) {
        s.windows.delete(key);
        s.frozen.set(key, [...open.writes, ...(s.frozen.get(key) ?? [])]);
      }
    }
  }
  for (const [key, writes] of [...s.frozen]) {
    if (isSuspended(s, key)) continue;
    s.frozen.delete(key);
    for (const h of writes) addWrite(ctx, s, h, now);
  }
}

/** Whether two remotes are the same URL with the same credentials and policy. */
function sameRemote(a: Remote, b: Remote): boolean {
  return (
    a.url === b.url &&
    a.auth?.username === b.auth?.username &&
    a.auth?.password === b.auth?.password &&
    (a.allowHttpCredentials === true) === (b.allowHttpCredentials === true) &&
    a.timeoutMs === b.timeoutMs
  );
}

function authorOf(h: HeldWrite): string {
  return `${h.write.author.name} <${h.write.author.email}>`;
}
