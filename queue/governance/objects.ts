/**
 * What the cluster's objects say of governance (pure): the change windows, override and approval
 * settings of a GitTarget and the claim it names, and the Approvals given to the claim, read into
 * `TargetGovernance`. The worker's listing and the sidecar's check at the write read alike.
 */
import { SIGNATURE_MODES } from "../crds/governance.js";
import type { ApprovalSource, ChangeWindowSpec, SignatureSpec, TargetGovernance } from "./model.js";

/** An object as governance reads it: a claim, a GitTarget or an Approval, however it was read. */
export interface GovernanceObject {
  kind?: string | undefined;
  metadata: { name: string; namespace?: string | undefined; creationTimestamp?: unknown };
  spec?: unknown;
  status?: unknown;
}

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
const named = (o: GovernanceObject, kind: string) =>
  `${o.kind ?? kind} ${o.metadata.namespace ?? "default"}/${o.metadata.name}`;

/** Each of `objects`' windows, tagged with the object that sets them (each object's hold on their own). */
function windowsOf(objects: readonly { label: string; spec: Record<string, unknown> | undefined }[]) {
  return objects.flatMap((o) =>
    (windowsIn(obj(o.spec)?.changeWindows) ?? []).map((w) => ({ from: o.label, ...w })),
  );
}

/** The Approvals given to claim `c`: those in its namespace that name it. */
export function approvalsFor<T extends GovernanceObject>(c: GovernanceObject, approvals: readonly T[]): T[] {
  const ns = c.metadata.namespace ?? "default";
  return approvals.filter((a) => {
    const ref = obj(obj(a.spec)?.claimRef);
    return (
      (a.metadata.namespace ?? "default") === ns &&
      str(ref?.name) === c.metadata.name &&
      (c.kind === undefined || str(ref?.kind) === c.kind)
    );
  });
}

/** Oldest first (then by name): the order approvals are listed and the newest override found in. */
const byCreation = (a: GovernanceObject, b: GovernanceObject) => {
  const at = (o: GovernanceObject) => str(o.metadata.creationTimestamp) ?? "";
  return at(a) < at(b) ? -1 : at(a) > at(b) ? 1 : a.metadata.name < b.metadata.name ? -1 : 1;
};

/**
 * What the core needs of governance for one GitTarget naming claim `c`, given the Approvals of the
 * claim's namespace; undefined when nothing is set. The claim's rules and the GitTarget's both
 * hold: every approval source either sets is required (a source both set must be set alike, or
 * nothing is applied: `conflict`), and each one's change windows hold on their own.
 */
export function governanceOf(
  target: GovernanceObject,
  c: GovernanceObject,
  approvals: readonly GovernanceObject[] = [],
): TargetGovernance | undefined {
  const claimLabel = named(c, "claim");
  const targetLabel = named(target, "GitTarget");
  const changeWindows = windowsOf([
    { label: claimLabel, spec: obj(c.spec) },
    { label: targetLabel, spec: obj(target.spec) },
  ]);
  const given = approvalsFor(c, approvals).sort(byCreation);
  const override = given.filter((a) => str(obj(a.spec)?.changeWindowOverride)).at(-1);
  const value = str(obj(override?.spec)?.changeWindowOverride);
  const usedRaw = obj(obj(obj(c.status)?.governance)?.overrideUsed);
  const usedValue = str(usedRaw?.value);
  const usedToken = str(usedRaw?.token);
  const setters = [
    { label: claimLabel, holder: c, spec: obj(obj(c.spec)?.approval) },
    { label: targetLabel, holder: target, spec: obj(obj(target.spec)?.approval) },
  ].filter((x) => x.spec !== undefined);
  const sources: ApprovalSource[] = setters.some((x) => obj(x.spec)?.manual === true) ? ["Manual"] : [];
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
  const report = obj(obj(c.spec)?.commitStatusReport);
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
    const by = str(obj(override?.spec)?.approver);
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
  holder: GovernanceObject,
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
export function approvedCommits(
  approvals: readonly GovernanceObject[],
): NonNullable<TargetGovernance["approved"]> {
  const out: NonNullable<TargetGovernance["approved"]> = {};
  for (const a of [...approvals].sort(byCreation)) {
    const sha = str(obj(a.spec)?.commit);
    if (!sha || !/^[0-9a-f]{40}$/.test(sha)) continue;
    const by = str(obj(a.spec)?.approver);
    const note = str(obj(a.spec)?.note);
    const prev = out[sha]?.Manual;
    const who = [prev?.by, by].filter((x): x is string => x !== undefined).join(", ");
    const notes = [prev?.note, note].filter((x): x is string => x !== undefined).join("; ");
    out[sha] = { Manual: { ...(who ? { by: who } : {}), ...(notes ? { note: notes } : {}) } };
  }
  return out;
}
