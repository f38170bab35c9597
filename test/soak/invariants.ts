/**
 * The promises users care about, checked over what a soak run recorded by watching the cluster,
 * Git and the queues (never the product's own logs). Pure: a record in, violations out, so each
 * checker is tested on records made by hand.
 */
import { TERMINAL_PHASES } from "../../queue/contract.js";
import type { DemoApp } from "../playground/demo.js";

/**
 * "finished": the run ended within its bound; "quiescent": the run was quiet (every write
 * published, every attempt seen sent ended, the cluster on Git's values) within the quiescence
 * wait. Both judged by the run itself, not by checkRun. "unhandled": a promise rejection nobody
 * handled during the run, which ends a product process in production (Node's default); the soak
 * records it with its stack instead of dying.
 */
export type Invariant =
  | "converged"
  | "no-revert"
  | "commits-explained"
  | "operations"
  | "nothing-lost"
  | "finished"
  | "quiescent"
  | "unhandled";

export interface Violation {
  invariant: Invariant;
  detail: string;
}

/** An API edit as the run made it: on the cluster first, then reported through the intake. */
export interface EditRecord {
  app: DemoApp;
  value: string;
  /** When the cluster answered the edit (ms since the epoch). */
  at: number;
  save: boolean;
  /** The intake's HTTP status (202 accepted). */
  status: number;
  /** The commit message the write carries. */
  message: string;
  /** The intake's id of the write, when accepted. */
  id?: string;
  /** When the gateway answered the write (it was in Redis, the inbox, by then). */
  acceptedAt?: number;
}

/** A foreign push that landed. */
export interface PushRecord {
  app: DemoApp;
  value: string;
  at: number;
  commit: string;
  subject: string;
}

/** One value the cluster showed, from the watch, in order. */
export interface ClusterSample {
  at: number;
  value: string | undefined;
  manager?: string | undefined;
}

/** A commit on the branch after the run's start, first parent first, with what each app's file holds. */
export interface CommitRecord {
  sha: string;
  subject: string;
  values: Record<DemoApp, string | undefined>;
  /** What each app's other key (`note`) holds at that commit. */
  notes?: Record<DemoApp, string | undefined>;
  /** The ids of the writes the commit carries (its `Applygate-Write` trailers). */
  writeIds?: string[];
}

/** A write the watch plane handed to an inbox (`Mirror.sent`), as a `--mirror` run records it. */
export interface HandedWrite {
  id: string;
  /** The demo app whose object it writes (undefined: another object, the webhook folder's). */
  app: DemoApp | undefined;
  /** When the mirror had it in the inbox (ms since the epoch). */
  at: number;
  /** Marked as the applier's own write (the decision core judges it against the apply window). */
  applier: boolean;
  /** Part of a snapshot (the worker may discard it while Git is ahead). */
  snapshot: boolean;
  /** The greeting it sets (differing from its base, or with no base: a snapshot's). */
  greeting?: string | undefined;
  /** The note it sets, likewise. */
  note?: string | undefined;
}

/** An applier of the run: one of the demo apps, or the webhook applier of the third folder. */
export type Applier = DemoApp | "webhook";

export interface OperationRecord {
  token: string;
  app: Applier;
  commit: string;
  /** When the worker sent the attempt (ms since the epoch). */
  sentAt: number;
  reasons: string[];
  /** Phases as reported, repeats included, in arrival order (`at`: when the sidecar reported it). */
  phases: Array<{ phase: string; at: number }>;
  /** The attempt carried the edit recheck (false past a chain's restale budget). */
  rechecksEdits?: boolean;
}

/** An API edit of the other key (`note`): its write carries the greeting the cluster held then. */
export interface NoteRecord extends EditRecord {
  greeting: string | undefined;
}

/** An edit on the cluster the mirror refused (never meant for Git). */
export interface RefusalRecord {
  app: DemoApp;
  value: string;
  at: number;
  status: number;
}

export interface RunRecord {
  /**
   * A run whose edits only the watch plane reported (`--mirror`): every write it handed. The edits
   * and notes then carry the id and acceptance time of the write that handed their value, and
   * status 202 only once one did.
   */
  mirror?: { handed: HandedWrite[] };
  startValues: Record<DemoApp, string | undefined>;
  edits: EditRecord[];
  /** Edits of the other key; they count as writes of the run, not as greeting values. */
  notes: NoteRecord[];
  refusals: RefusalRecord[];
  pushes: PushRecord[];
  cluster: Record<DemoApp, ClusterSample[]>;
  commits: CommitRecord[];
  final: { cluster: Record<DemoApp, string | undefined>; git: Record<DemoApp, string | undefined> };
  operations: OperationRecord[];
  /** When the run stopped watching the cluster (ms since the epoch). */
  endedAt?: number;
  /**
   * A run with pushes of the webhook applier's folder (`--webhook`): the pushes that landed, and
   * the greeting of that folder's ConfigMap on the cluster and at the Git tip at the end.
   */
  webhook?: {
    pushes: Array<{ value: string; at: number; commit: string; subject: string }>;
    final: { cluster: string | undefined; git: string | undefined };
  };
}

/** A revert seen on the cluster: an API edit's value replaced by an older one. */
export interface Revert {
  app: DemoApp;
  from: string;
  to: string | undefined;
  at: number;
  /**
   * How long the older value stayed (until the cluster held `from` or something newer again; to
   * the run's end when it never did).
   */
  lastedMs: number;
  /** The cluster held the edit's value (or a newer one) again before the run ended. */
  undone: boolean;
  /** Why the design cannot prevent it (see `residueOf`); undefined: a violation. */
  residue?: Residue;
  /** When the edit was made and when the gateway acknowledged its write. */
  edit: { at: number; acceptedAt?: number };
  /** The operation of this applier out when the older value came, whose commit holds that value. */
  by?: {
    token: string;
    commit: string;
    sentAt: number;
    requestedAt?: number;
    runningAt?: number;
    endedAt?: number;
    rechecksEdits?: boolean;
  };
  /**
   * The next operation of this applier sent after `by` ended (the one that puts the edit back, a
   * Repair): when it was sent and when the applier started it, and its reasons.
   */
  repair?: { token: string; sentAt: number; runningAt?: number; reasons: string[] };
}

/** The two reverts the design accepts (docs/design/decisions.md, "The revert the design accepts"). */
export type Residue = "after-last-look" | "past-restale-budget";

const APPS: readonly DemoApp[] = ["flux", "argocd"];
/**
 * How much later than the sidecar's end report the run's own watch may see the apply's last
 * write (a loaded machine delays watch events): a value seen later is no longer that apply's.
 */
export const WATCH_LAG_MS = 2_000;
const TERMINAL = new Set<string>(TERMINAL_PHASES);
/** Phases that mean the applier was asked to apply (an attempt that started nothing has none). */
const STARTED = new Set([
  "Requested",
  "Running",
  "Settling",
  "Unresolved",
  "Succeeded",
  "Failed",
  "Superseded",
]);

export function checkRun(r: RunRecord): { violations: Violation[]; reverts: Revert[] } {
  const reverts = findReverts(r);
  return {
    reverts,
    violations: [
      ...converged(r),
      ...reverts
        .filter((v) => !v.residue)
        .map((v) => ({
          invariant: "no-revert" as const,
          detail: `${v.app}: ${v.from} → ${v.to ?? "(none)"} at ${new Date(v.at).toISOString()} for ${v.lastedMs} ms${
            v.undone ? "" : ", never undone"
          } (${v.by ? `by the apply of ${v.by.commit.slice(0, 8)}, ${v.by.token}` : "by no apply out"})`,
        })),
      ...commitsExplained(r),
      ...operations(r),
      ...nothingLost(r),
    ],
  };
}

/** 1. At the end every held folder on the cluster equals the Git tip. */
export function converged(r: RunRecord): Violation[] {
  const out: Violation[] = APPS.filter((app) => r.final.cluster[app] !== r.final.git[app]).map((app) => ({
    invariant: "converged",
    detail: `${app}: the cluster holds ${r.final.cluster[app]}, Git ${r.final.git[app]}`,
  }));
  const hook = r.webhook?.final;
  if (hook && hook.cluster !== hook.git)
    out.push({
      invariant: "converged",
      detail: `webhook: the cluster holds ${hook.cluster}, Git ${hook.git}`,
    });
  return out;
}

/**
 * The order of values, as Git settled it: a value's rank is the first commit holding it. A value
 * that never reached Git (an edit a later one of the same window replaced) ranks just below the
 * next edit of its app that did; the start value ranks below everything.
 */
export function ranks(r: RunRecord, app: DemoApp): Map<string, number> {
  const rank = new Map<string, number>();
  const start = r.startValues[app];
  if (start !== undefined) rank.set(start, -1);
  r.commits.forEach((c, i) => {
    const v = c.values[app];
    if (v !== undefined && !rank.has(v)) rank.set(v, i);
  });
  const edits = r.edits.filter((e) => e.app === app).sort((a, b) => a.at - b.at);
  let next = r.commits.length;
  for (let i = edits.length - 1; i >= 0; i--) {
    const e = edits[i] as EditRecord;
    const known = rank.get(e.value);
    if (known !== undefined) next = known;
    else rank.set(e.value, next - 0.5 + i / 1e6);
  }
  return rank;
}

/**
 * 2. Once an API edit's value was on the cluster, the cluster never went back to an older value,
 * unless a later foreign push set it (a later push ranks higher, so it is no step back).
 */
export function findReverts(r: RunRecord): Revert[] {
  const out: Revert[] = [];
  // With the watch plane, an edit it never handed (a later edit replaced it before its watch saw
  // it, or it came and went while the mirror was down) was never the gateway's: only handed ones count.
  const edited = new Set(
    r.edits.filter((e) => !r.mirror || e.status === 202).map((e) => `${e.app}/${e.value}`),
  );
  for (const app of APPS) {
    const rank = ranks(r, app);
    const samples = r.cluster[app];
    for (let i = 1; i < samples.length; i++) {
      const prev = samples[i - 1] as ClusterSample;
      const cur = samples[i] as ClusterSample;
      if (prev.value === undefined || !edited.has(`${app}/${prev.value}`)) continue;
      const was = rank.get(prev.value) ?? Number.POSITIVE_INFINITY;
      const now = cur.value === undefined ? -2 : (rank.get(cur.value) ?? Number.POSITIVE_INFINITY);
      if (now >= was) continue;
      // The cluster took a newer API edit: no step back, whatever order its writes reached Git in
      // (the report of an edit the gateway answered 503 is sent again after the next edit's).
      const prevEdit = r.edits.find((e) => e.app === app && e.value === prev.value);
      const curEdit = r.edits.find((e) => e.app === app && e.value === cur.value);
      if (prevEdit && curEdit && curEdit.at >= prevEdit.at && cur.at >= curEdit.at) continue;
      const back = samples
        .slice(i + 1)
        .find((s) => s.value !== undefined && (rank.get(s.value) ?? Number.POSITIVE_INFINITY) >= was);
      const edit = r.edits.find((e) => e.app === app && e.value === prev.value) as EditRecord;
      const by = byOperation(r, app, cur);
      const v: Revert = {
        app,
        from: prev.value,
        to: cur.value,
        at: cur.at,
        lastedMs: (back?.at ?? r.endedAt ?? cur.at) - cur.at,
        undone: back !== undefined,
        edit: { at: edit.at, ...(edit.acceptedAt !== undefined ? { acceptedAt: edit.acceptedAt } : {}) },
        ...by,
        ...repairOf(r, app, by.by?.endedAt, back?.at),
      };
      const residue = residueOf(v);
      out.push(residue ? { ...v, residue } : v);
    }
  }
  return out;
}

/**
 * A revert the design cannot prevent, or undefined. All of: the older value is the apply of an
 * operation of this applier (its commit holds that value, the value came while it was out), the
 * edit was put back before the run ended (the Repair), and the apply could not have known of the
 * edit — its write reached the gateway after the sidecar's last look before the write that starts
 * the apply began (the Requested report is stamped just before that read: a write acknowledged
 * earlier was in the inbox the recheck reads, so it ends the attempt Stale), or the attempt
 * carried no recheck at all (sent past its chain's restale budget). Anything else is a real
 * revert: a violation.
 */
export function residueOf(v: Revert): Residue | undefined {
  const by = v.by;
  if (!by || !v.undone) return undefined;
  if (by.endedAt !== undefined && v.at > by.endedAt + WATCH_LAG_MS) return undefined;
  if (by.rechecksEdits === false) return "past-restale-budget";
  const lastLook = by.requestedAt;
  if (lastLook === undefined || v.edit.acceptedAt === undefined) return undefined;
  return v.edit.acceptedAt >= lastLook ? "after-last-look" : undefined;
}

/** The operation out at the sample's time whose commit holds the sample's value (that apply wrote it). */
function byOperation(r: RunRecord, app: DemoApp, sample: ClusterSample): Pick<Revert, "by"> {
  // A commit from before the run (the tip it started at) holds the start value.
  const valueAt = (commit: string) => {
    const c = r.commits.find((c) => c.sha === commit);
    return c ? c.values[app] : r.startValues[app];
  };
  const at = (o: OperationRecord, phase: string) => o.phases.find((p) => p.phase === phase)?.at;
  const ended = (o: OperationRecord) => o.phases.find((p) => TERMINAL.has(p.phase))?.at;
  const o = r.operations
    .filter(
      (o) =>
        o.app === app &&
        o.sentAt <= sample.at &&
        (ended(o) ?? Number.POSITIVE_INFINITY) + WATCH_LAG_MS >= sample.at,
    )
    .filter((o) => valueAt(o.commit) === sample.value)
    // The one still out at the sample first (an ended one only for a lagging watch), the latest sent.
    .sort(
      (x, y) =>
        Number((ended(x) ?? Number.POSITIVE_INFINITY) < sample.at) -
          Number((ended(y) ?? Number.POSITIVE_INFINITY) < sample.at) || y.sentAt - x.sentAt,
    )[0];
  if (!o) return {};
  const requestedAt = at(o, "Requested");
  const runningAt = at(o, "Running");
  const endedAt = ended(o);
  return {
    by: {
      token: o.token,
      commit: o.commit,
      sentAt: o.sentAt,
      ...(requestedAt !== undefined ? { requestedAt } : {}),
      ...(runningAt !== undefined ? { runningAt } : {}),
      ...(endedAt !== undefined ? { endedAt } : {}),
      ...(o.rechecksEdits !== undefined ? { rechecksEdits: o.rechecksEdits } : {}),
    },
  };
}

/**
 * The first operation of the applier sent once `endedAt` had passed: the one after the overwrite.
 * It is the Repair only while the older value still stood: one sent after the cluster held the
 * edit's value again (`undoneAt`) repaired nothing, and its delay says nothing of the Repair's.
 */
function repairOf(
  r: RunRecord,
  app: DemoApp,
  endedAt: number | undefined,
  undoneAt: number | undefined,
): Pick<Revert, "repair"> {
  if (endedAt === undefined) return {};
  const next = r.operations
    .filter((o) => o.app === app && o.sentAt >= endedAt)
    .sort((x, y) => x.sentAt - y.sentAt)[0];
  if (!next || (undoneAt !== undefined && next.sentAt > undoneAt)) return {};
  const runningAt = next.phases.find((p) => p.phase === "Running")?.at;
  return {
    repair: {
      token: next.token,
      sentAt: next.sentAt,
      ...(runningAt !== undefined ? { runningAt } : {}),
      reasons: next.reasons,
    },
  };
}

/**
 * How long after the overwriting operation's end the Repair was sent and started (Running), in
 * ms; undefined for a revert without both.
 */
export function repairDelay(v: Revert): { sentMs: number; runningMs?: number } | undefined {
  const ended = v.by?.endedAt;
  if (ended === undefined || !v.repair) return undefined;
  return {
    sentMs: v.repair.sentAt - ended,
    ...(v.repair.runningAt !== undefined ? { runningMs: v.repair.runningAt - ended } : {}),
  };
}

/**
 * 3. Git gained exactly the commits the run explains: one per foreign push, and otherwise only
 * commits carrying the run's own writes — a save's commit holds that save's value — and never
 * more of them than writes accepted. No commit of an applier's echo.
 */
export function commitsExplained(r: RunRecord): Violation[] {
  if (r.mirror) return mirroredCommitsExplained(r, r.mirror.handed);
  const out: Violation[] = [];
  const pushes = [...r.pushes, ...(r.webhook?.pushes ?? [])];
  const pushed = new Set(pushes.map((p) => p.commit));
  const accepted = [...r.edits, ...r.notes].filter((e) => e.status === 202);
  const messages = new Map(accepted.map((e) => [e.message, e]));
  let mine = 0;
  for (const c of r.commits) {
    if (pushed.has(c.sha)) continue;
    mine++;
    const edit = messages.get(c.subject);
    if (!edit) {
      out.push({
        invariant: "commits-explained",
        detail: `commit ${c.sha.slice(0, 8)} "${c.subject}" carries no write of the run`,
      });
    } else if (edit.save && "greeting" in edit) {
      // A note's write carries the greeting the cluster showed; only its note is its own.
    } else if (edit.save && c.values[edit.app] !== edit.value) {
      out.push({
        invariant: "commits-explained",
        detail: `the save of ${edit.app} = ${edit.value} was committed (${c.sha.slice(0, 8)}) holding ${c.values[edit.app]}`,
      });
    }
  }
  const missingPushes = pushes.filter((p) => !r.commits.some((c) => c.sha === p.commit));
  for (const p of missingPushes)
    out.push({
      invariant: "commits-explained",
      detail: `the foreign push ${p.commit.slice(0, 8)} is not on the branch`,
    });
  if (mine > accepted.length)
    out.push({
      invariant: "commits-explained",
      detail: `${mine} commits of writes for ${accepted.length} writes accepted`,
    });
  return out;
}

/**
 * 3, for a run whose edits the watch plane reported. The mirror has no save: its edits join the
 * open commit window, and each closed window is one commit. So every commit is a foreign push of
 * the run or carries (by its write trailers) a write the mirror handed that is not the applier's
 * own; no write is carried by two commits (one commit per closed window); and there are no more
 * write commits than edits handed. A commit carrying only the applier's writes is its echo.
 */
function mirroredCommitsExplained(r: RunRecord, handed: HandedWrite[]): Violation[] {
  const out: Violation[] = [];
  const pushes = [...r.pushes, ...(r.webhook?.pushes ?? [])];
  const pushed = new Set(pushes.map((p) => p.commit));
  const byId = new Map(handed.map((h) => [h.id, h]));
  const carriedBy = new Map<string, string>();
  let mine = 0;
  for (const c of r.commits) {
    if (pushed.has(c.sha)) continue;
    mine++;
    const carried = (c.writeIds ?? []).map((id) => byId.get(id)).filter((h) => h !== undefined);
    if (carried.length === 0)
      out.push({
        invariant: "commits-explained",
        detail: `commit ${c.sha.slice(0, 8)} "${c.subject}" carries no write the mirror handed`,
      });
    else if (carried.every((h) => h.applier))
      out.push({
        invariant: "commits-explained",
        detail: `commit ${c.sha.slice(0, 8)} "${c.subject}" carries only the applier's own writes (an echo)`,
      });
    for (const h of carried) {
      const earlier = carriedBy.get(h.id);
      if (earlier)
        out.push({
          invariant: "commits-explained",
          detail: `the write ${h.id} is carried by two commits (${earlier.slice(0, 8)}, ${c.sha.slice(0, 8)})`,
        });
      else carriedBy.set(h.id, c.sha);
    }
  }
  for (const p of pushes.filter((p) => !r.commits.some((c) => c.sha === p.commit)))
    out.push({
      invariant: "commits-explained",
      detail: `the foreign push ${p.commit.slice(0, 8)} is not on the branch`,
    });
  const edits = handed.filter((h) => !h.applier).length;
  if (mine > edits)
    out.push({
      invariant: "commits-explained",
      detail: `${mine} commits of writes for ${edits} edits the mirror handed`,
    });
  return out;
}

/**
 * 4. Every apply operation ends with exactly one terminal report, and one applier never runs two
 * operations at once.
 */
export function operations(r: RunRecord): Violation[] {
  const out: Violation[] = [];
  for (const o of r.operations) {
    const ends = [...new Set(o.phases.filter((p) => TERMINAL.has(p.phase)).map((p) => p.phase))];
    if (ends.length !== 1)
      out.push({
        invariant: "operations",
        detail: `${o.app} operation ${o.token} for ${o.commit.slice(0, 8)} ended ${ends.length ? ends.join(" and ") : "never"}`,
      });
  }
  for (const app of [...APPS, "webhook" as const]) {
    const spans = r.operations
      .filter((o) => o.app === app && o.phases.some((p) => STARTED.has(p.phase)))
      .map((o) => ({
        o,
        from: Math.min(...o.phases.filter((p) => STARTED.has(p.phase)).map((p) => p.at)),
        to: o.phases.find((p) => TERMINAL.has(p.phase))?.at ?? Number.POSITIVE_INFINITY,
      }))
      .sort((a, b) => a.from - b.from);
    for (let i = 1; i < spans.length; i++) {
      const a = spans[i - 1] as (typeof spans)[number];
      const b = spans[i] as (typeof spans)[number];
      if (b.from < a.to)
        out.push({
          invariant: "operations",
          detail: `${app}: operation ${b.o.token} started before ${a.o.token} ended`,
        });
    }
  }
  return out;
}

/**
 * 5. Every write the gateway accepted is in some commit. A write that joined a commit window may
 * be replaced there by a later write of its app; a save never is.
 */
export function nothingLost(r: RunRecord): Violation[] {
  const out: Violation[] = [];
  for (const app of APPS) {
    const inGit = new Set(r.commits.map((c) => c.values[app]));
    const edits = r.edits.filter((e) => e.app === app && e.status === 202).sort((a, b) => a.at - b.at);
    edits.forEach((e, i) => {
      if (inGit.has(e.value)) return;
      const replaced = !e.save && edits.slice(i + 1).some((later) => inGit.has(later.value));
      if (!replaced)
        out.push({
          invariant: "nothing-lost",
          detail: `${app} = ${e.value}${e.save ? " (save)" : ""} is in no commit`,
        });
    });
  }
  // A saved note is never replaced within its window: some commit holds its value. One that joined
  // a window (the watch plane's) may be replaced there by a later note of its app.
  for (const app of APPS) {
    const notes = r.notes.filter((e) => e.app === app && e.status === 202).sort((a, b) => a.at - b.at);
    const inGit = (v: string) => r.commits.some((c) => c.notes?.[app] === v);
    notes.forEach((n, i) => {
      if (inGit(n.value)) return;
      if (!n.save && notes.slice(i + 1).some((later) => inGit(later.value))) return;
      out.push({
        invariant: "nothing-lost",
        detail: `${app} note = ${n.value}${n.save ? " (save)" : ""} is in no commit`,
      });
    });
  }
  return out;
}
