/**
 * A GitProvider's status, as the gateway knows it: Ready once its webhook Secret has been read and
 * holds a `token`, with the receiver path (`status.webhookPath`) that token names; Accepted while
 * no older GitProvider holds its repository without admitting its namespace (queue/tenancy.ts),
 * and Ready=False too while it is refused. The gateway is the one writer of GitProvider status
 * (every replica computes the same status from the same objects, so their writes agree). Pure.
 */

import { StatusReason } from "../queue/crds/reasons.js";
import type { ReadOutcome } from "./secret-refs.js";

export interface ProviderCondition {
  type: "Ready" | "Accepted";
  status: "True" | "False" | "Unknown";
  reason: string;
  message: string;
  lastTransitionTime: string;
  observedGeneration?: number;
}

/** A condition as read back from the GitProvider (its type any the object holds). */
export type SeenCondition = Omit<ProviderCondition, "type"> & { type: string };

export interface ProviderStatus {
  conditions: ProviderCondition[];
  /** null clears a path the provider no longer has (a merge patch keeps what it does not mention). */
  webhookPath: string | null;
  observedGeneration?: number;
}

export interface ProviderFacts {
  namespace: string;
  webhookSecretName: string;
  generation?: number;
  /** The receiver path, when the webhook Secret was read and holds `token`. */
  hookPath?: string;
  /** The last read of the webhook Secret; undefined before the first read ended. */
  secret?: ReadOutcome;
  /** Why it may not be used: another GitProvider holds its repository. */
  refused?: { reason: string; message: string };
}

export function providerStatus(
  f: ProviderFacts,
  previous: readonly SeenCondition[] | undefined,
  now: Date,
): ProviderStatus {
  const secret = `Secret ${f.namespace}/${f.webhookSecretName}`;
  let ready: Omit<ProviderCondition, "type" | "lastTransitionTime">;
  if (f.hookPath)
    ready = {
      status: "True",
      reason: StatusReason.WebhookReady,
      message: `pushes are received at ${f.hookPath}`,
    };
  else if (!f.secret)
    ready = { status: "Unknown", reason: StatusReason.SecretPending, message: `${secret} not read yet` };
  else if (f.secret.ok)
    ready = { status: "False", reason: StatusReason.SecretKeyMissing, message: `${secret} has no key token` };
  else if (f.secret.status === 403)
    ready = {
      status: "False",
      reason: StatusReason.SecretForbidden,
      message: `the gateway may not read ${secret}: bind ClusterRole applygate-secret-reader in ${f.namespace} (docs/security.md)`,
    };
  else if (f.secret.status === 404)
    ready = { status: "False", reason: StatusReason.SecretNotFound, message: `${secret} does not exist` };
  else
    ready = {
      status: "Unknown",
      reason: StatusReason.SecretUnreadable,
      message: `${secret} could not be read (${f.secret.status || "no answer"}); retried on each refresh`,
    };
  if (f.refused) ready = { status: "False", ...f.refused };
  const accepted: Omit<ProviderCondition, "type" | "lastTransitionTime"> = f.refused
    ? { status: "False", ...f.refused }
    : {
        status: "True",
        reason: StatusReason.Accepted,
        message: "no other GitProvider holds its repository",
      };
  const gen = f.generation !== undefined ? { observedGeneration: f.generation } : {};
  const condition = (type: ProviderCondition["type"], c: typeof ready): ProviderCondition => {
    const before = previous?.find((x) => x.type === type);
    const lastTransitionTime =
      before && before.status === c.status ? before.lastTransitionTime : now.toISOString();
    return { type, ...c, lastTransitionTime, ...gen };
  };
  return {
    conditions: [condition("Ready", ready), condition("Accepted", accepted)],
    webhookPath: f.hookPath ?? null,
    ...gen,
  };
}

/** Whether writing `next` over `current` would change anything (lastTransitionTime follows the rest). */
export function statusDiffers(
  current:
    | { webhookPath?: string | null; observedGeneration?: number; conditions?: readonly SeenCondition[] }
    | undefined,
  next: ProviderStatus,
): boolean {
  const have = current ?? {};
  if ((have.webhookPath ?? null) !== next.webhookPath) return true;
  if (have.observedGeneration !== next.observedGeneration) return true;
  const conds = have.conditions ?? [];
  if (conds.length !== next.conditions.length) return true;
  return next.conditions.some((n) => {
    const c = conds.find((x) => x.type === n.type);
    return (
      !c ||
      c.status !== n.status ||
      c.reason !== n.reason ||
      c.message !== n.message ||
      c.observedGeneration !== n.observedGeneration
    );
  });
}
