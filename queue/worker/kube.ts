/**
 * The Kubernetes side of the worker, kept out of the branch worker's loop: GitTarget status
 * written through the status subresource (merge patch with a resourceVersion precondition; a lost
 * race re-reads and retries), and branch specs read from GitProviders, GitTargets and Secrets.
 */
import * as k8s from "@kubernetes/client-node";
import {
  GIT_PROVIDER_PLURAL,
  GIT_TARGET_PLURAL,
  type GitProvider,
  type GitTarget,
  GROUP,
  VERSION,
} from "../crds/index.js";
import type { Logger } from "../log.js";
import { type Directory, directoryFromObjects } from "./directory.js";
import {
  type Condition,
  type PublicationReport,
  publicationConditions,
  publicationStatus,
  type StatusSink,
  type TargetRef,
} from "./status.js";

const MERGE = k8s.setHeaderOptions("Content-Type", k8s.PatchStrategy.MergePatch);

function statusCode(err: unknown): number | undefined {
  const e = err as { code?: number; statusCode?: number };
  return e.code ?? e.statusCode;
}

/** A merge patch keeps fields it does not mention: say null for those that no longer apply. */
function withNulls(p: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = { ...p };
  for (const k of ["commit", "publishedAt", "retryingSince", "lastError", "nextRetryAt"])
    if (!(k in out)) out[k] = null;
  return out;
}

export class KubeStatusSink implements StatusSink {
  private readonly custom: k8s.CustomObjectsApi;

  constructor(
    kc: k8s.KubeConfig,
    private readonly log: Logger,
    private readonly now: () => number = Date.now,
    private readonly maxAttempts = 8,
  ) {
    this.custom = kc.makeApiClient(k8s.CustomObjectsApi);
  }

  async report(targets: TargetRef[], report: PublicationReport): Promise<void> {
    for (const t of targets) await this.write(t, report);
  }

  private async write(t: TargetRef, report: PublicationReport): Promise<void> {
    const ref = {
      group: GROUP,
      version: VERSION,
      plural: GIT_TARGET_PLURAL,
      namespace: t.namespace,
      name: t.name,
    };
    for (let attempt = 1; ; attempt++) {
      let current: GitTarget;
      try {
        current = (await this.custom.getNamespacedCustomObject(ref)) as GitTarget;
      } catch (err) {
        if (statusCode(err) === 404) return; // the GitTarget is gone: nothing to report on
        throw err;
      }
      const generation = current.metadata.generation as number | undefined;
      const conditions = publicationConditions(
        report,
        current.status?.conditions as Condition[] | undefined,
        this.now(),
        generation,
      );
      const body = {
        metadata: { resourceVersion: current.metadata.resourceVersion },
        status: {
          publication: withNulls(publicationStatus(report)),
          conditions,
          ...(generation !== undefined ? { observedGeneration: generation } : {}),
        },
      };
      try {
        await this.custom.patchNamespacedCustomObjectStatus({ ...ref, body }, MERGE);
        return;
      } catch (err) {
        // Seed 003: a lost optimistic-concurrency race is re-read and retried, never a wedge.
        if (statusCode(err) !== 409 || attempt >= this.maxAttempts) throw err;
        this.log.debug(
          { target: `${t.namespace}/${t.name}`, attempt },
          "status write conflicted; re-reading",
        );
        await new Promise((r) => setTimeout(r, Math.round(20 * 2 ** attempt * (0.5 + Math.random()))));
      }
    }
  }
}

/** Reads GitProviders, GitTargets and the credential Secrets they name, for every branch lookup. */
export class KubeDirectory implements Directory {
  private readonly custom: k8s.CustomObjectsApi;
  private readonly core: k8s.CoreV1Api;

  constructor(kc: k8s.KubeConfig) {
    this.custom = kc.makeApiClient(k8s.CustomObjectsApi);
    this.core = kc.makeApiClient(k8s.CoreV1Api);
  }

  async branch(key: string) {
    const list = async <T>(plural: string) =>
      (
        (await this.custom.listClusterCustomObject({ group: GROUP, version: VERSION, plural })) as {
          items: T[];
        }
      ).items;
    const providers = await list<GitProvider>(GIT_PROVIDER_PLURAL);
    const targets = await list<GitTarget>(GIT_TARGET_PLURAL);
    const secrets = [];
    for (const p of providers) {
      const ref = p.spec.credentialsSecretRef;
      if (!ref) continue;
      try {
        const s = await this.core.readNamespacedSecret({
          name: ref.name,
          namespace: p.metadata.namespace ?? "default",
        });
        secrets.push({
          kind: "Secret" as const,
          metadata: { name: ref.name, namespace: p.metadata.namespace ?? "default" },
          data: s.data ?? {},
        });
      } catch {
        // A missing Secret leaves the provider without credentials; the push then fails with auth.
      }
    }
    return directoryFromObjects(providers, targets, secrets).branch(key);
  }
}
