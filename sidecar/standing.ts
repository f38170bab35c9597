/**
 * Whether an attempt's decision still holds at the moment of the write that starts the apply.
 * Both executors ask this just before that write, from uncached reads: the claim still exists,
 * still holds this applier and is in control of it (not waiting in line behind another claim),
 * the applier's namespace still grants it, and at least one of the attempt's GitTargets still
 * stands (the same incarnation, not being deleted or suspended, naming this claim on this branch,
 * its GitProvider still there and admitting its namespace, and for a Refusal still consenting),
 * and the claim's change windows (or its override) still let it start, and, when the claim
 * requires approval, every commit the apply would bring is approved as read now
 * (`judgeGovernance`; the read: approval-recheck.ts). The pure judgement is `judgeStanding`.
 */
import type { Attempt } from "../queue/contract.js";
import { type GrantView, mayHold, notAllowedMessage, providerRefusal } from "../queue/crds/index.js";
import { StatusReason } from "../queue/crds/reasons.js";
import {
  applierRefOf,
  claimSpecFields,
  claimTypeOf,
  conditionIn,
  fieldOf,
  grantViewOf,
  isRecord,
  type KObject,
  type Kube,
  providerSpecFields,
  RESOURCES,
  storedConditionsOf,
  targetField,
} from "../queue/kube/index.js";
import type { BroughtReader } from "./approval-recheck.js";
import type { EventRecorder } from "./events.js";
import { type BroughtRead, judgeGovernance } from "./governance-check.js";

export type Standing =
  | { ok: true; targets: Attempt["targets"] }
  | { ok: false; phase: "RequestFailed" | "Rejected" | "Dropped"; reason: StatusReason; message: string };

export interface StandingInput {
  attempt: Attempt;
  claim: KObject | undefined;
  grants: readonly GrantView[];
  /** The attempt's GitTargets as read now, by `namespace/name` (absent: gone). */
  targets: ReadonlyMap<string, KObject>;
  /**
   * The GitProviders in other namespaces those GitTargets name, as read now, by `namespace/name`
   * (absent: gone). A GitProvider in the GitTarget's own namespace always admits it.
   */
  providers?: ReadonlyMap<string, KObject>;
  /** The moment of the judgement (epoch ms), for the change windows; default the system clock. */
  now?: number;
  /** What the apply would bring, read at the write (when the claim requires approval). */
  brought?: BroughtRead;
  /** The Approvals of the claim's namespace, read at the write. */
  approvals?: readonly KObject[];
}

/** The GitProvider a GitTarget names, as `namespace/name` (its namespace by default). */
export function providerKeyOf(target: KObject): string | undefined {
  const ref = targetField(target, "providerRef");
  if (!ref) return undefined;
  return `${ref.namespace ?? target.metadata.namespace ?? ""}/${ref.name}`;
}

/** The judgement (pure). */
export function judgeStanding(i: StandingInput): Standing {
  const { attempt, claim } = i;
  const who = `${attempt.claim.kind} ${attempt.claim.namespace}/${attempt.claim.name}`;
  if (!claim)
    return {
      ok: false,
      phase: "RequestFailed",
      reason: StatusReason.ClaimNotFound,
      message: `${who} does not exist`,
    };
  if (claim.metadata.deletionTimestamp)
    return {
      ok: false,
      phase: "RequestFailed",
      reason: StatusReason.ClaimDeleting,
      message: `${who} is being deleted`,
    };
  // A WebhookClaim's applier is its own endpoint: the claim names itself.
  const ref =
    attempt.claim.kind === "WebhookClaim"
      ? { name: claim.metadata.name, namespace: claim.metadata.namespace }
      : applierRefOf(attempt.claim.kind, claim);
  if (
    ref?.name !== attempt.applier.name ||
    (ref?.namespace ?? claim.metadata.namespace) !== attempt.applier.namespace
  ) {
    return {
      ok: false,
      phase: "Rejected",
      reason: StatusReason.ApplierMismatch,
      message: `${who} holds ${ref?.namespace ?? "?"}/${ref?.name ?? "nothing"}, not ${attempt.applier.namespace}/${attempt.applier.name}`,
    };
  }
  const hold = {
    claimKind: attempt.claim.kind,
    claimNamespace: attempt.claim.namespace,
    applierNamespace: attempt.applier.namespace,
    applierName: attempt.applier.name,
  };
  if (!mayHold(hold, i.grants))
    return {
      ok: false,
      phase: "Dropped",
      reason: StatusReason.ApplierNamespaceNotAllowed,
      message: notAllowedMessage(hold),
    };
  const inControl = conditionIn(storedConditionsOf(claim), "InControl");
  if (inControl?.status !== "True") {
    const waiting = inControl?.reason === StatusReason.HeldByAnotherClaim;
    return {
      ok: false,
      phase: "RequestFailed",
      reason: waiting ? StatusReason.HeldByAnotherClaim : StatusReason.NotInControl,
      message: waiting
        ? `${who} waits in line: ${inControl?.message ?? "another claim holds the applier"}`
        : `${who} is not in control of its applier (InControl is ${inControl?.status ?? "unset"})`,
    };
  }
  const standing = attempt.targets.filter((t) => {
    const o = i.targets.get(`${t.namespace}/${t.name}`);
    if (!o || o.metadata.uid !== t.uid || o.metadata.deletionTimestamp) return false;
    if (targetField(o, "suspend") === true || targetField(o, "branch") !== attempt.branch) return false;
    const c = targetField(o, "claimRef");
    const claimNs = c?.namespace ?? t.namespace;
    if (
      c?.kind !== attempt.claim.kind ||
      c.name !== attempt.claim.name ||
      claimNs !== attempt.claim.namespace
    )
      return false;
    // A GitProvider in another namespace must still be there and admit the GitTarget's namespace
    // (the worker's rule); one in the GitTarget's own namespace always admits it.
    const providerKey = providerKeyOf(o);
    if (providerKey !== undefined && !providerKey.startsWith(`${t.namespace}/`)) {
      const provider = i.providers?.get(providerKey);
      if (!provider) return false;
      const accessFrom = fieldOf(providerSpecFields, provider.spec, "accessFrom");
      const at = { namespace: provider.metadata.namespace ?? "", name: provider.metadata.name, accessFrom };
      if (providerRefusal({ namespace: t.namespace }, at)) return false;
    }
    if (t.namespace !== attempt.claim.namespace) {
      const from = fieldOf(claimSpecFields, claim.spec, "accessFrom")?.namespaces ?? [];
      if (!from.some((ns) => ns === "*" || ns === t.namespace)) return false;
    }
    return t.reason !== "Refusal" || targetField(o, "onRefusal") === "Reapply";
  });
  if (standing.length === 0) {
    return {
      ok: false,
      phase: "Dropped",
      reason: StatusReason.NoTargetStands,
      message:
        "none of the attempt's GitTargets still holds its reason (gone, recreated, suspended, renamed its claim, its GitProvider gone or not admitting it, or withdrew consent)",
    };
  }
  const held = judgeGovernance(
    attempt,
    claim,
    standing.flatMap((t) => i.targets.get(`${t.namespace}/${t.name}`) ?? []),
    i.now ?? Date.now(),
    i.brought,
    i.approvals,
  );
  if (held) return { ok: false, ...held };
  return { ok: true, targets: standing };
}

export interface RecheckOptions {
  now?: () => number;
  /**
   * Reads what the apply would bring when the claim requires approval (`approvalRecheck`).
   * Without one such an attempt starts nothing: approval is never taken on the attempt's word.
   */
  brought?: BroughtReader;
}

/**
 * Whether an object sets rules an Approval can satisfy or override: whether it has them at all,
 * well formed or not (governance-check.ts judges what they say).
 */
function governed(o: KObject): boolean {
  return isRecord(o.spec) && (o.spec.approval !== undefined || o.spec.changeWindows !== undefined);
}

/** Reads what `judgeStanding` needs, uncached, and judges. */
export async function recheckStanding(
  kube: Kube,
  attempt: Attempt,
  opts: RecheckOptions = {},
): Promise<Standing> {
  const now = opts.now ?? Date.now;
  const claimType = claimTypeOf(attempt.claim.kind);
  // Read together: the executor waits on this right before its write.
  const keys = [...new Set(attempt.targets.map((t) => `${t.namespace}/${t.name}`))];
  const [claim, grants, read] = await Promise.all([
    kube.get<KObject>(claimType, attempt.claim.namespace, attempt.claim.name),
    attempt.applier.namespace === attempt.claim.namespace
      ? Promise.resolve([] as GrantView[])
      : kube
          .list<KObject>(RESOURCES.applierGrant, attempt.applier.namespace)
          .then((l) => l.items.map((g) => grantViewOf(g, attempt.applier.namespace))),
    Promise.all(
      keys.map((key) => {
        const [namespace, name] = key.split("/") as [string, string];
        return kube.get<KObject>(RESOURCES.gitTarget, namespace, name);
      }),
    ),
  ]);
  const targets = new Map<string, KObject>();
  keys.forEach((key, i) => {
    const o = read[i];
    if (o) targets.set(key, o);
  });
  // The approvals and overrides the claim has now (a withdrawn one no longer counts), read only
  // when the claim or a GitTarget sets approval rules or change windows: nothing else uses them,
  // and an ungoverned apply keeps its request count.
  const approvals =
    claim && [claim, ...targets.values()].some(governed)
      ? (await kube.list<KObject>(RESOURCES.approval, attempt.claim.namespace)).items
      : [];
  // Only a GitProvider in another namespace can refuse a GitTarget: read those, once each.
  const providerKeys = [
    ...new Set(
      [...targets.values()]
        .map((o) => ({ key: providerKeyOf(o), ns: o.metadata.namespace }))
        .filter((p) => p.key !== undefined && !p.key.startsWith(`${p.ns}/`))
        .map((p) => p.key as string),
    ),
  ];
  const providerRead = await Promise.all(
    providerKeys.map((key) => {
      const [namespace, name] = key.split("/") as [string, string];
      return kube.get<KObject>(RESOURCES.gitProvider, namespace, name);
    }),
  );
  const providers = new Map<string, KObject>();
  providerKeys.forEach((key, i) => {
    const o = providerRead[i];
    if (o) providers.set(key, o);
  });
  // Approval: what the apply would bring, read only when the claim requires approval.
  const brought =
    claim && opts.brought ? await opts.brought(attempt, claim, [...targets.values()]) : undefined;
  return judgeStanding({
    attempt,
    claim,
    grants,
    targets,
    providers,
    now: now(),
    approvals,
    ...(brought ? { brought } : {}),
  });
}

/**
 * The standing check the executors ask, with a Warning Event on the claim (reason NotApproved,
 * action Refuse) whenever it refuses an attempt for lacking approval: the refusal is reported
 * back to the worker as RequestFailed, and a person looking at the claim sees it too, whoever
 * queued the attempt.
 */
export function standingWithEvents(
  kube: Kube,
  events: EventRecorder,
  opts: RecheckOptions = {},
): (attempt: Attempt) => Promise<Standing> {
  return async (attempt) => {
    const s = await recheckStanding(kube, attempt, opts);
    if (!s.ok && s.reason === StatusReason.NotApproved)
      await events.emit({
        type: "Warning",
        reason: StatusReason.NotApproved,
        action: "Refuse",
        note: `attempt ${attempt.token} for ${attempt.commit} refused at the write: ${s.message}`.slice(
          0,
          1024,
        ),
        regarding: {
          apiVersion: "applygate.dev/v1alpha1",
          kind: attempt.claim.kind,
          namespace: attempt.claim.namespace,
          name: attempt.claim.name,
        },
      });
    return s;
  };
}
