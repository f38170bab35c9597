/**
 * Which Secrets the catalog must read, and when a read's outcome is worth a log line. Pure: the
 * cluster catalog fetches exactly these Secrets by name (the gateway may `get` a Secret, never
 * list or watch them).
 */
import type { GitProvider, GitTarget, WebhookClaim } from "../queue/crds/index.js";

const DEFAULT_NAMESPACE = "default";

/** How often the cluster catalog reads every named Secret again. */
export const DEFAULT_SECRET_REFRESH_MS = 30_000;

export interface SecretRef {
  namespace: string;
  name: string;
  /** Who names it, e.g. "GitProvider apps/github": for logs, so an operator knows what is not ready. */
  usedBy: string[];
}

export const secretKey = (namespace: string, name: string) => `${namespace}/${name}`;

/**
 * The Secrets named by GitProviders (`webhookSecretRef`), GitTargets (`intakeSecretRef`) and
 * WebhookClaims (`secretRef`), keyed by namespace/name.
 */
export function namedSecrets(
  providers: readonly GitProvider[],
  targets: readonly GitTarget[],
  webhookClaims: readonly WebhookClaim[] = [],
): Map<string, SecretRef> {
  const refs = new Map<string, SecretRef>();
  const add = (namespace: string, name: string, owner: string) => {
    const key = secretKey(namespace, name);
    const ref = refs.get(key) ?? { namespace, name, usedBy: [] };
    ref.usedBy.push(owner);
    refs.set(key, ref);
  };
  for (const p of providers) {
    const ns = p.metadata.namespace ?? DEFAULT_NAMESPACE;
    add(ns, p.spec.webhookSecretRef.name, `GitProvider ${secretKey(ns, p.metadata.name)}`);
  }
  for (const t of targets) {
    const ref = t.spec.intakeSecretRef?.name;
    if (!ref) continue;
    const ns = t.metadata.namespace ?? DEFAULT_NAMESPACE;
    add(ns, ref, `GitTarget ${secretKey(ns, t.metadata.name)}`);
  }
  for (const c of webhookClaims) {
    const ns = c.metadata.namespace ?? DEFAULT_NAMESPACE;
    add(ns, c.spec.secretRef.name, `WebhookClaim ${secretKey(ns, c.metadata.name)}`);
  }
  return refs;
}

/** Outcome of the last read of a Secret: its values, or the HTTP status that refused it (0: no answer). */
export type ReadOutcome = { ok: true; resourceVersion: string } | { ok: false; status: number };

/** A line is logged only when the outcome changes kind (read → refused, 403 → 404, refused → read). */
export function outcomeChanged(before: ReadOutcome | undefined, after: ReadOutcome): boolean {
  if (!before) return !after.ok;
  if (before.ok !== after.ok) return true;
  return !before.ok && !after.ok && before.status !== after.status;
}

/** 403 and 404 mean the Secret is unusable now; anything else (5xx, no answer) keeps the last value read. */
export const dropsValue = (status: number) => status === 403 || status === 404;
