/**
 * The branch worker's decision core: `step(state, event, now)` returns the next state and the
 * actions the shell carries out. Pure: the input state is never changed, no clock is read, and
 * tokens come from a counter in the state.
 */
import {
  type ApplierKind,
  type ApplierRef,
  type Attempt,
  applierManagersOf,
  type ClaimRef,
  type ObjectRef,
  TERMINAL_PHASES,
} from "../contract.js";
import { StatusReason } from "../crds/reasons.js";
import { backoffDelay } from "./backoff.js";
import { copy } from "./copy.js";
import { branchHold, claimKey, dueAppliers, isGitAhead, targetsNaming } from "./due.js";
import { approvalGate, claimGate, governanceWakeAt, windowGate } from "./governance.js";
import type {
  ApplierState,
  ApplyWindow,
  BranchIdentity,
  ClaimStatusSnapshot,
  DecisionAction,
  DecisionEvent,
  DecisionState,
  EditedObject,
  FolderRead,
  GuardedEdit,
  ListedTarget,
  PendingKind,
  PendingReasons,
  PendingWrite,
  StepResult,
} from "./model.js";
import {
  addPending,
  dropKind,
  dropTarget,
  emptyPending,
  giveBack,
  hasPending,
  kindsPending,
  reasonForTarget,
} from "./reasons.js";
import { admitRefusal, consentsToRefusal, trailingRefusalDue } from "./refusal.js";
import { retryView } from "./retry-view.js";
import { hasTrigger, holdEndsAt, judgeSnapshot, recollectDue } from "./snapshots.js";
import { endsOnSupersession, judgeSupersession } from "./supersede.js";
import {
  asOfArrival,
  isOver,
  judgeApplierWrite,
  judgeWatchedWrite,
  mirrorsWrite,
  objectKey,
  rememberApplierWrite,
  toSeconds,
  type WatchedVerdict,
  windowClosesAt,
  windowKept,
  windowOpen,
} from "./window.js";

/** How many of the worker's own publications the state keeps, for the approval walk. */
export const PUBLISHED_KEPT = 500;

export function initialState(branch: BranchIdentity, tokenPrefix: string): DecisionState {
  return {
    branch,
    tokenPrefix,
    nextToken: 0,
    observed: false,
    tip: null,
    writeSeq: 0,
    unpublished: [],
    flush: null,
    nextFlushId: 0,
    flushFailures: 0,
    flushNotBefore: 0,
    targets: {},
    appliers: {},
    wakeAt: null,
  };
}

function newApplier(claim: ClaimRef, applier: ApplierRef, source: string): ApplierState {
  return {
    claim,
    applier,
    source,
    pending: emptyPending(),
    operation: null,
    lastAppliedCommit: null,
    failures: 0,
    notBefore: 0,
    lastTurnAt: -1,
    windows: [],
    repairRecorded: false,
  };
}

/** Applies one event at `now` (epoch ms). */
export function step(state: DecisionState, event: DecisionEvent, now: number): StepResult {
  const s = copy(state);
  const actions: DecisionAction[] = [];
  switch (event.type) {
    case "Observed":
      observe(s, event.tip, event.pushedByUs);
      if (event.tip !== null) readFolders(s, { commit: event.tip, present: event.folders ?? [] });
      break;
    case "TargetsListed":
      listTargets(s, event.targets);
      if (event.folders) readFolders(s, event.folders);
      break;
    case "WriteDecided":
      decideWrite(s, event, now, actions);
      break;
    case "WriteGathered":
      guardEdits(s, event.targetUid, event.editedObjects, now, actions);
      break;
    case "RefusalReceived":
      receiveRefusal(s, event.targetUid, now);
      break;
    case "Published":
      publish(s, event, now, actions);
      break;
    case "FlushFailed":
      if (s.flush?.id === event.flush) {
        s.flush = null;
        s.flushFailures += 1;
        s.flushNotBefore = now + backoffDelay(s.flushFailures, false);
      }
      break;
    case "Report":
      settleReport(s, event.report, now);
      break;
    case "AncestryRead":
      judgeAncestry(s, event, actions);
      break;
    case "ApplierWrite":
      judgeWrite(s, event.report, now, actions);
      break;
    case "WatchedApplierWrite":
      judgeWatched(s, event, now, actions);
      break;
    case "SnapshotWrite":
      judgeSnapshotWrite(s, event, now, actions);
      break;
    case "InitialSnapshotsStarted": {
      const t = s.targets[event.targetUid];
      if (t) t.watch = event.token;
      break;
    }
    case "InitialSnapshotsPublished": {
      const t = s.targets[event.targetUid];
      if (t) t.initialSnapshotsAt = event.token;
      break;
    }
    case "CommitsRead":
      for (const [key, read] of Object.entries(event.reads)) {
        const a = s.appliers[key];
        if (a) a.foreignRead = read;
      }
      break;
    case "Tick":
      // The shell's timer fired and it holds none now: ask for the next wake even when it is the
      // same time (a timer may fire a millisecond early, before what it was set for is due).
      s.wakeAt = null;
      break;
    case "ClaimsRead":
      readClaims(s, event.claims, event.queued, now, actions);
      break;
    case "Restarted":
      return finish(restart(s, event, now), now, actions);
  }
  return finish(s, now, actions);
}

// ---------------------------------------------------------------------------------------------
// Observing

/** Appliers a GitTarget names now: the appliers "on the branch". */
function namedAppliers(s: DecisionState): ApplierState[] {
  return Object.entries(s.appliers)
    .filter(([key]) => Object.values(s.targets).some((t) => t.claim === key))
    .map(([, a]) => a);
}

/**
 * The first observation after a start is a baseline: a converge is pending for every applier, never
 * a ForeignCommit, which would revert edits made while the worker was down. An operation followed
 * across the start for another commit than a baseline tip that moved while no owner watched (not
 * our push) is overtaken, as by a foreign tip. A tip we pushed leaves
 * nothing pending; any other new tip is a ForeignCommit for every applier on the branch, and a new
 * request: it resets the applier's backoff (its failures were an older commit's), and an operation
 * out is overtaken (its end without success starts no backoff; `ancestryReadsAsked` asks whether
 * the tip supersedes it). An empty branch asks nothing.
 */
export function observe(s: DecisionState, tip: string | null, pushedByUs: boolean): void {
  if (!s.observed) {
    s.observed = true;
    const last = s.tip;
    s.tip = tip;
    for (const a of Object.values(s.appliers)) {
      addPending(a.pending, "Converge");
      const op = a.operation;
      if (op && tip !== null && tip !== last && !pushedByUs && op.commit !== tip) op.overtaken = true;
    }
    return;
  }
  if (tip === s.tip) return;
  s.tip = tip;
  if (tip === null || pushedByUs) return;
  for (const a of namedAppliers(s)) {
    addPending(a.pending, "ForeignCommit");
    a.failures = 0;
    a.notBefore = 0;
    if (a.operation) a.operation.overtaken = true;
  }
}

/**
 * GitTargets by uid: configuration, consent, the claim named. A claim named for the first time by
 * a uid gets a converge for that target. A target gone takes its reasons with it; an applier no
 * GitTarget names anymore keeps nothing pending.
 */
export function listTargets(s: DecisionState, listed: ListedTarget[]): void {
  const namedBefore = new Set(Object.values(s.targets).flatMap((t) => (t.claim === null ? [] : [t.claim])));
  const uids = new Set(listed.map((t) => t.uid));
  for (const uid of Object.keys(s.targets)) {
    if (uids.has(uid)) continue;
    delete s.targets[uid];
    for (const a of Object.values(s.appliers)) dropTarget(a.pending, uid);
  }
  for (const l of listed) {
    const key = l.claim !== null && l.applier !== null ? claimKey(l.claim) : null;
    const prev = s.targets[l.uid];
    if (prev?.claim && prev.claim !== key) {
      const old = s.appliers[prev.claim];
      if (old) dropTarget(old.pending, l.uid);
    }
    const t = prev ?? {
      uid: l.uid,
      namespace: l.namespace,
      name: l.name,
      claim: null,
      onRefusal: l.onRefusal,
      suspended: l.suspended,
      named: [],
      folderAt: null,
      lastRefusalAt: null,
      trailingRefusalAt: null,
    };
    Object.assign(t, {
      namespace: l.namespace,
      name: l.name,
      claim: key,
      onRefusal: l.onRefusal,
      suspended: l.suspended,
    });
    if (l.path !== undefined) t.path = l.path;
    t.watch = l.watch ?? null;
    if (l.governance) t.governance = l.governance;
    else delete t.governance;
    s.targets[l.uid] = t;
    if (key === null || l.claim === null || l.applier === null) continue;
    const a = s.appliers[key] ?? newApplier(l.claim, l.applier, l.source ?? key);
    a.applier = l.applier;
    a.source = l.source ?? key;
    s.appliers[key] = a;
    if (!t.named.includes(key)) {
      t.named.push(key);
      addPending(a.pending, "Converge", t.uid);
    }
    takeReconcileRequest(a, l.reconcile);
    if (!consentsToRefusal(t)) {
      const mine = a.pending.byTarget[t.uid];
      if (mine) a.pending.byTarget[t.uid] = mine.filter((k) => k !== "Refusal");
      t.trailingRefusalAt = null;
    }
  }
  for (const key of namedBefore) {
    const a = s.appliers[key];
    if (a && targetsNaming(s, key).length === 0) a.pending = emptyPending();
  }
}

/**
 * A reconcile request on the claim (`applygate reconcile`): a value of its annotation not taken
 * yet, here or (after a restart without saved state) as the claim's status records, becomes one
 * `Requested` reason, which goes through every rule an apply goes through. Once taken, the claim's
 * status is told (`recordReconciles`), so a value is taken once, however often it is listed.
 */
export function takeReconcileRequest(a: ApplierState, r: ListedTarget["reconcile"]): void {
  const asked = r?.requestedAt;
  if (asked === undefined) return;
  const taken = a.reconcileHandled ?? r?.handled;
  if (asked === taken) {
    a.reconcileHandled = asked;
    if (r?.handled === asked) a.reconcileRecorded = asked;
    return;
  }
  a.reconcileHandled = asked;
  addPending(a.pending, "Requested");
}

/**
 * The worker read the tree of `commit`: the GitTargets it names hold their folder there, the others
 * do not. Only a read of the tip now lets an applier past the barrier (`notDueBecause`), so a read
 * of another commit, or none at all, holds it.
 */
export function readFolders(s: DecisionState, read: FolderRead): void {
  const present = new Set(read.present);
  for (const t of Object.values(s.targets)) t.folderAt = present.has(t.uid) ? read.commit : null;
}

/**
 * A decided write joins the pending writes. Its edits are recorded in every apply window of the
 * target's applier open when the edit's write reached the inbox (their commits cannot hold it),
 * and judged against the applier writes those windows already saw: the edit may reach the worker
 * after the apply over it did. A write is decided when its commit window closes, which after a
 * worker restart is seconds after the apply window it arrived in closed (soak --mirror seed
 * 81039); that window is still kept (`WINDOW_KEPT_MS`). A write that created objects asks its
 * applier for an adopt once it is published.
 */
function decideWrite(
  s: DecisionState,
  e: Extract<DecisionEvent, { type: "WriteDecided" }>,
  now: number,
  actions: DecisionAction[],
): void {
  s.writeSeq += 1;
  const edits = guardedEdits(e.targetUid, e.editedObjects, now);
  s.unpublished.push({
    entryId: e.entryId,
    seq: s.writeSeq,
    targetUid: e.targetUid,
    created: e.createdObjects.length > 0,
    edits,
  });
  guardEdits(s, e.targetUid, e.editedObjects, now, actions);
}

/** A write's edits as apply windows record them (whole seconds; `now` when unreadable). */
function guardedEdits(targetUid: string, edited: readonly EditedObject[], now: number): GuardedEdit[] {
  return edited.map((o) => {
    const sec = toSeconds(o.editedAt);
    return {
      object: objectKey(o.ref),
      targetUid,
      editedAtSec: Number.isFinite(sec) ? sec : Math.floor(now / 1000),
    };
  });
}

/**
 * Records a write's edits in its applier's apply windows open at the write's arrival, each judged
 * against the applier writes the window remembers (a late apply over it: a Repair). Called when
 * the write joins a commit window (`WriteGathered`) and again when it is decided: an edit a window
 * holds already is not recorded or judged twice, so the Repair is due as soon as the worker reads
 * the edit, not only once its commit window closes (5 s idle by default).
 */
function guardEdits(
  s: DecisionState,
  targetUid: string,
  edited: readonly EditedObject[],
  now: number,
  actions: DecisionAction[],
): void {
  const key = s.targets[targetUid]?.claim;
  const a = key ? s.appliers[key] : undefined;
  if (!a || !key) return;
  const edits = guardedEdits(targetUid, edited, now);
  const arrivals = edited.map((o) => asOfArrival(o.arrivedAt, now));
  for (const w of a.windows) {
    for (const [i, edit] of edits.entries()) {
      if (!windowOpen(w, arrivals[i] as number)) continue;
      if (
        w.edits.some(
          (x) =>
            x.object === edit.object && x.targetUid === edit.targetUid && x.editedAtSec === edit.editedAtSec,
        )
      )
        continue;
      w.edits.push(edit);
      const over = (w.writes ?? []).find(
        (x) => x.object === edit.object && isOver(x.writtenAtSec, edit.editedAtSec),
      );
      if (over) collide(s, key, w, edit, over.ref, actions);
    }
  }
}

/** Refusal only with consent; at most one request a minute per target, the rest trailing. */
function receiveRefusal(s: DecisionState, uid: string, now: number): void {
  const t = s.targets[uid];
  if (!t || !consentsToRefusal(t) || t.claim === null) return;
  const a = s.appliers[t.claim];
  if (a && admitRefusal(t, now)) addPending(a.pending, "Refusal", uid);
}

// ---------------------------------------------------------------------------------------------
// Flush, then send

/**
 * The writes up to the mark are in Git and `tip` is the branch now. Created objects become adopts,
 * the tip's folders are read (the barrier), and if this answers the flush in progress, every due
 * applier gets one attempt for that tip.
 */
function publish(
  s: DecisionState,
  e: Extract<DecisionEvent, { type: "Published" }>,
  now: number,
  actions: DecisionAction[],
): void {
  if (!s.observed) observe(s, e.tip, true);
  // The commits from the tip before up to this one are the worker's own: no approval needed.
  if (e.tip !== s.tip)
    s.published = [...(s.published ?? []), { tip: e.tip, base: s.tip }].slice(-PUBLISHED_KEPT);
  const markSeq = e.upToMark === null ? 0 : (s.unpublished.find((w) => w.entryId === e.upToMark)?.seq ?? 0);
  const landed = s.unpublished.filter((w) => w.seq <= markSeq);
  s.unpublished = s.unpublished.filter((w) => w.seq > markSeq);
  for (const w of landed) {
    const t = s.targets[w.targetUid];
    if (!t) continue;
    const a = t.claim ? s.appliers[t.claim] : undefined;
    if (a && w.created) addPending(a.pending, "Adopt", t.uid);
  }
  observe(s, e.tip, true);
  readFolders(s, { commit: e.tip, present: e.folders ?? [] });
  if (e.flush === undefined || s.flush?.id !== e.flush) return;
  s.flush = null;
  s.flushFailures = 0;
  s.flushNotBefore = 0;
  for (const key of dueAppliers(s, now)) sendAttempt(s, key, now, actions, e.inboxMark);
}

/**
 * The bound of the edit recheck, a short time budget: within one attempt chain (attempts ending
 * Stale, one after the other), attempts are sent with the recheck for 5 s from the chain's first
 * restale, and without it after that, so the apply goes. A burst of edits (a person saving a few
 * times, a controller writing several objects) is over within it and is applied whole instead of
 * being reverted for a moment and repaired; continuous editing delays an apply by at most the
 * budget and the attempt in flight when it ends (each restale costs a flush and, for Flux, a
 * source fetch), and never starves it. Past the budget the apply window and a Repair handle an
 * edit it runs over, as before. Any end but Stale closes the chain.
 */
export const RESTALE_BUDGET_MS = 5_000;

/** Whether the next attempt of this applier may carry the edit recheck (pure). */
export function mayRecheckEdits(a: ApplierState, now: number): boolean {
  const since = a.restaleSince ?? null;
  return since === null || now - since < RESTALE_BUDGET_MS;
}

/**
 * One attempt for a due applier, for the tip the flush produced. It carries away every reason
 * pending; each target names its own, by precedence. Edits decided after the mark (still
 * unpublished) are recorded in the window it opens, from the start.
 */
export function sendAttempt(
  s: DecisionState,
  key: string,
  now: number,
  actions: DecisionAction[],
  inboxMark?: string,
): void {
  const a = s.appliers[key];
  if (!a || s.tip === null) return;
  const named = targetsNaming(s, key);
  const targets: Attempt["targets"] = [];
  for (const t of named) {
    const reason = reasonForTarget(a.pending, t.uid);
    if (reason) targets.push({ uid: t.uid, namespace: t.namespace, name: t.name, reason });
  }
  if (targets.length === 0) {
    a.pending = emptyPending();
    return;
  }
  s.nextToken += 1;
  const token = `${s.tokenPrefix}-${s.nextToken}`;
  const namedUids = new Set(named.map((t) => t.uid));
  // Outside the change windows only an override lets it through: this attempt uses it up.
  const override = windowGate(a, named, now).override;
  const approval = approvalGate(s.tip, a, named);
  const approvals = approval.state === "Approved" ? { approvals: approval.approvals } : {};
  a.operation = { token, commit: s.tip, sentAt: now, phase: "Sent", carried: a.pending };
  if (override) {
    a.operation.override = override.value;
    a.overrideUsed = { value: override.value, token, ...(override.by ? { by: override.by } : {}) };
  }
  a.pending = emptyPending();
  a.lastTurnAt = now;
  raiseEpoch(s);
  const edits = s.unpublished.filter((w) => namedUids.has(w.targetUid)).flatMap((w) => w.edits);
  a.windows.push({ token, commit: s.tip, sentAt: now, completedAt: null, edits: copy(edits) });
  // The edit recheck watches the folders of every GitTarget naming the claim, not only those with a reason.
  const folders = [...new Set(named.flatMap((t) => (t.path === undefined ? [] : [t.path])))];
  const recheck =
    inboxMark !== undefined && folders.length > 0 && mayRecheckEdits(a, now)
      ? { editsAfter: { mark: inboxMark, folders } }
      : {};
  actions.push({
    type: "SendAttempt",
    attempt: {
      token,
      claim: a.claim,
      applier: a.applier,
      branchKey: s.branch.key,
      repository: s.branch.repository,
      branch: s.branch.branch,
      commit: s.tip,
      targets,
      sentAt: new Date(now).toISOString(),
      ...recheck,
      ...(override
        ? { override: { changeWindow: override.value, ...(override.by ? { by: override.by } : {}) } }
        : {}),
      ...approvals,
    },
  });
}

// ---------------------------------------------------------------------------------------------
// Reports

/** Whether a reason given back still holds: its target is still here, names the applier, and for a refusal still consents. */
function stillStands(s: DecisionState, key: string, kind: PendingKind, uid?: string): boolean {
  if (uid === undefined) return true;
  const t = s.targets[uid];
  if (!t || t.claim !== key) return false;
  return kind !== "Refusal" || consentsToRefusal(t);
}

/**
 * An executor's report. Only the operation out, by token, moves; late and duplicate reports find
 * no operation and change nothing. Succeeded answers what the attempt carried and records the
 * commit; Stale gives it back and is decided again at once; anything else gives it back (a
 * refusal only if it still stands) and starts the backoff. A Stale for an edit after the flush
 * mark starts the chain's budget (`RESTALE_BUDGET_MS`); any end but Stale closes the chain.
 */
export function settleReport(
  s: DecisionState,
  r: {
    token: string;
    claim: ClaimRef;
    phase: string;
    commit?: string;
    reason?: string;
    message?: string;
    retry?: { attempt: number; of?: number; at: string };
  },
  now: number,
): void {
  const key = claimKey(r.claim);
  const a = s.appliers[key];
  const op = a?.operation;
  if (!a || !op || op.token !== r.token) return;
  const phase = r.phase as (typeof TERMINAL_PHASES)[number];
  if (!TERMINAL_PHASES.includes(phase)) {
    op.phase = phase;
    // The applier's own retry this operation waits for, while the executor says so.
    const at = r.retry ? Date.parse(r.retry.at) : Number.NaN;
    if (r.retry && Number.isFinite(at))
      op.retry = { attempt: r.retry.attempt, ...(r.retry.of ? { of: r.retry.of } : {}), at };
    else delete op.retry;
    if (r.message !== undefined) op.message = r.message.slice(0, MESSAGE_KEPT);
    return;
  }
  a.operation = null;
  raiseEpoch(s);
  for (const w of a.windows) if (w.token === op.token && w.completedAt === null) w.completedAt = now;
  if (phase === "Stale") {
    if (r.reason === StatusReason.EditedAfterFlush) a.restaleSince ??= now;
  } else a.restaleSince = null;
  if (phase === "Succeeded") {
    a.lastAppliedCommit = r.commit ?? op.commit;
    a.failures = 0;
    a.notBefore = 0;
    delete a.lastEnd;
    return;
  }
  giveBack(a.pending, op.carried, (kind, uid) => stillStands(s, key, kind, uid));
  // Nothing was applied: an override this attempt used is given back for the next one.
  if (
    op.override !== undefined &&
    phase !== "Failed" &&
    phase !== "Superseded" &&
    a.overrideUsed?.token === op.token
  )
    a.overrideUsed = null;
  if (phase === "Stale") return;
  const message = r.message ?? op.message;
  a.lastEnd = {
    phase,
    commit: op.commit,
    ...(r.reason ? { reason: r.reason } : {}),
    ...(message ? { message: message.slice(0, MESSAGE_KEPT) } : {}),
  };
  // Superseded, or overtaken by a foreign tip while out: it was an older commit's end, and the
  // tip it leaves pending has not been tried. Decided again at once, as a Stale one.
  if (phase === "Superseded" || op.overtaken) return;
  a.failures += 1;
  a.notBefore = now + backoffDelay(a.failures, phase === "Rejected");
}

/** How much of an executor's message the state keeps (for the claim's Retrying condition). */
const MESSAGE_KEPT = 512;

/**
 * The clone's answer for an operation out against the tip. Judged only for the operation it was
 * asked of and the tip now (a read of an older tip is asked again for the tip now); once the tip
 * supersedes it, an applier whose operations can be ended is asked, once, to end it.
 */
function judgeAncestry(
  s: DecisionState,
  e: Extract<DecisionEvent, { type: "AncestryRead" }>,
  actions: DecisionAction[],
): void {
  if (e.tip !== s.tip) return;
  for (const a of Object.values(s.appliers)) {
    const op = a.operation;
    if (!op || op.token !== e.token || op.commit !== e.commit) continue;
    const v = judgeSupersession(op.commit, e.tip, e.ancestry);
    if (v.verdict === "prove") return;
    op.supersession =
      v.verdict === "superseded"
        ? { tip: e.tip, superseded: true }
        : { tip: e.tip, superseded: false, why: v.why };
    if (v.verdict !== "superseded" || op.endAsked !== undefined || !endsOnSupersession(a.applier.kind))
      return;
    op.endAsked = e.tip;
    actions.push({
      type: "EndSuperseded",
      claim: a.claim,
      applier: a.applier,
      token: op.token,
      commit: op.commit,
      tip: e.tip,
    });
    return;
  }
}

/**
 * A write of the applier's own field managers seen while a window is open. Over a newer edit
 * recorded in the window, it is a late apply: a Repair is due for that applier and the collision
 * is logged.
 */
function judgeWrite(
  s: DecisionState,
  r: Extract<DecisionEvent, { type: "ApplierWrite" }>["report"],
  now: number,
  actions: DecisionAction[],
): void {
  const key = claimKey(r.claim);
  const a = s.appliers[key];
  if (!a || !applierManagersOf(a.applier).includes(r.manager)) return;
  const object = objectKey(r.object);
  const writtenAtSec = toSeconds(r.writtenAt);
  const hit = judgeApplierWrite(a.windows, object, writtenAtSec, now);
  rememberApplierWrite(a.windows, { ref: r.object, object, writtenAtSec }, now);
  if (hit) collide(s, key, hit.window, hit.edit, r.object, actions);
}

/**
 * A watched write of the applier's own managers, judged by the same rule as a window observer's
 * report: the apply landing is not mirrored, a late apply over a newer edit is withheld (a Repair
 * due), and a write no window can explain, or an undo, is mirrored. A write to a folder whose
 * applier is not the writer (no claim, another applier kind's manager) is mirrored as late.
 */
function judgeWatched(
  s: DecisionState,
  e: Extract<DecisionEvent, { type: "WatchedApplierWrite" }>,
  now: number,
  actions: DecisionAction[],
): void {
  const key = s.targets[e.targetUid]?.claim ?? null;
  const a = key ? s.appliers[key] : undefined;
  const settle = (verdict: WatchedVerdict) =>
    actions.push({
      type: "SettleWatchedWrite",
      writeId: e.writeId,
      mirror: mirrorsWrite(verdict),
      verdict,
      applierKind: a?.applier.kind ?? null,
    });
  if (!a || !key || !applierManagersOf(a.applier).includes(e.manager)) return void settle("late");
  const object = objectKey(e.ref);
  const writtenAtSec = toSeconds(e.writtenAt);
  // As of its arrival in the inbox: an owner reading it late (after a handover) judges it against
  // the windows as the owner then would have.
  const at = asOfArrival(e.arrivedAt, now);
  const judged = judgeWatchedWrite(a.windows, object, writtenAtSec, at);
  if (judged.verdict === "not_mirrored" || judged.verdict === "withheld")
    rememberApplierWrite(a.windows, { ref: e.ref, object, writtenAtSec }, at);
  if (judged.hit) collide(s, key, judged.hit.window, judged.hit.edit, e.ref, actions);
  settle(judged.verdict);
}

/** The apply epoch moves: at every send of an attempt and every end of one. */
function raiseEpoch(s: DecisionState): void {
  s.applyEpoch = (s.applyEpoch ?? 0) + 1;
}

/**
 * A snapshot write: used when it is initial, on a branch with no trigger, or collected and
 * arriving while Git is not ahead in one epoch; otherwise discarded (its GitTarget's snapshots are
 * held and collected again after the apply), until the hold's 5 minutes let one through.
 */
function judgeSnapshotWrite(
  s: DecisionState,
  e: Extract<DecisionEvent, { type: "SnapshotWrite" }>,
  now: number,
  actions: DecisionAction[],
): void {
  const t = s.targets[e.targetUid];
  const view = { epoch: s.applyEpoch ?? 0, gitAhead: isGitAhead(s), triggered: hasTrigger(s) };
  const j = judgeSnapshot(t?.snapshots, e.snapshot, view, now);
  if (t && (t.snapshots !== undefined || j.verdict === "discarded" || j.verdict === "used"))
    t.snapshots = j.hold;
  actions.push({
    type: "SettleSnapshotWrite",
    writeId: e.writeId,
    use: j.verdict !== "discarded",
    verdict: j.verdict,
    counted: j.counted,
    targetUid: e.targetUid,
  });
}

/** A late apply over an edit: Git keeps the edit, a Repair is due for its target, logged and counted. */
function collide(
  s: DecisionState,
  key: string,
  w: ApplyWindow,
  edit: GuardedEdit,
  object: ObjectRef,
  actions: DecisionAction[],
): void {
  const a = s.appliers[key];
  if (!a) return;
  const t = s.targets[edit.targetUid];
  addPending(a.pending, "Repair", t?.claim === key ? t.uid : undefined);
  actions.push({
    type: "LogCollision",
    object,
    claim: a.claim,
    applier: a.applier,
    commit: w.commit,
    token: w.token,
    targetUid: edit.targetUid,
  });
}

// ---------------------------------------------------------------------------------------------
// Restart

function carriedFromStatus(targets: { uid: string; reason: string }[]): PendingReasons {
  const p = emptyPending();
  for (const t of targets) {
    // A CatchUp on the status cannot say adopt or converge: adopt is never skipped, so it is the safe reading.
    const kind: PendingKind =
      t.reason === "ForeignCommit" || t.reason === "Repair" || t.reason === "Refusal" ? t.reason : "Adopt";
    addPending(p, kind, t.uid);
  }
  return p;
}

/** What a restart makes of an operation the saved state shows out (`savedOperationFate`). */
export type SavedOperationFate = "follow" | "answered" | "giveBack";

/**
 * What a restart makes of an operation the saved state shows out, from its claim's record as the
 * restart's listing read it and whether the attempts queue still holds its attempt unfinished
 * (read before the claim, so an attempt that ended between the two reads shows its end there).
 * - `follow`: the claim records it in flight; or it records no operation in flight while the
 *   attempt is still queued: an executor records it at any moment (a Flux sidecar only once its
 *   source fetched) or ends it without a record, and reports either way. Out again: a new attempt
 *   would be refused (`OperationInFlight`) or, sent before the record, run beside it.
 * - `answered`: the claim records it Succeeded (`restoreClaim` takes its commit as applied).
 * - `giveBack`: the claim records it ended otherwise; or records another operation in flight (that
 *   one is out, and this attempt is refused if it ever runs); or records nothing of it while no
 *   queue holds it: never queued (the last owner stopped between its save and its send), or ended
 *   without a record (Stale, RequestFailed), its report read by the last owner.
 */
export function savedOperationFate(
  token: string,
  record: ClaimStatusSnapshot["operation"],
  queued: boolean,
): SavedOperationFate {
  if (record?.token === token) {
    if (!TERMINAL_PHASES.includes(record.phase)) return "follow";
    return record.phase === "Succeeded" ? "answered" : "giveBack";
  }
  if (record && !TERMINAL_PHASES.includes(record.phase)) return "giveBack";
  return queued ? "follow" : "giveBack";
}

/**
 * A start (or a move of the branch to another replica). What was saved keeps its reasons and
 * backoffs; an operation is out again when its claim records it in flight, or when its attempt is
 * still queued and the claim records no other (`savedOperationFate`), and one the claim records in
 * flight is out whatever was saved; repairPending is restored, and the next observation is a
 * baseline.
 */
export function restart(
  prev: DecisionState,
  e: Extract<DecisionEvent, { type: "Restarted" }>,
  now: number,
): DecisionState {
  const s = e.saved ? fromSaved(e.saved) : initialState(prev.branch, e.tokenPrefix);
  s.tokenPrefix = e.tokenPrefix;
  s.nextToken = 0;
  s.observed = false;
  s.flush = null;
  s.flushFailures = 0;
  s.flushNotBefore = 0;
  s.wakeAt = null;
  // A restart may have missed the end of an operation: a snapshot collected before it is stale.
  raiseEpoch(s);
  const records = new Map(e.claims.map((c) => [claimKey(c.claim), c.operation]));
  const queued = new Set(e.queued ?? []);
  for (const [key, a] of Object.entries(s.appliers)) {
    const out = a.operation;
    a.operation = null;
    // The apply windows are kept as saved: an applier's write still in the inbox is judged by the
    // new owner against the same windows, sent and ended when the last owner saw it.
    a.windows ??= [];
    if (!out) continue;
    const fate = savedOperationFate(out.token, records.get(key), queued.has(out.token));
    // Followed with what it carried and how it was sent, as the last owner knew it.
    if (fate === "follow") a.operation = { ...out, inherited: true };
    if (fate === "giveBack") giveBack(a.pending, out.carried, (kind, uid) => stillStands(s, key, kind, uid));
  }
  for (const c of e.claims) restoreClaim(s, c, now);
  for (const a of Object.values(s.appliers)) {
    const op = a.operation;
    if (op && !a.windows.some((w) => w.token === op.token))
      a.windows.push({ token: op.token, commit: op.commit, sentAt: op.sentAt, completedAt: null, edits: [] });
    // A window whose operation is not out any more ended while no owner followed it (its end
    // report never reached the last owner, and reaches this one, if at all, after the restart):
    // this owner learns of the end now, so its grace runs from now, never shorter than the last
    // owner's would have.
    for (const w of a.windows) {
      if (w.token === op?.token) w.completedAt = null;
      else if (w.completedAt === null) w.completedAt = now;
    }
  }
  return s;
}

/** Fields a state saved by an older version still carries: counters nothing read, save and checkout holds. */
const RETIRED_FIELDS = ["epoch", "collisions", "saves", "dirty"] as const;

/**
 * A saved state as this version keeps it: a pending write saved under its old `writeId` is read by
 * that id (the same inbox entry id), and retired fields are dropped.
 */
function fromSaved(saved: DecisionState): DecisionState {
  const s = copy(saved) as DecisionState & Partial<Record<(typeof RETIRED_FIELDS)[number], unknown>>;
  for (const f of RETIRED_FIELDS) delete s[f];
  s.unpublished = s.unpublished.map((w) => {
    const old = w as PendingWrite & { writeId?: string };
    if (old.entryId !== undefined || old.writeId === undefined) return w;
    const { writeId, ...rest } = old;
    return { ...rest, entryId: writeId };
  });
  return s;
}

function restoreClaim(s: DecisionState, c: ClaimStatusSnapshot, now: number): void {
  const key = claimKey(c.claim);
  const a = s.appliers[key] ?? newApplier(c.claim, c.applier, c.source);
  s.appliers[key] = a;
  const op = c.operation;
  if (op?.phase === "Succeeded") a.lastAppliedCommit = op.commit;
  if (c.lastAppliedCommit) a.lastAppliedCommit = c.lastAppliedCommit;
  a.repairRecorded = c.repairPending === true;
  if (c.repairPending) addPending(a.pending, "Repair");
  if (!op || TERMINAL_PHASES.includes(op.phase)) return;
  // Followed from the saved state (`savedOperationFate`): at the phase its claim records.
  if (a.operation?.token === op.token) {
    a.operation.phase = op.phase;
    return;
  }
  // Its window as saved (sent when the last owner sent it, with the edits it guards), else one
  // opened when the executor recorded it (before any write of the apply), else now.
  const saved = a.windows.find((w) => w.token === op.token);
  const requested = op.requestedAt === undefined ? Number.NaN : Date.parse(op.requestedAt);
  const sentAt = saved?.sentAt ?? (Number.isFinite(requested) && requested <= now ? requested : now);
  a.operation = {
    token: op.token,
    commit: op.commit,
    sentAt,
    phase: op.phase,
    carried: carriedFromStatus(op.targets),
    inherited: true,
  };
  if (!saved) a.windows.push({ token: op.token, commit: op.commit, sentAt, completedAt: null, edits: [] });
}

/**
 * How long an operation this owner sent is out before a check reads its attempt and its claim: its
 * executor's first report comes within milliseconds of taking it, and an attempt still waiting
 * for an executor shows as queued.
 */
export const ATTEMPT_CHECK_AFTER_MS = 15_000;

/**
 * The operations out a check reads (`readClaims`): one an earlier owner sent, whose end report may
 * have reached that owner only, and one this owner sent at least `ATTEMPT_CHECK_AFTER_MS` ago.
 */
export function operationsToCheck(s: DecisionState, now: number): { kind: ApplierKind; token: string }[] {
  const out: { kind: ApplierKind; token: string }[] = [];
  for (const a of Object.values(s.appliers)) {
    const op = a.operation;
    if (op && (op.inherited || now - op.sentAt >= ATTEMPT_CHECK_AFTER_MS))
      out.push({ kind: a.applier.kind, token: op.token });
  }
  return out;
}

/**
 * The claims' status read again, with which attempts the attempts queues still hold unfinished
 * (read before the claims), for the operations out a check reads (`operationsToCheck`). Every
 * attempt sent ends, whatever was lost on the way:
 * - **An end report lost.** The last owner read it from the inbox and stopped before its state was
 *   saved, the restart's listing read the claim from a cache a moment behind the end, or the
 *   report never left its sidecar. The claim's record ends the operation as its report would
 *   have: a record showing it ended at two checks in a row (none between showing it otherwise),
 *   with no report between. The first sighting waits for the report, which says more (a reason, a
 *   revision mismatch) and is normally there within milliseconds.
 * - **The attempt lost.** No queue holds it unfinished and its claim records nothing of it, at two
 *   checks in a row: it was refused or dropped without a report (its job's mark or the stalled
 *   check answered into a connection Redis closed, seed 49061), and nothing will ever report it.
 *   It ends RequestFailed (`AttemptLost`), which gives its reasons back. `queued` absent: nothing
 *   is known of the queues, and no attempt is taken for lost.
 * A record in flight moves an operation no executor reported on yet out of `Sent`.
 */
export function readClaims(
  s: DecisionState,
  claims: ClaimStatusSnapshot[],
  queued: string[] | undefined,
  now: number,
  actions: DecisionAction[],
): void {
  const checked = new Set(operationsToCheck(s, now).map((o) => o.token));
  for (const c of claims) {
    const a = s.appliers[claimKey(c.claim)];
    const op = a?.operation;
    const rec = c.operation;
    if (!a || !op || !checked.has(op.token)) continue;
    if (rec?.token !== op.token) {
      delete op.recordedEnd;
      if (queued === undefined || queued.includes(op.token)) delete op.missing;
      else if (!op.missing) op.missing = true;
      else {
        settleReport(
          s,
          {
            token: op.token,
            claim: a.claim,
            phase: "RequestFailed",
            reason: StatusReason.AttemptLost,
            message: "no queue held the attempt and its claim recorded nothing of it, at two checks in a row",
          },
          now,
        );
        actions.push({
          type: "LogAttemptLost",
          claim: a.claim,
          applier: a.applier,
          token: op.token,
          commit: op.commit,
        });
      }
      continue;
    }
    delete op.missing;
    if (rec.phase !== "Succeeded" && rec.phase !== "Failed" && rec.phase !== "Superseded") {
      delete op.recordedEnd;
      if (op.phase === "Sent" && !TERMINAL_PHASES.includes(rec.phase)) op.phase = rec.phase;
      continue;
    }
    if (op.recordedEnd !== rec.phase) {
      op.recordedEnd = rec.phase;
      continue;
    }
    settleReport(s, { token: op.token, claim: a.claim, phase: rec.phase, commit: rec.commit }, now);
  }
}

// ---------------------------------------------------------------------------------------------
// End of every step

/**
 * At the end of every step: trailing refusals whose minute is up, windows past their grace, a
 * converge of the commit an applier last applied answered without an apply, the flush when an
 * applier is due and nothing holds it, repairPending written through, and the next wake.
 */
function finish(s: DecisionState, now: number, actions: DecisionAction[]): StepResult {
  for (const t of Object.values(s.targets)) {
    if (!trailingRefusalDue(t, now)) continue;
    const a = t.claim && consentsToRefusal(t) ? s.appliers[t.claim] : undefined;
    if (a) addPending(a.pending, "Refusal", t.uid);
  }
  for (const a of Object.values(s.appliers)) {
    a.windows = a.windows.filter((w) => windowKept(w, now));
    answerConvergeAtLastApplied(s, a);
  }
  maybeFlush(s, now, actions);
  askRecollections(s, now, actions);
  for (const a of Object.values(s.appliers)) {
    const want =
      kindsPending(a.pending).includes("Repair") ||
      kindsPending(a.operation?.carried ?? emptyPending()).includes("Repair");
    if (want !== a.repairRecorded) {
      a.repairRecorded = want;
      actions.push({ type: "RecordRepairPending", claim: a.claim, pending: want });
    }
  }
  recordGates(s, now, actions);
  for (const a of Object.values(s.appliers)) {
    if (a.reconcileHandled === undefined || a.reconcileHandled === a.reconcileRecorded) continue;
    a.reconcileRecorded = a.reconcileHandled;
    actions.push({ type: "RecordReconcileHandled", claim: a.claim, requestedAt: a.reconcileHandled });
  }
  recordRetries(s, now, actions);
  scheduleWake(s, now, actions);
  return { state: s, actions };
}

/**
 * What each claim waits for before its next attempt (`retryView`), written through when it
 * changes; nothing for a claim that never waited.
 */
function recordRetries(s: DecisionState, now: number, actions: DecisionAction[]): void {
  for (const a of Object.values(s.appliers)) {
    const view = retryView(s, a, now);
    const json = JSON.stringify(view);
    if (json === (a.retryRecorded ?? "null")) continue;
    a.retryRecorded = json;
    actions.push({ type: "RecordRetry", claim: a.claim, retry: view });
  }
}

/**
 * A GitTarget whose snapshots were discarded is collected again once Git is no longer ahead (after
 * the apply), or once its hold's bound passed (that snapshot is then used whatever it says).
 */
function askRecollections(s: DecisionState, now: number, actions: DecisionAction[]): void {
  const ahead = isGitAhead(s);
  for (const t of Object.values(s.targets)) {
    if (!t.snapshots || !recollectDue(t.snapshots, { gitAhead: ahead, covered: !!t.watch }, now)) continue;
    t.snapshots.recollectAskedAt = now;
    actions.push({
      type: "Recollect",
      target: { uid: t.uid, namespace: t.namespace, name: t.name },
      bound: ahead,
    });
  }
}

/** What each claim shows of governance, written through when it changes (never for a claim without any). */
function recordGates(s: DecisionState, now: number, actions: DecisionAction[]): void {
  for (const [key, a] of Object.entries(s.appliers)) {
    const named = targetsNaming(s, key);
    if (named.length === 0) continue;
    const gate = claimGate(s.tip, a, named, now);
    if (gate === null) continue;
    const json = JSON.stringify(gate);
    if (json === a.gateRecorded) continue;
    const silent = a.gateRecorded === undefined && gate.condition === null && gate.overrideUsed === undefined;
    a.gateRecorded = json;
    if (!silent) actions.push({ type: "RecordGate", claim: a.claim, gate });
  }
}

/** A converge alone, of the commit the applier last applied, asks nothing and is answered. */
export function answerConvergeAtLastApplied(s: DecisionState, a: ApplierState): void {
  if (a.operation !== null || s.tip === null || a.lastAppliedCommit !== s.tip) return;
  const kinds = kindsPending(a.pending);
  if (kinds.length > 0 && kinds.every((k) => k === "Converge")) dropKind(a.pending, "Converge");
}

/**
 * Starts a flush when an applier is due and nothing holds the apply: the first observation seen,
 * a commit on the branch, no flush in progress or backing off, no save in progress, a clean checkout.
 */
export function maybeFlush(s: DecisionState, now: number, actions: DecisionAction[]): void {
  if (branchHold(s, now) !== null) return;
  if (dueAppliers(s, now).length === 0) return;
  s.nextFlushId += 1;
  s.flush = { id: s.nextFlushId, startedAt: now };
  actions.push({ type: "Flush", flush: s.flush.id });
}

function scheduleWake(s: DecisionState, now: number, actions: DecisionAction[]): void {
  const times: number[] = [];
  for (const a of Object.values(s.appliers)) {
    if (hasPending(a.pending) && a.notBefore > now) times.push(a.notBefore);
    for (const w of a.windows) {
      const closes = windowClosesAt(w);
      if (closes !== null && closes > now) times.push(closes);
    }
  }
  for (const key of Object.keys(s.appliers)) {
    const named = targetsNaming(s, key);
    if (
      !named.some(
        (t) => (t.governance?.changeWindows.length ?? 0) > 0 || (t.governance?.syncWindows?.length ?? 0) > 0,
      )
    )
      continue;
    const at = governanceWakeAt(named, now);
    if (at !== null) times.push(at);
  }
  for (const t of Object.values(s.targets)) if (t.trailingRefusalAt !== null) times.push(t.trailingRefusalAt);
  for (const t of Object.values(s.targets)) {
    const ends = holdEndsAt(t.snapshots, !!t.watch, now);
    if (ends !== null) times.push(ends);
  }
  if (s.flush === null && s.flushNotBefore > now) times.push(s.flushNotBefore);
  const at = times.length === 0 ? null : Math.min(...times);
  if (at !== null && at !== s.wakeAt) actions.push({ type: "ScheduleWake", at });
  s.wakeAt = at;
}
