/**
 * fluxsim: Flux's source-controller (GitRepository) and kustomize-controller (Kustomization),
 * simulated in-process against any API server reached through a KubeConfig, with the real
 * @kubernetes/client-node (informers for both kinds, status through the status subresource,
 * objects by server-side apply). docs/testing-fluxsim.md lists the facts it reproduces.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { KubeConfig } from "@kubernetes/client-node";
import type { Logger } from "pino";
import { errorMessage } from "../../../queue/errors.js";
import { silentLogger } from "../../../queue/log.js";
import { type Clock, realClock } from "../clock.js";
import { ArtifactStore } from "./artifacts.js";
import { GIT_REPOSITORY, GitRepositoryController } from "./gitrepository.js";
import { Kube } from "./kube.js";
import { type InjectedFailure, KUSTOMIZATION, KustomizationController } from "./kustomization.js";
import { dependentsOf, queuesOwnReconcile, sourceRevisionChanged } from "./predicates.js";
import { keyOf, Watcher } from "./watcher.js";
import { WorkQueue } from "./workqueue.js";

export type { Clock } from "../clock.js";

export interface FluxKnobs {
  /** Added before every GitRepository fetch (the source-controller's round trip to Git). */
  fetchLatencyMs: number;
  /** Build and apply time per object; the seed measured about 4 ms per object at 200 objects. */
  perObjectApplyMs: number;
  /** Added to every build, whatever its size. */
  buildMs: number;
  /** Multiplies spec.interval, spec.retryInterval and the dependency requeue, so tests can run fast. */
  defaultIntervalScale: number;
  /** kustomize-controller --requeue-dependency (30 s upstream), before the scale. */
  dependencyRequeueMs: number;
}

export const DEFAULT_KNOBS: FluxKnobs = {
  fetchLatencyMs: 0,
  perObjectApplyMs: 4,
  buildMs: 0,
  defaultIntervalScale: 1,
  dependencyRequeueMs: 30_000,
};

export interface ObjectName {
  namespace: string;
  name: string;
}

export interface FluxSim {
  /** Live knobs: changing a field takes effect at the next step that reads it. */
  knobs: FluxKnobs;
  /** The next real reconcile of that Kustomization fails: at the build, or at the health check after its apply. */
  failNextApply(name: ObjectName, kind: InjectedFailure): void;
  /** Real (non-suspended) reconciles of a Kustomization started so far. */
  reconciles(ref: ObjectName): number;
  /** Real (non-suspended) reconciles of a GitRepository started so far. */
  fetches(ref: ObjectName): number;
  /** Revisions whose server-side apply completed, oldest first, for a Kustomization. */
  appliedRevisions(ref: ObjectName): string[];
  /** Resolves when no reconcile of either controller is queued or running (timers pending do not count). */
  idle(): Promise<void>;
  /** Stops watches and timers, and waits for reconciles already running. */
  stop(): Promise<void>;
}

export interface FluxSimOptions {
  kubeConfig: KubeConfig;
  clock?: Clock;
  knobs?: Partial<FluxKnobs>;
  log?: Logger;
}

const k = (r: ObjectName) => `${r.namespace}/${r.name}`;

export async function startFluxSim(opts: FluxSimOptions): Promise<FluxSim> {
  const clock = opts.clock ?? realClock;
  const log = (opts.log ?? silentLogger()).child({ component: "fluxsim" });
  const knobs: FluxKnobs = { ...DEFAULT_KNOBS, ...opts.knobs };
  const kube = new Kube(opts.kubeConfig);
  const store = new ArtifactStore();
  const scratchRoot = await mkdtemp(join(tmpdir(), "fluxsim-"));
  const scaled = (ms: number) => Math.max(1, Math.round(ms * knobs.defaultIntervalScale));
  const maxBackoff = () => scaled(1_000_000);

  const started = new Map<string, number>();
  const fetched = new Map<string, number>();
  const applied = new Map<string, string[]>();
  const failures = new Map<string, InjectedFailure>();
  const bump = (m: Map<string, number>, key: string) => m.set(key, (m.get(key) ?? 0) + 1);

  let sourceCache: Watcher | undefined;
  let ksCache: Watcher | undefined;

  const sources = new GitRepositoryController({
    kube,
    kc: opts.kubeConfig,
    cache: () => sourceCache as Watcher,
    store,
    clock,
    log: log.child({ controller: "gitrepository" }),
    scratchRoot,
    fetchLatencyMs: () => knobs.fetchLatencyMs,
    scaled,
    counted: (key) => bump(fetched, key),
  });
  const kustomizations = new KustomizationController({
    kube,
    cache: () => ksCache as Watcher,
    sources: () => sourceCache as Watcher,
    store,
    clock,
    log: log.child({ controller: "kustomization" }),
    buildMs: () => knobs.buildMs,
    perObjectApplyMs: () => knobs.perObjectApplyMs,
    dependencyRequeueMs: () => knobs.dependencyRequeueMs,
    scaled,
    started: (key) => bump(started, key),
    applied: (key, rev) => applied.set(key, [...(applied.get(key) ?? []), rev]),
    takeFailure: (key) => {
      const f = failures.get(key);
      failures.delete(key);
      return f;
    },
  });

  const onError = (controller: string) => (key: string, err: unknown) =>
    log.warn({ controller, key, err: errorMessage(err) }, "reconcile failed; retrying with backoff");
  // source-controller runs 2 workers and kustomize-controller 4 by default (--concurrent).
  const sourceQueue = new WorkQueue(
    clock,
    2,
    (key) => sources.reconcile(key),
    onError("gitrepository"),
    maxBackoff,
  );
  const ksQueue = new WorkQueue(
    clock,
    4,
    (key) => kustomizations.reconcile(key),
    onError("kustomization"),
    maxBackoff,
  );

  sourceCache = new Watcher(
    opts.kubeConfig,
    GIT_REPOSITORY.group,
    GIT_REPOSITORY.version,
    GIT_REPOSITORY.plural,
    clock,
    log,
    (type, obj, old) => {
      const key = keyOf(obj);
      if (type === "delete") sources.forget(key);
      if (queuesOwnReconcile(type, obj, old)) sourceQueue.add(key);
      if (sourceRevisionChanged(type, obj, old) && ksCache)
        for (const ks of dependentsOf(obj, ksCache.list())) ksQueue.add(keyOf(ks));
    },
  );
  ksCache = new Watcher(
    opts.kubeConfig,
    KUSTOMIZATION.group,
    KUSTOMIZATION.version,
    KUSTOMIZATION.plural,
    clock,
    log,
    (type, obj, old) => {
      const key = keyOf(obj);
      if (type === "delete") kustomizations.forget(key);
      if (queuesOwnReconcile(type, obj, old)) ksQueue.add(key);
    },
  );
  await Promise.all([sourceCache.start(), ksCache.start()]);

  let stopped = false;
  return {
    knobs,
    failNextApply: (name, kind) => failures.set(k(name), kind),
    reconciles: (ref) => started.get(k(ref)) ?? 0,
    fetches: (ref) => fetched.get(k(ref)) ?? 0,
    appliedRevisions: (ref) => [...(applied.get(k(ref)) ?? [])],
    async idle() {
      // An event in flight can queue work right after both queues drained: settle over a few turns.
      for (let quiet = 0; quiet < 3; ) {
        await Promise.all([sourceQueue.idle(), ksQueue.idle()]);
        await new Promise((r) => setImmediate(r));
        quiet = sourceQueue.isIdle() && ksQueue.isIdle() ? quiet + 1 : 0;
      }
    },
    async stop() {
      if (stopped) return;
      stopped = true;
      await Promise.all([sourceCache?.stop(), ksCache?.stop()]);
      await Promise.all([sourceQueue.stop(), ksQueue.stop()]);
      await rm(scratchRoot, { recursive: true, force: true });
    },
  };
}
