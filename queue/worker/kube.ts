/**
 * The Kubernetes side of the worker, kept out of the branch worker's loop: GitTarget status
 * written through the status subresource (merge patch with a resourceVersion precondition; a lost
 * race re-reads and retries), and branch specs read from GitProviders, GitTargets and Secrets.
 */
import { randomBytes } from "node:crypto";
import { hostname } from "node:os";
import * as k8s from "@kubernetes/client-node";
import {
  API_VERSION,
  GIT_PROVIDER_PLURAL,
  GIT_TARGET_KIND,
  GIT_TARGET_PLURAL,
  type GitProvider,
  type GitTarget,
  GROUP,
  SCOPE_GRANT_PLURAL,
  type ScopeGrant,
  scopeGrant,
  VERSION,
} from "../crds/index.js";
import type { Logger } from "../log.js";
import { type Directory, directoryFromObjects } from "./directory.js";
import {
  type Condition,
  type PublicationReport,
  publicationConditions,
  publicationStatus,
  refusalCondition,
  type StatusSink,
  type TargetRef,
  type WriteRefusal,
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
    for (const t of targets)
      await this.write(t, (current, generation) => {
        const previous = current.status?.conditions as Condition[] | undefined;
        const own = publicationConditions(report, previous, this.now(), generation);
        // Conditions the publication does not own (WriteRefused) are kept as they are.
        const others = (previous ?? []).filter((c) => !own.some((o) => o.type === c.type));
        return { publication: withNulls(publicationStatus(report)), conditions: [...own, ...others] };
      });
  }

  /** Sets WriteRefused on the GitTarget and records an Event (with `action`) about the refusal. */
  async refused(t: TargetRef, refusal: WriteRefusal | undefined): Promise<void> {
    let uid: string | undefined;
    await this.write(t, (current, generation) => {
      uid = current.metadata.uid;
      const previous = current.status?.conditions as Condition[] | undefined;
      const condition = refusalCondition(refusal, previous, this.now(), generation);
      return { conditions: [...(previous ?? []).filter((c) => c.type !== condition.type), condition] };
    });
    if (!refusal) return;
    const at = new Date(this.now());
    try {
      await this.custom.createNamespacedCustomObject({
        group: "events.k8s.io",
        version: "v1",
        plural: "events",
        namespace: t.namespace,
        body: {
          apiVersion: "events.k8s.io/v1",
          kind: "Event",
          metadata: { name: `${t.name}.${randomBytes(8).toString("hex")}`, namespace: t.namespace },
          eventTime: at.toISOString().replace(/\.(\d{3})Z$/, ".$1000Z"),
          type: "Warning",
          reason: "WriteRefused",
          action: "Refuse",
          note: `write ${refusal.writeId}${refusal.object ? ` (${refusal.object})` : ""} refused (${refusal.reason}): ${refusal.message}`.slice(
            0,
            1024,
          ),
          regarding: {
            apiVersion: API_VERSION,
            kind: GIT_TARGET_KIND,
            namespace: t.namespace,
            name: t.name,
            ...(uid ? { uid } : {}),
          },
          reportingController: "applygate.dev/worker",
          reportingInstance: hostname(),
        },
      });
    } catch (err) {
      this.log.warn(
        { err: (err as Error).message, target: `${t.namespace}/${t.name}` },
        "could not record the refusal Event",
      );
    }
  }

  /** Merge-patches the status the builder returns, re-reading and retrying on a lost race. */
  private async write(
    t: TargetRef,
    build: (current: GitTarget, generation: number | undefined) => Record<string, unknown>,
  ): Promise<void> {
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
      const body = {
        metadata: { resourceVersion: current.metadata.resourceVersion },
        status: {
          ...build(current, generation),
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
    // Without the ScopeGrant kind installed nobody holds a grant: every target keeps its own scope.
    const grants = (
      await list<unknown>(SCOPE_GRANT_PLURAL).catch((err: unknown) => {
        if (statusCode(err) === 404) return [];
        throw err;
      })
    ).flatMap((g) => {
      const r = scopeGrant.safeParse(g);
      return r.success ? [r.data as ScopeGrant] : [];
    });
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
    return directoryFromObjects(providers, targets, secrets, grants).branch(key);
  }
}
