/**
 * kustomize-controller's Kustomization reconcile (kustomize-controller v1.9.x), step by step:
 * finalizer, suspend check (spec.suspend is read here only, so a suspend never stops a reconcile
 * already past it), source, dependencies, then Ready=Unknown, lastAttemptedRevision, build,
 * server-side apply, inventory, prune, health, Ready. The status is finalised on every return:
 * requestedAt is copied to lastHandledReconcileAt, and observedGeneration follows a Ready=True,
 * whether this reconcile or an earlier one set it.
 */
import * as k8s from "@kubernetes/client-node";
import type { Logger } from "pino";
import { errorMessage } from "../../../queue/errors.js";
import { type Clock, sleep } from "../clock.js";
import { formatDuration, parseDuration } from "../duration.js";
import type { ArtifactStore } from "./artifacts.js";
import {
  BuildError,
  build,
  type Manifest,
  normalizePath,
  OWNER_NAME_LABEL,
  OWNER_NAMESPACE_LABEL,
  PathNotFound,
  pathExists,
  withOwnerLabels,
} from "./build.js";
import { HEALTHY, isTrue, READY, RECONCILING, removeCondition, setCondition } from "./conditions.js";
import { upsertHistory } from "./history.js";
import {
  apiVersionOf,
  compareApplyOrder,
  entryOf,
  type InventoryEntry,
  refOf,
  sortEntries,
  splitApiVersion,
  staleEntries,
} from "./inventory.js";
import { FINALIZER, isNotFound, type Kind, type Kube } from "./kube.js";
import { REQUESTED_AT } from "./predicates.js";
import { type Obj, OwnWrites, type Watcher } from "./watcher.js";
import type { Outcome } from "./workqueue.js";

export const KUSTOMIZATION: Kind = {
  group: "kustomize.toolkit.fluxcd.io",
  version: "v1",
  plural: "kustomizations",
};
export const FIELD_MANAGER = "kustomize-controller";
export const STATUS_MANAGER = "gotk-kustomize-controller";
const PRUNE_DISABLED = "kustomize.toolkit.fluxcd.io/prune";

export type InjectedFailure = "build" | "health";

export interface KustomizationDeps {
  kube: Kube;
  cache: () => Watcher;
  sources: () => Watcher;
  store: ArtifactStore;
  clock: Clock;
  log: Logger;
  buildMs: () => number;
  perObjectApplyMs: () => number;
  dependencyRequeueMs: () => number;
  scaled: (ms: number) => number;
  started: (key: string) => void;
  applied: (key: string, revision: string) => void;
  takeFailure: (key: string) => InjectedFailure | undefined;
}

type Status = Record<string, any>;

export class KustomizationController {
  readonly #objects = new OwnWrites(() => this.d.cache());
  constructor(private readonly d: KustomizationDeps) {}

  forget(key: string): void {
    this.#objects.forget(key);
  }

  async reconcile(key: string): Promise<Outcome> {
    const [namespace = "", name = ""] = key.split("/");
    const obj = this.#objects.current(namespace, name);
    if (!obj) return {};
    const status: Status = structuredClone(obj.status ?? {});
    const before = JSON.stringify(status);
    const write = async () => {
      this.#objects.wrote(key, await this.d.kube.patchStatus(KUSTOMIZATION, obj, status, STATUS_MANAGER));
    };
    let finalize = true;
    try {
      if (obj.metadata?.deletionTimestamp) {
        finalize = false;
        await this.#finalizeDeletion(obj);
        return {};
      }
      if (!(obj.metadata?.finalizers ?? []).includes(FINALIZER)) {
        const updated = await this.d.kube.setFinalizers(
          KUSTOMIZATION,
          obj,
          [...(obj.metadata?.finalizers ?? []), FINALIZER],
          STATUS_MANAGER,
        );
        this.#objects.wrote(key, updated);
        return { requeue: true };
      }
      if (obj.spec?.suspend) {
        this.d.log.info({ kustomization: key }, "Reconciliation is suspended for this object");
        return {};
      }
      return await this.#reconcileActive(key, obj, status, write);
    } finally {
      if (finalize) {
        const token = obj.metadata?.annotations?.[REQUESTED_AT];
        if (token !== undefined) status.lastHandledReconcileAt = token;
        if (isTrue(status.conditions, READY)) {
          status.conditions = removeCondition(status.conditions, RECONCILING);
          status.observedGeneration = obj.metadata?.generation;
        } else if (getStatus(status.conditions, READY) === "False") {
          status.conditions = (status.conditions ?? []).map((c: any) =>
            c.type === RECONCILING ? { ...c, reason: "ProgressingWithRetry" } : c,
          );
        }
        if (JSON.stringify(status) !== before) await write();
      }
    }
  }

  async #reconcileActive(
    key: string,
    obj: Obj,
    status: Status,
    write: () => Promise<void>,
  ): Promise<Outcome> {
    const interval = this.d.scaled(parseDuration(obj.spec?.interval) ?? 600_000);
    const retry = obj.spec?.retryInterval
      ? this.d.scaled(parseDuration(obj.spec.retryInterval) ?? 0)
      : interval;
    const depRequeue = this.d.scaled(this.d.dependencyRequeueMs());
    const generation = obj.metadata?.generation ?? 0;
    const now = () => this.d.clock.now();
    const fail = (reason: string, message: string) => {
      status.conditions = setCondition(
        status.conditions,
        { type: READY, status: "False", reason, message, observedGeneration: generation },
        now(),
      );
    };
    this.d.started(key);

    const ref = obj.spec?.sourceRef ?? {};
    // Flux takes an empty namespace for none (getSource: `if Namespace != ""`).
    const srcNs = ref.namespace || obj.metadata?.namespace;
    const src = ref.kind === "GitRepository" ? this.d.sources().get(srcNs, ref.name) : undefined;
    if (!src) {
      fail("ArtifactFailed", `Source '${ref.kind}/${srcNs}/${ref.name}' not found`);
      return { requeueAfterMs: retry };
    }
    const artifact = src.status?.artifact;
    if (!artifact) {
      fail("ArtifactFailed", `Source artifact not found, retrying in ${formatDuration(depRequeue)}`);
      return { requeueAfterMs: depRequeue };
    }
    const revision: string = artifact.revision;

    if ((obj.spec?.dependsOn ?? []).length > 0) {
      const notReady = await this.#checkDependencies(obj, src, revision);
      if (notReady) {
        fail("DependencyNotReady", notReady);
        this.d.log.info({ kustomization: key }, "Dependencies do not meet ready condition");
        return { requeueAfterMs: depRequeue };
      }
    }

    const ok = await this.#reconcileRevision(key, obj, status, write, revision, artifact, fail);
    return { requeueAfterMs: ok ? interval : retry };
  }

  async #reconcileRevision(
    key: string,
    obj: Obj,
    status: Status,
    write: () => Promise<void>,
    revision: string,
    artifact: { path?: string; digest?: string },
    fail: (reason: string, message: string) => void,
  ): Promise<boolean> {
    const started = this.d.clock.now();
    const now = () => this.d.clock.now();
    const generation = obj.metadata?.generation ?? 0;
    const timeout = formatDuration(parseDuration(obj.spec?.timeout ?? obj.spec?.interval) ?? 0);
    const progress = (message: string) => {
      status.conditions = setCondition(
        status.conditions,
        { type: RECONCILING, status: "True", reason: "Progressing", message, observedGeneration: generation },
        now(),
      );
    };
    const log = this.d.log.child({ kustomization: key, revision });

    status.conditions = setCondition(
      status.conditions,
      {
        type: READY,
        status: "Unknown",
        reason: "Progressing",
        message: "Reconciliation in progress",
        observedGeneration: generation,
      },
      now(),
    );
    progress(`Fetching manifests for revision ${revision} with a timeout of ${timeout}`);
    await write();

    const oldInventory: InventoryEntry[] = status.inventory?.entries ?? [];
    const stored = this.d.store.get(artifact);
    if (!stored) {
      fail("ArtifactFailed", `failed to fetch artifact from ${artifact.path}: 404 Not Found`);
      return false;
    }
    if (!pathExists(stored.files, normalizePath(obj.spec?.path))) {
      fail("ArtifactFailed", `kustomization path not found: ${obj.spec?.path ?? "."}`);
      return false;
    }

    status.lastAttemptedRevision = revision;
    progress(`Building manifests for revision ${revision} with a timeout of ${timeout}`);
    await write();

    await sleep(this.d.clock, this.d.buildMs());
    const injected = this.d.takeFailure(key);
    if (injected === "build") {
      fail("BuildFailed", "kustomize build failed: injected build failure");
      return false;
    }
    let built: ReturnType<typeof build>;
    try {
      built = build(stored.files, obj.spec?.path, { targetNamespace: obj.spec?.targetNamespace });
    } catch (err) {
      if (err instanceof BuildError || err instanceof PathNotFound) {
        fail("BuildFailed", err.message);
        return false;
      }
      throw err;
    }
    const history = (reason: string) => {
      status.history = upsertHistory(status.history, {
        digest: built.digest,
        at: now(),
        durationMs: now() - started,
        status: reason,
        metadata: { revision },
      });
    };

    progress(`Detecting drift for revision ${revision} with a timeout of ${timeout}`);
    await write();

    let applied: InventoryEntry[];
    try {
      applied = await this.#apply(obj, built.objects);
    } catch (err) {
      history("ReconciliationFailed");
      fail("ReconciliationFailed", errorMessage(err));
      return false;
    }
    this.d.applied(key, revision);
    log.info({ objects: applied.length }, "server-side apply completed");
    status.inventory = { entries: sortEntries(applied) };

    const stale = staleEntries(oldInventory, applied);
    if (obj.spec?.prune && stale.length > 0) {
      const survivors = await this.#prune(obj, stale);
      if (survivors.length > 0) {
        status.inventory = { entries: sortEntries([...applied, ...survivors]) };
        history("PruneFailed");
        fail("PruneFailed", `failed to delete ${survivors.map((e) => e.id).join(", ")}`);
        return false;
      }
    }

    if (injected === "health") {
      const message = `health check failed after ${formatDuration(now() - started)}: injected health check failure`;
      status.conditions = setCondition(
        status.conditions,
        {
          type: HEALTHY,
          status: "False",
          reason: "HealthCheckFailed",
          message,
          observedGeneration: generation,
        },
        now(),
      );
      history("HealthCheckFailed");
      fail("HealthCheckFailed", message);
      return false;
    }
    status.conditions = removeCondition(status.conditions, HEALTHY);

    status.lastAppliedRevision = revision;
    status.conditions = setCondition(
      status.conditions,
      {
        type: READY,
        status: "True",
        reason: "ReconciliationSucceeded",
        message: `Applied revision: ${revision}`,
        observedGeneration: generation,
      },
      now(),
    );
    history("ReconciliationSucceeded");
    return true;
  }

  /** Server-side apply of every object, cluster definitions first, as field manager kustomize-controller. */
  async #apply(obj: Obj, objects: Manifest[]): Promise<InventoryEntry[]> {
    const name = obj.metadata?.name as string;
    const namespace = obj.metadata?.namespace as string;
    const ordered = objects
      .map((o) => ({
        o,
        ref: {
          ...splitApiVersion(o.apiVersion),
          kind: o.kind,
          namespace: o.metadata.namespace ?? "",
          name: o.metadata.name,
        },
      }))
      .sort((a, b) => compareApplyOrder(a.ref, b.ref));
    const entries: InventoryEntry[] = [];
    for (const { o } of ordered) {
      await sleep(this.d.clock, this.d.perObjectApplyMs());
      let result: k8s.KubernetesObject;
      try {
        result = await this.d.kube.objects.patch(
          withOwnerLabels(o, name, namespace) as k8s.KubernetesObject,
          undefined,
          undefined,
          FIELD_MANAGER,
          true,
          k8s.PatchStrategy.ServerSideApply,
        );
      } catch (err) {
        throw new Error(
          `${o.kind}/${o.metadata.namespace ?? ""}/${o.metadata.name} apply failed: ${apiMessage(err)}`,
        );
      }
      const { group, version } = splitApiVersion(o.apiVersion);
      entries.push(
        entryOf({
          namespace: result.metadata?.namespace ?? "",
          name: o.metadata.name,
          group,
          version,
          kind: o.kind,
        }),
      );
    }
    return entries;
  }

  /** Deletes objects that left the inventory and still carry our owner labels; returns those not deleted. */
  async #prune(obj: Obj, stale: InventoryEntry[]): Promise<InventoryEntry[]> {
    const survivors: InventoryEntry[] = [];
    for (const entry of stale) {
      const ref = refOf(entry);
      const header = {
        apiVersion: apiVersionOf(ref),
        kind: ref.kind,
        metadata: { name: ref.name, ...(ref.namespace ? { namespace: ref.namespace } : {}) },
      };
      try {
        const live = await this.d.kube.objects.read(header);
        const labels = live.metadata?.labels ?? {};
        const ours =
          labels[OWNER_NAME_LABEL] === obj.metadata?.name &&
          labels[OWNER_NAMESPACE_LABEL] === obj.metadata?.namespace;
        if (!ours || live.metadata?.annotations?.[PRUNE_DISABLED] === "disabled") continue;
        await this.d.kube.objects.delete(header, undefined, undefined, undefined, undefined, "Background");
      } catch (err) {
        if (isNotFound(err)) continue;
        this.d.log.warn({ id: entry.id, err: apiMessage(err) }, "prune failed");
        survivors.push(entry);
      }
    }
    return survivors;
  }

  /** Every dependsOn entry must exist, be Ready at its generation and, on the same source, at this revision. */
  async #checkDependencies(obj: Obj, src: Obj, revision: string): Promise<string | undefined> {
    for (const dep of obj.spec?.dependsOn ?? []) {
      const ns = dep.namespace ?? obj.metadata?.namespace;
      const id = `${ns}/${dep.name}`;
      const d = await this.d.kube.get(KUSTOMIZATION, ns, dep.name);
      if (!d) return `dependency '${id}' not found`;
      const conditions = d.status?.conditions ?? [];
      if (conditions.length === 0 || d.metadata?.generation !== d.status?.observedGeneration)
        return `dependency '${id}' is not ready`;
      if (!isTrue(conditions, READY)) return `dependency '${id}' is not ready`;
      const depRef = d.spec?.sourceRef ?? {};
      const sameSource =
        depRef.kind === src.kind &&
        depRef.name === src.metadata?.name &&
        (depRef.namespace || d.metadata?.namespace) === src.metadata?.namespace;
      if (sameSource && d.status?.lastAppliedRevision !== revision)
        return `dependency '${id}' revision is not up to date`;
    }
    return undefined;
  }

  /** A Kustomization being deleted prunes its inventory (spec.prune, not suspended), then lets go. */
  async #finalizeDeletion(obj: Obj): Promise<void> {
    const entries: InventoryEntry[] = obj.status?.inventory?.entries ?? [];
    if (!obj.spec?.suspend && obj.spec?.prune && entries.length > 0) await this.#prune(obj, entries);
    const rest = (obj.metadata?.finalizers ?? []).filter((f) => f !== FINALIZER);
    if (rest.length !== (obj.metadata?.finalizers ?? []).length)
      await this.d.kube.setFinalizers(KUSTOMIZATION, obj, rest, STATUS_MANAGER);
  }
}

function getStatus(list: any[] | undefined, type: string): string | undefined {
  return list?.find((c) => c.type === type)?.status;
}

export function apiMessage(err: unknown): string {
  const body = (err as { body?: unknown })?.body;
  if (typeof body === "string") {
    try {
      return (JSON.parse(body) as { message?: string }).message ?? body;
    } catch {
      return body;
    }
  }
  return errorMessage(err);
}
