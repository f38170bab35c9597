/**
 * Governance between the cluster and the decision core (pure): what the listing reads of change
 * windows and overrides from a GitTarget and its claim, and the claim status patch that shows a
 * `ClaimGate` (`ApplyAllowed`, `status.governance`).
 */
import type { Condition } from "../crds/common.js";
import { APPLY_ALLOWED_CONDITION, SIGNATURE_MODES } from "../crds/governance.js";
import {
  type ApprovalSource,
  approvalConflict,
  approvalRequired,
  type ChangeWindowSpec,
  type ClaimGate,
  type DecisionState,
  type OverrideUse,
  type SignatureSpec,
  signatureRequired,
  type TargetGovernance,
  targetsNaming,
} from "../decide/index.js";
import type { KubeLike } from "./catalog.js";

const obj = (v: unknown): Record<string, unknown> | undefined =>
  v && typeof v === "object" && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;
const str = (v: unknown): string | undefined => (typeof v === "string" && v !== "" ? v : undefined);

function windowsIn(v: unknown): ChangeWindowSpec[] | undefined {
  if (!Array.isArray(v)) return undefined;
  return v.flatMap((w) => {
    const o = obj(w);
    const kind = o?.kind;
    const schedule = str(o?.schedule);
    const duration = str(o?.duration);
    if ((kind !== "allow" && kind !== "deny") || !schedule || !duration) return [];
    const tz = str(o?.timeZone);
    return [{ kind, schedule, duration, ...(tz ? { timeZone: tz } : {}) }];
  });
}

/** An object as the windows' `from` and the messages name it: `FluxClaim team/shop`. */
const named = (o: KubeLike, kind: string) =>
  `${o.kind ?? kind} ${o.metadata.namespace ?? "default"}/${o.metadata.name}`;

/** Each of `objects`' windows, tagged with the object that sets them (each object's hold on their own). */
function windowsOf(objects: readonly { label: string; spec: Record<string, unknown> | undefined }[]) {
  return objects.flatMap((o) =>
    (windowsIn(o.spec?.changeWindows) ?? []).map((w) => ({ from: o.label, ...w })),
  );
}

/** The Approvals given to claim `c`: those in its namespace that name it. */
export function approvalsFor(c: KubeLike, approvals: readonly KubeLike[]): KubeLike[] {
  const ns = c.metadata.namespace ?? "default";
  return approvals.filter((a) => {
    const ref = obj(a.spec?.claimRef);
    return (
      (a.metadata.namespace ?? "default") === ns &&
      str(ref?.name) === c.metadata.name &&
      (c.kind === undefined || str(ref?.kind) === c.kind)
    );
  });
}

/** Oldest first (then by name): the order approvals are listed and the newest override found in. */
const byCreation = (a: KubeLike, b: KubeLike) => {
  const at = (o: KubeLike) => str((o.metadata as { creationTimestamp?: unknown }).creationTimestamp) ?? "";
  return at(a) < at(b) ? -1 : at(a) > at(b) ? 1 : a.metadata.name < b.metadata.name ? -1 : 1;
};

/**
 * What the core needs of governance for one GitTarget naming claim `c`, given the Approvals of the
 * claim's namespace; undefined when nothing is set. The claim's rules and the GitTarget's both
 * hold: every approval source either sets is required (a source both set must be set alike, or
 * nothing is applied: `conflict`), and each one's change windows hold on their own.
 */
export function governanceOf(
  target: KubeLike,
  c: KubeLike,
  approvals: readonly KubeLike[] = [],
): TargetGovernance | undefined {
  const claimLabel = named(c, "claim");
  const targetLabel = named(target, "GitTarget");
  const changeWindows = windowsOf([
    { label: claimLabel, spec: c.spec },
    { label: targetLabel, spec: target.spec },
  ]);
  const given = approvalsFor(c, approvals).sort(byCreation);
  const override = given.filter((a) => str(a.spec?.changeWindowOverride)).at(-1);
  const value = str(override?.spec?.changeWindowOverride);
  const usedRaw = obj(obj(c.status?.governance)?.overrideUsed);
  const usedValue = str(usedRaw?.value);
  const usedToken = str(usedRaw?.token);
  const setters = [
    { label: claimLabel, holder: c, spec: obj(c.spec?.approval) },
    { label: targetLabel, holder: target, spec: obj(target.spec?.approval) },
  ].filter((x) => x.spec !== undefined);
  const sources: ApprovalSource[] = setters.some((x) => x.spec?.manual === true) ? ["Manual"] : [];
  const commitStatus = agreed(
    setters.map((x) => ({ label: x.label, value: commitStatusOf(x.spec) })),
    "commitStatus",
  );
  if (commitStatus.value) sources.push("CommitStatus");
  const signature = agreed(
    setters.map((x) => ({ label: x.label, value: signatureSpecOf(x.spec, x.holder) })),
    "signature",
  );
  if (signature.value) sources.push("Signature");
  const conflict = commitStatus.conflict ?? signature.conflict;
  const report = obj(c.spec?.commitStatusReport);
  const reportApi = report?.api === "github" || report?.api === "gitea" ? report.api : undefined;
  if (changeWindows.length === 0 && !value && !usedValue && sources.length === 0 && !reportApi)
    return undefined;
  const g: TargetGovernance = { changeWindows };
  if (reportApi) g.statusReport = { api: reportApi };
  if (sources.length > 0) {
    g.approval = {
      sources,
      ...(conflict ? { conflict } : {}),
      ...(commitStatus.value ? { commitStatus: commitStatus.value } : {}),
      ...(signature.value ? { signature: signature.value } : {}),
    };
    g.approved = approvedCommits(given);
  }
  if (value) {
    const by = str(override?.spec?.approver);
    g.override = { value, ...(by ? { by } : {}) };
  }
  if (usedValue && usedToken) {
    const by = str(usedRaw?.by);
    g.overrideUsed = { value: usedValue, token: usedToken, ...(by ? { by } : {}) };
  }
  return g;
}

/**
 * The one value several objects set for a source, or why they cannot be judged together (they
 * set it differently): a claim never weakens its GitTarget's source, nor a GitTarget its claim's.
 */
function agreed<T>(
  set: readonly { label: string; value: T | undefined }[],
  what: string,
): { value?: T; conflict?: string } {
  const given = set.filter((x): x is { label: string; value: T } => x.value !== undefined);
  const first = given[0];
  if (!first) return {};
  const other = given.find((x) => JSON.stringify(x.value) !== JSON.stringify(first.value));
  if (other)
    return {
      value: first.value,
      conflict: `${first.label} and ${other.label} set approval.${what} differently (set it in one of them, or alike in both)`,
    };
  return { value: first.value };
}

/** `approval.commitStatus`: a context and the host's API. */
function commitStatusOf(
  approvalSpec: Record<string, unknown> | undefined,
): NonNullable<NonNullable<TargetGovernance["approval"]>["commitStatus"]> | undefined {
  const cs = obj(approvalSpec?.commitStatus);
  const context = str(cs?.context);
  const api = cs?.api === "github" || cs?.api === "gitea" ? cs.api : undefined;
  // cs.apiURL and cs.repository are not read: the GitProvider says where its API is.
  if (!context || !api) return undefined;
  return { context, api };
}

/**
 * `approval.signature` of the object that sets the approval: its keys Secret lives in that
 * object's namespace. Modes HEAD (the default), Tag and TagAndHEAD; a tag pattern in the tag modes.
 */
function signatureSpecOf(
  approvalSpec: Record<string, unknown> | undefined,
  holder: KubeLike,
): SignatureSpec | undefined {
  const sig = obj(approvalSpec?.signature);
  const name = str(obj(sig?.secretRef)?.name);
  const mode = sig?.mode === undefined ? "HEAD" : SIGNATURE_MODES.find((m) => m === sig.mode);
  if (!sig || !name || !mode) return undefined;
  const pattern = mode !== "HEAD" ? str(sig.tagPattern) : undefined;
  return {
    secret: { namespace: holder.metadata.namespace ?? "default", name },
    mode,
    ...(pattern ? { tagPattern: pattern } : {}),
  };
}

/**
 * Manual approvals: the Approvals naming a commit, with who gave each (the approver the API
 * server admitted) and the note. Several for one commit list every approver.
 */
export function approvedCommits(approvals: readonly KubeLike[]): NonNullable<TargetGovernance["approved"]> {
  const out: NonNullable<TargetGovernance["approved"]> = {};
  for (const a of [...approvals].sort(byCreation)) {
    const sha = str(a.spec?.commit);
    if (!sha || !/^[0-9a-f]{40}$/.test(sha)) continue;
    const by = str(a.spec?.approver);
    const note = str(a.spec?.note);
    const prev = out[sha]?.Manual;
    const who = [prev?.by, by].filter((x): x is string => x !== undefined).join(", ");
    const notes = [prev?.note, note].filter((x): x is string => x !== undefined).join("; ");
    out[sha] = { Manual: { ...(who ? { by: who } : {}), ...(notes ? { note: notes } : {}) } };
  }
  return out;
}

function stampedCondition(
  previous: readonly Condition[] | undefined,
  wanted: { status: "True" | "False"; reason: string; message: string },
  now: number,
  generation: number | undefined,
): Condition {
  const prev = previous?.find((p) => p.type === APPLY_ALLOWED_CONDITION);
  return {
    type: APPLY_ALLOWED_CONDITION,
    ...wanted,
    lastTransitionTime:
      prev && prev.status === wanted.status ? prev.lastTransitionTime : new Date(now).toISOString(),
    ...(generation !== undefined ? { observedGeneration: generation } : {}),
  };
}

/**
 * The status merge patch that makes the claim show `gate`, from the claim as read now; undefined
 * when it already does. Other conditions are kept as they are (the sidecar owns them).
 */
export function gatePatch(
  current: KubeLike,
  gate: ClaimGate,
  now: number,
): Record<string, unknown> | undefined {
  const status = (current.status ?? {}) as { conditions?: Condition[]; governance?: Record<string, unknown> };
  const others = (status.conditions ?? []).filter((c) => c.type !== APPLY_ALLOWED_CONDITION);
  const generation = (current.metadata as { generation?: number }).generation;
  const conditions =
    gate.condition === null
      ? others
      : [...others, stampedCondition(status.conditions, gate.condition, now, generation)];
  const governance: Record<string, unknown> = {};
  if (gate.changeWindow) governance.changeWindow = gate.changeWindow;
  if (gate.syncWindow) governance.syncWindow = gate.syncWindow;
  if (gate.awaitingApproval && gate.awaitingApproval.length > 0)
    governance.awaitingApproval = gate.awaitingApproval;
  const nulled = {
    ...(gate.changeWindow
      ? { changeWindow: { nextOpening: null, closesAt: null, ...gate.changeWindow } }
      : {}),
    ...(gate.syncWindow ? { syncWindow: { nextOpening: null, closesAt: null, ...gate.syncWindow } } : {}),
  };
  const used: OverrideUse | null | undefined =
    gate.overrideUsed !== undefined
      ? gate.overrideUsed
      : (status.governance?.overrideUsed as OverrideUse | undefined);
  if (used) governance.overrideUsed = used;
  const same =
    JSON.stringify(conditions) === JSON.stringify(status.conditions ?? []) &&
    JSON.stringify(governance) === JSON.stringify(status.governance ?? {});
  if (same) return undefined;
  // A merge patch replaces the conditions list whole, and `governance` is replaced by nulling it first.
  return {
    conditions,
    governance:
      Object.keys(governance).length === 0
        ? null
        : {
            changeWindow: null,
            syncWindow: null,
            overrideUsed: null,
            awaitingApproval: null,
            ...governance,
            ...nulled,
          },
  };
}

export type CommitStatusSpec = NonNullable<NonNullable<TargetGovernance["approval"]>["commitStatus"]>;

/** One approval read the decisions ask for. */
export interface ApprovalReadAsked {
  key: string;
  tip: string;
  since: string | null;
  commitStatus?: CommitStatusSpec;
  signature?: SignatureSpec;
}

/** The appliers whose approval read is missing or out of date for the tip now (by claim key). */
export function approvalReadsAsked(s: DecisionState, again = false): ApprovalReadAsked[] {
  if (s.tip === null) return [];
  const out: ApprovalReadAsked[] = [];
  for (const [key, a] of Object.entries(s.appliers)) {
    const named = targetsNaming(s, key);
    if (approvalRequired(named).length === 0 || approvalConflict(named)) continue;
    const r = a.foreignRead;
    const commitStatus = named.find((t) => t.governance?.approval?.commitStatus)?.governance?.approval
      ?.commitStatus;
    // Statuses change on the host: a read that still waits for one is read again when asked.
    // So do tags in a tag mode: a signed tag pushed later (no new commit) approves a waiting one.
    const signature = signatureRequired(named);
    const waiting =
      (commitStatus !== undefined && r?.commits.some((c) => r.statuses?.[c] !== "success")) ||
      (signature !== undefined &&
        signature.mode !== "HEAD" &&
        r?.commits.some((c) => !r.signatures?.[c]?.ok));
    const current = r !== undefined && r.tip === s.tip && r.since === a.lastAppliedCommit;
    // A read that failed for this applier is read again at the next poll, or at once when the
    // keys it would check against moved (a keys Secret fixed); not at every step.
    const unreadable = current && r.unreadable !== undefined;
    // Signatures checked against other keys than the listing sees now are read again.
    const keysMoved =
      signature !== undefined && ((!r?.signatures && !unreadable) || r?.keys !== signature.keys);
    if (current && !(again && (waiting || unreadable)) && !keysMoved) continue;
    out.push({
      key,
      tip: s.tip,
      since: a.lastAppliedCommit,
      ...(commitStatus ? { commitStatus } : {}),
      ...(signature ? { signature } : {}),
    });
  }
  return out;
}
