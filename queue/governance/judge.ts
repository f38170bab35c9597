/**
 * The approval and change-window rules both processes judge by (pure): the worker's decision core
 * at decision time, the sidecar's executor at the write. Over the governance of the GitTargets
 * naming one applier (`Governed`), and a read of the foreign commits an apply would bring.
 */
import {
  APPROVAL_SOURCES,
  type ApprovalSource,
  type ChangeWindowSpec,
  type CommitApproval,
  type ForeignRead,
  type Governed,
  type MissingApproval,
  type SignatureProblem,
  type SignatureSpec,
  type TargetGovernance,
} from "./model.js";

/**
 * The windows of the claim and of every GitTarget naming the applier, each object's its own set
 * (`from`; a claim's own appear once): all of them hold (judgeChangeWindows).
 */
export function windowsOf(named: readonly Governed[]): ChangeWindowSpec[] {
  const seen = new Set<string>();
  const out: ChangeWindowSpec[] = [];
  for (const t of named) {
    for (const w of t.governance?.changeWindows ?? []) {
      const k = JSON.stringify([w.from ?? "", w.kind, w.schedule, w.duration, w.timeZone ?? "UTC"]);
      if (seen.has(k)) continue;
      seen.add(k);
      out.push(w);
    }
  }
  return out;
}

/** The approval sources the GitTargets naming the applier require (a claim's own appear once). */
export function approvalRequired(named: readonly Governed[]): ApprovalSource[] {
  const out = new Set<ApprovalSource>();
  for (const t of named) for (const src of t.governance?.approval?.sources ?? []) out.add(src);
  return APPROVAL_SOURCES.filter((s) => out.has(s));
}

/** What each commit of a read lacks of the required approvals, and the approvals of the others. */
export interface CommitsJudged {
  missing: MissingApproval[];
  approvals: CommitApproval[];
}

/**
 * Each commit of a read judged against every required source (pure): a manual approval given on
 * the claim, the commit status `success`, a signature that holds. The worker's gate and the
 * executor's check at the write (sidecar/governance-check.ts) judge by this one rule.
 */
export function judgeCommits(
  read: Pick<ForeignRead, "commits" | "statuses" | "signatures" | "since" | "notDescendant">,
  sources: readonly ApprovalSource[],
  approved: NonNullable<TargetGovernance["approved"]>,
): CommitsJudged {
  const missing: CommitsJudged["missing"] = [];
  const approvals: CommitApproval[] = [];
  // A tip that does not descend from the last applied commit is applied only on an Approval
  // naming it: old commits that were approved once (signed, say) approve no return to them.
  const needs: ApprovalSource[] = read.notDescendant
    ? APPROVAL_SOURCES.filter((s) => s === "Manual" || sources.includes(s))
    : [...sources];
  const rollback = read.notDescendant && read.since ? { notDescendantOf: read.since } : {};
  const signed = read.signatures;
  for (const commit of read.commits) {
    const given = { ...approved[commit] };
    if (read.statuses?.[commit] === "success") given.CommitStatus = {};
    const sig = signed?.[commit];
    if (sig?.ok) {
      const key = sig.signer ? `${sig.signer} (${sig.key})` : sig.key;
      given.Signature = { by: sig.tag ? `${key} [tag ${sig.tag.name}]` : key };
    }
    const lacking = needs.filter((src) => given[src] === undefined);
    if (lacking.length > 0) {
      const problem: SignatureProblem | undefined =
        lacking.includes("Signature") && sig && !sig.ok
          ? { reason: sig.reason, message: sig.message }
          : undefined;
      missing.push({ commit, sources: lacking, ...(problem ? { signature: problem } : {}), ...rollback });
    } else {
      const by = needs.flatMap((src) => (given[src]?.by ? [given[src]?.by as string] : []));
      const signedBy =
        sig?.ok && needs.includes("Signature")
          ? { signedBy: sig.key, ...(sig.tag ? { tag: { name: sig.tag.name, signedBy: sig.tag.key } } : {}) }
          : {};
      approvals.push({ commit, sources: [...needs], ...(by.length > 0 ? { by } : {}), ...signedBy });
    }
  }
  return { missing, approvals };
}

/** The signature approval the GitTargets naming the applier require, if any (the first one set). */
export function signatureRequired(named: readonly Governed[]): SignatureSpec | undefined {
  return named.find((t) => t.governance?.approval?.signature)?.governance?.approval?.signature;
}

/**
 * Why the approval settings of the objects governing one applier cannot be judged together, or
 * undefined: one object's own conflict (its claim and it set a source differently), or two
 * GitTargets naming the applier that require a commit status or a signature differently. Every
 * source any of them sets is required (`approvalRequired`); a source two set must be set alike.
 */
export function approvalConflict(named: readonly Governed[]): string | undefined {
  for (const t of named) if (t.governance?.approval?.conflict) return t.governance.approval.conflict;
  const differs = (pick: (a: NonNullable<TargetGovernance["approval"]>) => unknown, what: string) => {
    const set = named.flatMap((t) => {
      const v = t.governance?.approval ? pick(t.governance.approval) : undefined;
      return v === undefined ? [] : [JSON.stringify(v)];
    });
    return new Set(set).size > 1
      ? `the GitTargets naming the claim set approval.${what} differently`
      : undefined;
  };
  return (
    differs((a) => a.commitStatus, "commitStatus") ??
    differs((a) => (a.signature ? { ...a.signature, keys: undefined } : undefined), "signature")
  );
}
