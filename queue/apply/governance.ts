/**
 * Governance between the cluster and the decision core (pure): what the listing reads of change
 * windows and overrides from a GitTarget and its claim, and the claim status patch that shows a
 * `ClaimGate` (`ApplyAllowed`, `status.governance`).
 */
import type { Condition } from "../crds/common.js";
import {
  APPLY_ALLOWED_CONDITION,
  APPROVE_ANNOTATION_PREFIX,
  CHANGE_WINDOW_OVERRIDE_ANNOTATION,
  SIGNATURE_MODES,
} from "../crds/governance.js";
import {
  type ApprovalSource,
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

/**
 * The field manager that set an annotation, from managedFields: who set the override, as far as
 * the API server says (the client's field manager, e.g. `kubectl-annotate`).
 */
export function annotationSetBy(o: KubeLike, annotation: string): string | undefined {
  const entries = (o.metadata as { managedFields?: unknown }).managedFields;
  if (!Array.isArray(entries)) return undefined;
  const key = `f:${annotation}`;
  const owners = entries.filter((e) => {
    const a = obj(obj(obj(obj(e)?.fieldsV1)?.["f:metadata"])?.["f:annotations"]);
    return a !== undefined && key in a;
  });
  return str(obj(owners.at(-1))?.manager);
}

/** What the core needs of governance for one GitTarget naming claim `c`; undefined when nothing is set. */
export function governanceOf(target: KubeLike, c: KubeLike): TargetGovernance | undefined {
  const changeWindows = windowsIn(c.spec?.changeWindows) ?? windowsIn(target.spec?.changeWindows) ?? [];
  const annotations = (c.metadata as { annotations?: Record<string, string> }).annotations ?? {};
  const value = str(annotations[CHANGE_WINDOW_OVERRIDE_ANNOTATION]);
  const usedRaw = obj(obj(c.status?.governance)?.overrideUsed);
  const usedValue = str(usedRaw?.value);
  const usedToken = str(usedRaw?.token);
  const approvalSpec = obj(c.spec?.approval) ?? obj(target.spec?.approval);
  const sources: ApprovalSource[] = approvalSpec?.manual === true ? ["Manual"] : [];
  const cs = obj(approvalSpec?.commitStatus);
  const context = str(cs?.context);
  const api = cs?.api === "github" || cs?.api === "gitea" ? cs.api : undefined;
  // cs.apiURL and cs.repository are not read: the GitProvider says where its API is.
  if (context && api) sources.push("CommitStatus");
  const signature = signatureSpecOf(approvalSpec, obj(c.spec?.approval) ? c : target);
  if (signature) sources.push("Signature");
  const report = obj(c.spec?.commitStatusReport);
  const reportApi = report?.api === "github" || report?.api === "gitea" ? report.api : undefined;
  if (changeWindows.length === 0 && !value && !usedValue && sources.length === 0 && !reportApi)
    return undefined;
  const g: TargetGovernance = { changeWindows };
  if (reportApi) g.statusReport = { api: reportApi };
  if (sources.length > 0) {
    g.approval = {
      sources,
      ...(context && api
        ? {
            commitStatus: { context, api },
          }
        : {}),
      ...(signature ? { signature } : {}),
    };
    g.approved = approvedCommits(c);
  }
  if (value) {
    const by = annotationSetBy(c, CHANGE_WINDOW_OVERRIDE_ANNOTATION);
    g.override = { value, ...(by ? { by } : {}) };
  }
  if (usedValue && usedToken) {
    const by = str(usedRaw?.by);
    g.overrideUsed = { value: usedValue, token: usedToken, ...(by ? { by } : {}) };
  }
  return g;
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

/** Manual approvals on the claim: `approve.applygate.dev/<sha>` annotations, with who set each. */
export function approvedCommits(c: KubeLike): NonNullable<TargetGovernance["approved"]> {
  const annotations = (c.metadata as { annotations?: Record<string, string> }).annotations ?? {};
  const out: NonNullable<TargetGovernance["approved"]> = {};
  for (const [key, note] of Object.entries(annotations)) {
    if (!key.startsWith(APPROVE_ANNOTATION_PREFIX)) continue;
    const sha = key.slice(APPROVE_ANNOTATION_PREFIX.length);
    if (!/^[0-9a-f]{40}$/.test(sha)) continue;
    const by = annotationSetBy(c, key);
    out[sha] = { Manual: { ...(by ? { by } : {}), ...(note ? { note } : {}) } };
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
    if (approvalRequired(named).length === 0) continue;
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
