/**
 * The decisions, wired into a worker replica: one `DecisionDriver` per branch the replica owns,
 * attempts queued on `attempts-<kind>` (job id = token, one try: only the worker retries).
 *
 *   const decisions = createDecisions({ redisUrl, prefix, objects, directory, log });
 *   const replica = new Replica({ ...options, attach: decisions.attach });
 *   ...; await replica.stop(); await decisions.close();
 */
import { Queue } from "bullmq";
import { attemptJobName } from "../attempt-job.js";
import { type ApplierKind, type Attempt, attemptsQueue } from "../contract.js";
import type { Directory } from "../directory.js";
import type { KeysSecrets } from "../governance/signatures.js";
import { recollectChannel, watchedTargetKey } from "../keys.js";
import type { Logger } from "../log.js";
import { keepSuperseded } from "../records.js";
import { bullConnection } from "../redis.js";
import type { BranchWorker } from "../worker/branch-worker.js";
import type { Clock } from "../worker/clock.js";
import type { BranchAttachment, BranchContext } from "../worker/replica.js";
import { listBranch, type ObjectSource } from "./catalog.js";
import { type AttemptSender, DecisionDriver } from "./driver.js";
import { withKeyDigests } from "./keys-secrets.js";
import type { ApplyMetrics } from "./metrics.js";
import { DecisionStore } from "./store.js";

export * from "./catalog.js";
export * from "./driver.js";
export * from "./keys-secrets.js";
export * from "./kube-objects.js";
export * from "./metrics.js";
export * from "./store.js";

export interface DecisionsOptions {
  redisUrl: string;
  prefix: string;
  /** GitTargets, claims and appliers (the Kubernetes API: `KubeObjects`; a file: `MemoryObjects`). */
  objects: ObjectSource;
  /** Which GitTargets write a branch (read again at every listing, so new ones are seen). */
  directory: Directory;
  log: Logger;
  clock?: Clock;
  metrics?: ApplyMetrics;
  /** Default 5 s, or SAFETY_NET_LIST_INTERVAL_MS when `changes` tells each change. */
  listIntervalMs?: number;
  /** Told of each change of what a branch's listing reads: the branch lists again at once. */
  changes?: ChangeFeed;
  /** How often commit statuses awaited for approval are read again (default 15 s). */
  commitStatusPollMs?: number;
  /** Where the keys Secrets of signature approval are read (the worker's ClusterCache). */
  keys?: KeysSecrets;
  /** Argo CD's own namespace, where AppProjects live (default `argocd`). */
  argocdNamespace?: string;
}

/** Changes of the cluster by branch key (the worker's ClusterCache). */
export interface ChangeFeed {
  onChange(listener: (keys: Set<string> | "all") => void): () => void;
}

/** The listing period when every change is told: only a safety net against a missed event. */
export const SAFETY_NET_LIST_INTERVAL_MS = 60_000;

export interface Decisions {
  /** Pass as `ReplicaOptions.attach`. */
  attach(ctx: BranchContext): BranchAttachment;
  /** The driver of each branch this process decides for now. */
  readonly drivers: Map<string, DecisionDriver>;
  close(): Promise<void>;
}

/** Queues attempts on their applier kind's queue: job id = token, one try, kept a while for the dashboard. */
export function queueSender(redisUrl: string, prefix: string): AttemptSender & { close(): Promise<void> } {
  const queues = new Map<ApplierKind, Queue>();
  const queueOf = (kind: ApplierKind) => {
    let q = queues.get(kind);
    if (!q) {
      q = new Queue(attemptsQueue(kind), {
        connection: bullConnection(redisUrl),
        prefix,
      });
      // A lost connection fails the add, which the driver feeds back as RequestFailed.
      q.on("error", () => {});
      queues.set(kind, q);
    }
    return q;
  };
  return {
    async send(attempt: Attempt) {
      // Named for a person reading the dashboard (branch, applier, commit); the id is the token.
      await queueOf(attempt.applier.kind).add(attemptJobName(attempt), attempt, {
        jobId: attempt.token,
        attempts: 1,
        removeOnComplete: { count: 1000 },
        removeOnFail: { count: 5000 },
      });
    },
    async queued(kind, token) {
      const state = await queueOf(kind).getJobState(token);
      return UNFINISHED_JOB_STATES.has(state);
    },
    async close() {
      await Promise.all([...queues.values()].map((q) => q.close()));
    },
  };
}

/** States of an attempt job no executor finished: waiting for one, or taken by one. */
const UNFINISHED_JOB_STATES = new Set(["waiting", "delayed", "prioritized", "waiting-children", "active"]);

export function createDecisions(o: DecisionsOptions): Decisions {
  const sender = queueSender(o.redisUrl, o.prefix);
  const drivers = new Map<string, DecisionDriver>();
  const listIntervalMs = o.listIntervalMs ?? (o.changes ? SAFETY_NET_LIST_INTERVAL_MS : undefined);
  const unsubscribe = o.changes?.onChange((keys) => {
    for (const [key, d] of drivers) if (keys === "all" || keys.has(key)) d.relistSoon();
  });
  return {
    drivers,
    attach(ctx) {
      let worker: BranchWorker | undefined;
      const driver = new DecisionDriver({
        spec: ctx.spec,
        store: new DecisionStore(ctx.redis, o.prefix, ctx.key),
        lease: ctx.lease,
        async list() {
          const spec = (await o.directory.branch(ctx.key)) ?? ctx.spec;
          // The branch worker learns the same GitTargets (a new one, a suspension, one refused) and
          // its GitProvider's current credentials at each listing.
          worker?.updateTargets(spec.targets, {
            refused: spec.refused,
            baseBranch: spec.baseBranch,
            remote: spec.remote,
          });
          // And the decisions read commit statuses with the GitProvider's current credentials.
          driver.specChanged(spec);
          const listing = await listBranch(o.objects, spec.targets, {
            ...(o.argocdNamespace ? { argocdNamespace: o.argocdNamespace } : {}),
          });
          // The watch plane's coverage of each GitTarget (a live mirror's token, or none).
          if (listing.targets.length > 0) {
            const tokens = await ctx.redis.mget(
              ...listing.targets.map((t) => watchedTargetKey(o.prefix, ctx.key, t.namespace, t.name)),
            );
            listing.targets.forEach((t, i) => {
              const token = tokens[i];
              if (token) t.watch = token;
            });
          }
          // The keys a signature approval trusts, as a digest: a changed Secret is a changed listing.
          await withKeyDigests(listing, o.keys);
          // The tip's tree as the worker last read it, for the GitTargets listed now: a new
          // GitTarget whose folder is already in Git is past the barrier at once.
          const read = await worker?.history.folders();
          if (read) {
            const present = new Set(read.present.map((t) => `${t.namespace}/${t.name}`));
            listing.folders = {
              commit: read.tip,
              present: listing.targets
                .filter((t) => present.has(`${t.namespace}/${t.name}`))
                .map((t) => t.uid),
            };
          }
          return listing;
        },
        objects: o.objects,
        sender,
        log: ctx.log,
        ...(o.clock ? { clock: o.clock } : {}),
        ...(o.metrics ? { metrics: o.metrics } : {}),
        ...(listIntervalMs !== undefined ? { listIntervalMs } : {}),
        ...(o.commitStatusPollMs !== undefined ? { commitStatusPollMs: o.commitStatusPollMs } : {}),
        async recollect(t) {
          await ctx.redis.publish(recollectChannel(o.prefix), JSON.stringify({ branchKey: ctx.key, ...t }));
        },
        async supersede(notice) {
          // Kept for a sidecar that starts following the operation later, then announced.
          await keepSuperseded(ctx.redis, o.prefix, notice);
        },
        ...(o.keys ? { keys: o.keys } : {}),
      });
      drivers.set(ctx.key, driver);
      return {
        hooks: driver.hooks,
        quiet: () => driver.quiet(),
        start: (w) => {
          worker = w;
          return driver.start(w, w.history);
        },
        async stop() {
          await driver.stop();
          if (drivers.get(ctx.key) === driver) drivers.delete(ctx.key);
        },
      };
    },
    async close() {
      unsubscribe?.();
      await Promise.all([...drivers.values()].map((d) => d.stop()));
      await sender.close();
    },
  };
}
