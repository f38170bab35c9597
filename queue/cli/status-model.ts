/**
 * `applygate status` as data (pure): per GitTarget and the claim it names, what the cluster shows
 * and what the branch worker's decisions say, explained by the decision core itself
 * (`explainBranch`: the same rules the worker runs). Names of GitTargets and claims outside the
 * namespaces the reader asked for are left out of the explanations: a branch's decisions span
 * tenants, what one may see of another is only that something else holds its applier.
 */
import type { Reason } from "../contract.js";
import {
  type ApplierExplanation,
  type BarrierGap,
  type BranchExplanation,
  explainBranch,
  type PendingKind,
  type RetryView,
  retryMessage,
  type TargetExplanation,
  type Waiting,
} from "../decide/index.js";
import { compareEntryIds } from "../worker/inbox.js";
import { type BranchView, type ClusterView, type DecisionsView, targetClaimKey } from "./status-read.js";

export interface ConditionView {
  type: string;
  status: string;
  reason?: string;
  message?: string;
}

export interface OperationView {
  token: string;
  commit: string;
  /** The reasons it was started for, one per GitTarget. */
  reasons: string[];
  phase: string;
  requestedAt?: string;
  completedAt?: string;
  /** Seconds since it was requested. */
  ageSeconds?: number;
  outcome?: string;
  message?: string;
  /** The claim's current operation (`status.operation`), not one of its history. */
  current: boolean;
}

export interface ClaimView {
  key: string;
  kind: string;
  namespace: string;
  name: string;
  /** Why it could not be read (absent when it was). */
  error?: string;
  conditions: ConditionView[];
  lastAppliedCommit?: string;
}

export type ApplierStateName = ApplierExplanation["state"] | "unknown";

export interface TargetStatus {
  namespace: string;
  name: string;
  uid?: string;
  branch: string;
  path: string;
  provider: string;
  suspended: boolean;
  conditions: ConditionView[];
  publication?: Record<string, unknown>;
  claim: ClaimView | null;
  /** Where the decisions came from: "read", or why they are not shown. */
  decisions: string;
  branchKey?: string;
  tip?: string | null;
  /** Writes not yet published: decided into commits, and still in the open commit window (or unread). */
  pendingWrites?: { decided: number; inCommitWindow: number };
  /** The branch's intake gate: paused (new writes refused until a push lands), the budget charged. */
  intake?: BranchView["intake"];
  /** Every kind pending for its applier, highest precedence first. */
  pending?: PendingKind[];
  /** The reason this GitTarget would carry in its applier's next attempt. */
  reason?: Reason;
  state: ApplierStateName;
  /** One line: why its applier gets no attempt now. */
  why: string;
  /** The decision core's answer, with the names of other namespaces left out. */
  waiting?: Waiting | null;
  /** What its claim waits for before the next attempt (as its Retrying condition says), or null. */
  retry?: RetryView | null;
  barrier?: BarrierGap | null;
  /** Its snapshots are held while Git is ahead, since then (RFC 3339). */
  snapshotsHeldSince?: string;
  operations: OperationView[];
  /** The branch's inbox: entries the worker has not settled, by kind. */
  queue?: { depth: number; byKind: Record<string, number>; truncated: boolean };
}

export interface StatusReport {
  at: string;
  scope: string[] | "all";
  targets: TargetStatus[];
}

const iso = (t: number) => new Date(t).toISOString();
const short = (sha: string | null | undefined) => (sha ? sha.slice(0, 12) : "none");

/** A duration as kubectl prints ages: 42s, 5m, 3h, 2d. */
export function age(seconds: number): string {
  const s = Math.max(0, Math.floor(seconds));
  if (s < 120) return `${s}s`;
  if (s < 7_200) return `${Math.floor(s / 60)}m`;
  if (s < 172_800) return `${Math.floor(s / 3_600)}h`;
  return `${Math.floor(s / 86_400)}d`;
}

const inTime = (t: number, now: number) => (t > now ? `in ${age((t - now) / 1000)}` : "now");

/** Whether a `namespace/…` or `Kind/namespace/…` name may be shown to a reader of `scope`. */
function visible(scope: string[] | "all", namespace: string): boolean {
  return scope === "all" || scope.includes(namespace);
}

const claimNamespace = (key: string) => key.split("/")[1] ?? "";

/** The explanation with the names of other namespaces left out. */
export function redact(w: Waiting | null, scope: string[] | "all"): Waiting | null {
  if (w === null) return null;
  const other = "(another namespace)";
  switch (w.hold) {
    case "source busy":
      return visible(scope, claimNamespace(w.by)) ? w : { ...w, by: other, token: "" };
    case "turn":
      return visible(scope, claimNamespace(w.of)) ? w : { ...w, of: other };
    case "suspended":
      return { ...w, targets: w.targets.map((t) => (visible(scope, t.split("/")[0] ?? "") ? t : other)) };
    case "barrier":
      return {
        ...w,
        targets: w.targets.map((t) =>
          visible(scope, t.namespace) ? t : { ...t, uid: "", namespace: other, name: other },
        ),
      };
    default:
      return w;
  }
}

/** One line saying why the applier gets no attempt now, in a person's words. */
export function whyText(w: Waiting | null, now: number): string {
  if (w === null) return "due: an attempt goes now";
  switch (w.hold) {
    case "unknown":
      return "the worker does not know this claim yet";
    case "nothing pending":
      return "nothing to apply";
    case "operation out": {
      const o = w.operation;
      return `operation ${o.token} ${o.phase} for ${short(o.commit)} (sent ${age((now - o.sentAt) / 1000)} ago)`;
    }
    case "source busy":
      return `another applier of the same source is applying: ${w.by}${w.token ? ` (operation ${w.token})` : ""}`;
    case "backoff":
      return `retry backoff after ${w.failures} failed attempt(s): next ${inTime(w.until, now)} (${iso(w.until)})`;
    case "not named":
      return "no GitTarget names this claim";
    case "suspended":
      return `suspended: GitTarget ${w.targets.join(", ")} has spec.suspend (applygate resume)`;
    case "approval settings conflict":
      return `approval settings conflict: ${w.message}`;
    case "approval not read":
      return "reading the foreign commits since the last applied commit for approval";
    case "approval unreadable":
      return `approvals cannot be read: ${w.message}`;
    case "awaiting approval":
      return `awaiting approval: ${w.missing
        .map(
          (m) =>
            `${short(m.commit)} lacks ${m.sources.join(", ")}${m.signature ? ` (${m.signature.reason}: ${m.signature.message})` : ""}${m.notDescendantOf ? ` (not a descendant of the last applied commit ${short(m.notDescendantOf)}: an Approval must name it)` : ""}`,
        )
        .join("; ")}`;
    case "outside change window": {
      const v = w.verdict;
      if (v.state === "Invalid") return `change window invalid: ${v.message}`;
      const where = v.by === "deny" ? "inside a deny change window" : "outside every allow change window";
      return `${where}: next opening ${v.opensAt === null ? "none within 400 days" : `${inTime(v.opensAt, now)} (${iso(v.opensAt)})`}`;
    }
    case "blocked by sync window": {
      const v = w.verdict;
      if (v.state === "Invalid") return `Argo CD sync window invalid: ${v.message}`;
      const where = v.by === "deny" ? "inside a deny sync window" : "outside every allow sync window";
      return `${where} of the AppProject: next opening ${v.opensAt === null ? "none within 400 days" : `${inTime(v.opensAt, now)} (${iso(v.opensAt)})`}`;
    }
    case "barrier":
      return `barrier: ${w.targets
        .map((t) => {
          const lacks = [
            ...(t.folder ? ["its folder is not in the tip"] : []),
            ...(t.initialSnapshots ? ["its initial snapshots are not published"] : []),
          ];
          const who =
            t.uid === "" ? "a GitTarget in another namespace" : `GitTarget ${t.namespace}/${t.name}`;
          return `${who}: ${lacks.join(" and ")}`;
        })
        .join("; ")}`;
    case "turn":
      return `due, after ${w.of}: appliers of one source take turns`;
    case "not observed":
      return "due, waiting for the worker's first look at the remote since it started";
    case "empty branch":
      return "the branch has no commit";
    case "flush in progress":
      return `due: publishing the pending writes first (flush started ${age((now - w.since) / 1000)} ago)`;
    case "publication backoff":
      return `due: publication failed ${w.failures} time(s); next try ${inTime(w.until, now)} (${iso(w.until)})`;
  }
}

/**
 * `whyText`, saying a retry as the claim's Retrying condition does: which commit, which attempt
 * and when (the worker's backoff), or Argo CD's own retry the operation out waits for.
 */
export function whyWithRetry(w: Waiting | null, retry: RetryView | null, now: number): string {
  if (!retry) return whyText(w, now);
  if (w?.hold === "backoff") return retryMessage(retry, now);
  return `${whyText(w, now)}; ${retryMessage(retry, now)}`;
}

type Obj = Record<string, unknown>;
const obj = (v: unknown): Obj | undefined =>
  v && typeof v === "object" && !Array.isArray(v) ? (v as Obj) : undefined;
const str = (v: unknown): string | undefined => (typeof v === "string" && v !== "" ? v : undefined);

function conditionsOf(status: Obj | undefined): ConditionView[] {
  const list = Array.isArray(status?.conditions) ? (status.conditions as unknown[]) : [];
  return list.flatMap((c) => {
    const o = obj(c);
    const type = str(o?.type);
    const st = str(o?.status);
    if (!o || !type || !st) return [];
    return [
      {
        type,
        status: st,
        ...(str(o.reason) ? { reason: str(o.reason) } : {}),
        ...(str(o.message) ? { message: str(o.message) } : {}),
      },
    ];
  });
}

/** The claim's current operation and its history, newest first. */
export function operationsOf(status: Obj | undefined, now: number): OperationView[] {
  const out: OperationView[] = [];
  const one = (o: Obj, current: boolean): OperationView | undefined => {
    const token = str(o.token);
    const commit = str(o.commit);
    const phase = str(o.phase);
    if (!token || !commit || !phase) return undefined;
    const reasons = Array.isArray(o.reasons)
      ? (o.reasons as unknown[]).filter((r): r is string => typeof r === "string")
      : Array.isArray(o.targets)
        ? (o.targets as unknown[]).flatMap((t) => str(obj(t)?.reason) ?? [])
        : [];
    const requestedAt = str(o.requestedAt);
    const requested = requestedAt ? Date.parse(requestedAt) : Number.NaN;
    return {
      token,
      commit,
      reasons,
      phase,
      ...(requestedAt ? { requestedAt } : {}),
      ...(str(o.completedAt) ? { completedAt: str(o.completedAt) } : {}),
      ...(Number.isFinite(requested)
        ? { ageSeconds: Math.max(0, Math.floor((now - requested) / 1000)) }
        : {}),
      ...(str(o.outcome) ? { outcome: str(o.outcome) } : {}),
      ...(str(o.message) ? { message: str(o.message) } : {}),
      current,
    };
  };
  const op = obj(status?.operation);
  const cur = op && one(op, true);
  if (cur) out.push(cur);
  const history = Array.isArray(status?.history) ? (status.history as unknown[]) : [];
  for (const h of history) {
    const o = obj(h);
    const v = o && one(o, false);
    // The current operation, once ended, is also the newest history entry: shown once.
    if (v && v.token !== cur?.token) out.push(v);
  }
  return out;
}

/** When nothing says what the decisions are, what the claim's status shows (written by the worker and the sidecar). */
function whyFromClaim(claim: ClaimView | null, ops: OperationView[], unread: string): string {
  const running = ops.find((o) => o.current && !["Succeeded", "Failed"].includes(o.phase));
  if (running)
    return `operation ${running.token} ${running.phase} for ${short(running.commit)} (claim status)`;
  const allowed = claim?.conditions.find((c) => c.type === "ApplyAllowed");
  if (allowed?.status === "False") return `${allowed.reason}: ${allowed.message ?? ""} (claim status)`;
  return `decisions not read: ${unread}`;
}

function inWindow(view: BranchView, t: TargetExplanation, ref: string): number {
  const ids = view.inbox.writesByTarget[ref] ?? [];
  const decided = view.state.unpublished
    .filter((w) => w.targetUid === t.uid)
    .map((w) => w.entryId)
    .sort(compareEntryIds)
    .at(-1);
  return decided === undefined ? ids.length : ids.filter((id) => compareEntryIds(id, decided) > 0).length;
}

/** Builds the report from what was read, at `now`. */
export function statusReport(cluster: ClusterView, decisions: DecisionsView, now: number): StatusReport {
  const explained = new Map<string, { view: BranchView; e: BranchExplanation }>();
  if ("branches" in decisions)
    for (const view of decisions.branches)
      explained.set(view.key, { view, e: explainBranch(view.state, now) });
  const branchOf = (uid: string | undefined) =>
    uid === undefined
      ? undefined
      : [...explained.values()].find((b) => b.view.state.targets[uid] !== undefined);

  const targets = cluster.targets.map((t): TargetStatus => {
    const spec = obj(t.spec) ?? {};
    const status = obj(t.status);
    const namespace = t.metadata.namespace ?? "default";
    const name = t.metadata.name;
    const uid = t.metadata.uid;
    const provider = obj(spec.providerRef);
    const key = targetClaimKey(t);
    const read = key ? cluster.claims[key] : undefined;
    const claimObj = read && "object" in read ? read.object : undefined;
    const claimStatus = obj(claimObj?.status);
    const [kind = "", cns = "", cname = ""] = key?.split("/") ?? [];
    const claim: ClaimView | null = key
      ? {
          key,
          kind,
          namespace: cns,
          name: cname,
          ...(read && "error" in read ? { error: read.error } : {}),
          conditions: conditionsOf(claimStatus),
          ...(str(claimStatus?.lastAppliedCommit)
            ? { lastAppliedCommit: str(claimStatus?.lastAppliedCommit) }
            : {}),
        }
      : null;
    const operations = claimObj ? operationsOf(claimStatus, now) : [];
    const base = {
      namespace,
      name,
      ...(uid ? { uid } : {}),
      branch: str(spec.branch) ?? "",
      path: str(spec.path) ?? "",
      provider: `${str(provider?.namespace) ?? namespace}/${str(provider?.name) ?? ""}`,
      suspended: spec.suspend === true,
      conditions: conditionsOf(status),
      ...(obj(status?.publication) ? { publication: obj(status?.publication) } : {}),
      claim,
      operations,
    };
    if ("unread" in decisions)
      return {
        ...base,
        decisions: `not read: ${decisions.unread}`,
        state: "unknown",
        why: key
          ? whyFromClaim(claim, operations, decisions.unread)
          : "no claim named: nothing applies this folder",
      };
    const found = branchOf(uid);
    const te = found?.e.targets.find((x) => x.uid === uid);
    if (!found || !te)
      return {
        ...base,
        decisions: "not known to the worker yet",
        state: "unknown",
        why: key
          ? whyFromClaim(claim, operations, "the worker has not listed this GitTarget yet")
          : "no claim named",
      };
    const { view, e } = found;
    const ap = te.claim ? e.appliers.find((a) => a.key === te.claim) : undefined;
    const waiting = ap ? redact(ap.waiting, cluster.scope) : null;
    const held = te.snapshotsHeldSince;
    return {
      ...base,
      decisions: "read",
      branchKey: view.key,
      tip: e.tip,
      pendingWrites: { decided: te.unpublished, inCommitWindow: inWindow(view, te, `${namespace}/${name}`) },
      intake: view.intake,
      ...(ap
        ? {
            pending: ap.pending,
            ...(ap.reasons.find((r) => r.uid === uid)
              ? { reason: ap.reasons.find((r) => r.uid === uid)?.reason }
              : {}),
            waiting,
            retry: ap.retry,
          }
        : {}),
      state: ap ? ap.state : "unknown",
      why: ap
        ? whyWithRetry(waiting, ap.retry, now)
        : key
          ? "the worker holds no applier for this claim (not found, not granted, or not admitted)"
          : "no claim named: nothing applies this folder",
      barrier:
        te.barrier &&
        (redact({ hold: "barrier", targets: [te.barrier] }, cluster.scope) as { targets: BarrierGap[] })
          .targets[0],
      ...(held !== null ? { snapshotsHeldSince: iso(held) } : {}),
      queue: { depth: view.inbox.entries, byKind: view.inbox.byKind, truncated: view.inbox.truncated },
    };
  });
  targets.sort((a, b) =>
    a.namespace === b.namespace ? (a.name < b.name ? -1 : 1) : a.namespace < b.namespace ? -1 : 1,
  );
  return { at: iso(now), scope: cluster.scope, targets };
}
