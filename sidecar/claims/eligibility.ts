/**
 * Is a claim referenced by an eligible GitTarget? (pure). Judged from its inputs alone — the
 * GitTargets naming it, their GitProviders, and the applier's source — never from a GitTarget's
 * Ready, which reads the claim's own Ready back.
 */
import { normalizeRepoUrl } from "../../queue/contract.js";
import { StatusReason } from "../../queue/crds/reasons.js";
import type { ConditionInput } from "./conditions.js";

export interface ClaimIdentity {
  kind: "FluxClaim" | "ArgoCDClaim" | "WebhookClaim";
  namespace: string;
  name: string;
  /** spec.accessFrom.namespaces: namespaces besides its own whose GitTargets may name it. */
  accessFrom?: readonly string[];
}

/** What eligibility reads of a GitTarget. */
export interface TargetView {
  uid: string;
  namespace: string;
  name: string;
  deleting: boolean;
  branch: string;
  providerRef: { name: string; namespace?: string };
  claimRef?: { kind: string; name: string; namespace?: string };
  /**
   * Why it may not write, as the worker judges (queue/tenancy.ts): its GitProvider may not be used
   * (RepositoryHeld), or another namespace's GitTarget holds its folder (FolderHeld).
   */
  refused?: { reason: string; message: string };
}

/** What eligibility reads of a GitProvider. */
export interface ProviderView {
  namespace: string;
  name: string;
  url: string;
  accessFrom?: readonly string[];
}

/**
 * The repository and branch the applier's source fetches, as the kind module read it: known,
 * not known yet (applier or source not read, a read failed), or a source the kind cannot hold.
 */
export type ApplierSource =
  | { state: "Known"; url: string; branch: string }
  /** The applier applies whatever commit it is sent (a webhook endpoint has no source of its own). */
  | { state: "Any" }
  | { state: "Unknown"; message: string }
  | { state: "Unsupported"; reason: string; message: string };

export interface EligibilityInput {
  claim: ClaimIdentity;
  targets: readonly TargetView[];
  /** Looks a provider up; undefined when it does not exist (or is not cached yet: see providersSynced). */
  provider: (namespace: string, name: string) => ProviderView | undefined;
  source: ApplierSource;
}

/** How one GitTarget naming the claim stands. */
export type TargetVerdict =
  | { target: TargetView; verdict: "Eligible" }
  | { target: TargetView; verdict: "Refused"; reason: string; message: string }
  | { target: TargetView; verdict: "Unknown"; reason: string; message: string };

export type Eligibility =
  /** No GitTarget names the claim: it reads and writes nothing in the applier's cluster. */
  | { state: "NotReferenced"; verdicts: [] }
  /** At least one eligible GitTarget names it: the claim acts (for the uids listed). */
  | { state: "Bound"; eligible: TargetView[]; verdicts: TargetVerdict[] }
  /** None eligible while one cannot be judged yet: keep whatever hold there is. */
  | { state: "Undecided"; reason: typeof StatusReason.NotBound; message: string; verdicts: TargetVerdict[] }
  /** Every GitTarget naming it is refused, conclusively. */
  | { state: "Refused"; reason: string; message: string; verdicts: TargetVerdict[] };

export const granted = (accessFrom: readonly string[] | undefined, namespace: string) =>
  (accessFrom ?? []).some((ns) => ns === "*" || ns === namespace);

/** Whether the GitTarget names exactly this claim (its namespace defaults to the GitTarget's). */
export function namesClaim(target: TargetView, claim: ClaimIdentity): boolean {
  const r = target.claimRef;
  return (
    r !== undefined &&
    r.kind === claim.kind &&
    r.name === claim.name &&
    (r.namespace ?? target.namespace) === claim.namespace
  );
}

/** Judges one GitTarget that names the claim. */
export function judgeTarget(
  target: TargetView,
  input: Pick<EligibilityInput, "claim" | "provider" | "source">,
): TargetVerdict {
  const { claim } = input;
  const who = `GitTarget ${target.namespace}/${target.name}`;
  if (target.deleting) {
    return {
      target,
      verdict: "Refused",
      reason: StatusReason.TargetDeleting,
      message: `${who} is being deleted`,
    };
  }
  if (target.namespace !== claim.namespace && !granted(claim.accessFrom, target.namespace)) {
    return {
      target,
      verdict: "Refused",
      reason: StatusReason.CrossNamespaceNotAllowed,
      message: `${who} is in another namespace and not in the claim's spec.accessFrom.namespaces`,
    };
  }
  const providerNs = target.providerRef.namespace ?? target.namespace;
  const provider = input.provider(providerNs, target.providerRef.name);
  if (!provider) {
    return {
      target,
      verdict: "Unknown",
      reason: StatusReason.ProviderNotFound,
      message: `${who} names GitProvider ${providerNs}/${target.providerRef.name}, which was not found`,
    };
  }
  if (providerNs !== target.namespace && !granted(provider.accessFrom, target.namespace)) {
    return {
      target,
      verdict: "Refused",
      reason: StatusReason.ProviderNotAdmitted,
      message: `GitProvider ${providerNs}/${provider.name} does not admit GitTargets from namespace ${target.namespace}`,
    };
  }
  if (target.refused) {
    return {
      target,
      verdict: "Refused",
      reason: target.refused.reason,
      message: `${who} may not write: ${target.refused.message}`,
    };
  }
  const source = input.source;
  if (source.state === "Unknown") {
    return { target, verdict: "Unknown", reason: StatusReason.SourceUnknown, message: source.message };
  }
  if (source.state === "Unsupported") {
    return { target, verdict: "Refused", reason: source.reason, message: source.message };
  }
  if (source.state === "Any") return { target, verdict: "Eligible" };
  if (!sameRepository(provider.url, source.url) || source.branch !== target.branch) {
    return {
      target,
      verdict: "Refused",
      reason: StatusReason.SourceMismatch,
      message: `${who} writes ${provider.url} branch ${target.branch}, but the applier's source fetches ${source.url} branch ${source.branch}`,
    };
  }
  return { target, verdict: "Eligible" };
}

export function sameRepository(a: string, b: string): boolean {
  try {
    return normalizeRepoUrl(a) === normalizeRepoUrl(b);
  } catch {
    return a === b;
  }
}

/** The claim's eligibility from every GitTarget that names it. */
export function judgeEligibility(input: EligibilityInput): Eligibility {
  const naming = input.targets.filter((t) => namesClaim(t, input.claim));
  if (naming.length === 0) return { state: "NotReferenced", verdicts: [] };
  const verdicts = naming
    .map((t) => judgeTarget(t, input))
    .sort((a, b) => key(a.target).localeCompare(key(b.target)));
  const eligible = verdicts.filter((v) => v.verdict === "Eligible").map((v) => v.target);
  if (eligible.length > 0) return { state: "Bound", eligible, verdicts };
  const unknown = verdicts.filter((v) => v.verdict === "Unknown");
  if (unknown.length > 0) {
    return {
      state: "Undecided",
      reason: StatusReason.NotBound,
      message: unknown.map((v) => v.message).join("; "),
      verdicts,
    };
  }
  const refused = verdicts as Extract<TargetVerdict, { verdict: "Refused" }>[];
  const reasons = new Set(refused.map((v) => v.reason));
  return {
    state: "Refused",
    reason: reasons.size === 1 ? refused[0]!.reason : StatusReason.NotBound,
    message: refused.map((v) => v.message).join("; "),
    verdicts,
  };
}

const key = (t: TargetView) => `${t.namespace}/${t.name}`;

/**
 * The conditions eligibility alone decides. Bound returns none: whether the claim holds its
 * applier (Configured, InControl, Ready) is the ranking's and the kind's to say.
 */
export function eligibilityConditions(e: Eligibility, generation?: number): ConditionInput[] {
  const g = generation !== undefined ? { observedGeneration: generation } : {};
  switch (e.state) {
    case "NotReferenced":
      return [
        {
          type: "Ready",
          status: "True",
          reason: StatusReason.NotReferenced,
          message: "no GitTarget names this claim",
          ...g,
        },
        {
          type: "Configured",
          status: "Unknown",
          reason: StatusReason.NotReferenced,
          message: "no GitTarget names this claim",
          ...g,
        },
      ];
    case "Undecided":
      return [
        { type: "Ready", status: "Unknown", reason: StatusReason.NotBound, message: e.message, ...g },
        { type: "Configured", status: "Unknown", reason: StatusReason.NotBound, message: e.message, ...g },
      ];
    case "Refused":
      return [
        { type: "Ready", status: "False", reason: e.reason, message: e.message, ...g },
        { type: "Configured", status: "False", reason: e.reason, message: e.message, ...g },
      ];
    case "Bound":
      return [];
  }
}
