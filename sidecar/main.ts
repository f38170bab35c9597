/**
 * `applygate sidecar --applier flux|argocd|webhook`: wires the attempt executor, the claim reconciler and
 * the applier kind's module together. `startSidecar` is the same wiring for the playground and
 * scenario tests.
 */
import { hostname } from "node:os";
import type { KubeConfig } from "@kubernetes/client-node";
import { stopSignal } from "../queue/cli/stop-signal.js";
import {
  allowHttpCredentialsSetting,
  ConfigError,
  commonSettings,
  helpSetting,
  helpText,
  kubeconfigSetting,
  loadConfig,
  metricsHostSetting,
  parsers,
  type Setting,
} from "../queue/config.js";
import { FIELD_MANAGER } from "../queue/contract.js";
import { errorMessage } from "../queue/errors.js";
import { Kube, loadKubeConfig } from "../queue/kube/index.js";
import { createLogger, type Logger } from "../queue/log.js";
import { connectRedis } from "../queue/redis.js";
import { apiServerAnswers, redisAnswersAt, startupWaitSetting, Unreachable } from "../queue/startup-check.js";
import type {
  ApplierDeps,
  ApplierKindModule,
  ClaimController,
  OperationExecutor,
  WindowObserver,
} from "./applier-kind.js";
import { approvalRecheck, publishedFromRedis } from "./approval-recheck.js";
import { ClaimReconciler } from "./claims/reconciler.js";
import { KubeEventRecorder } from "./events.js";
import { type ExecutorHost, startExecutorHost } from "./executor.js";
import { Following } from "./following.js";
import { defaultCacheDir, GitAncestry, remoteFromCluster } from "./git-ancestry.js";
import { readiness, redisAnswersPing, type SidecarHttp, startSidecarHttp } from "./http.js";
import { KINDS, type KindOptions, type SidecarApplier } from "./kinds.js";
import { createSidecarMetrics, type SidecarMetrics } from "./metrics.js";
import { readOperation } from "./operation-record.js";
import { queueReporter } from "./reporter.js";
import { standingWithEvents } from "./standing.js";
import { redisSupersessions, subscribeSupersessions } from "./supersessions.js";
import { redisFreshnessCheck, redisTipCheck } from "./tip-check.js";
import { DEFAULT_WATCHED_KINDS, parseWatchKinds, type WatchedKind } from "./watch-kinds.js";

export type { SidecarApplier } from "./kinds.js";

export interface SidecarOptions<K extends SidecarApplier = SidecarApplier> {
  applier: K;
  kubeConfig: KubeConfig;
  redisUrl: string;
  redisPrefix: string;
  log?: Logger;
  now?: () => Date;
  /** reportingInstance of Events (the pod name). */
  instance?: string;
  /** Claim resync interval (default 60 s). */
  resyncMs?: number;
  /** How long a claim tries to hand its applier back before it lets go, ReleaseFailed (default 10 minutes). */
  releaseTimeoutMs?: number;
  /** Attempts carried out at once (default 16). */
  concurrency?: number;
  /**
   * Folder of the sidecar's own Git clones: what an apply would bring, for the approval check at
   * the write, and Argo CD's stale-operation proof (passed as options.cacheDir). Default under
   * the OS temp dir.
   */
  cacheDir?: string;
  /**
   * Send GitProvider credentials over plain http too (`--allow-http-credentials`): the reads at the
   * write of what an apply would bring (its fetch and commit statuses), and Argo CD's ancestry
   * fetches (passed as options.allowHttpCredentials).
   */
  allowHttpCredentials?: boolean;
  /** The kind's module; loaded from sidecar/<applier>/index.ts when omitted. */
  kindModule?: ApplierKindModule<KindOptions[K]>;
  /** Passed to the kind as deps.options. */
  options?: KindOptions[K];
  /**
   * Serve /metrics, /healthz and /readyz (port 0 = any free port; every interface when host is
   * omitted). Off when omitted, as in-process tests and the playground want.
   */
  serve?: { port: number; host?: string };
}

export interface Sidecar {
  kube: Kube;
  following: Following;
  executor: ExecutorHost;
  reconciler: ClaimReconciler;
  parts: { executor: OperationExecutor; controller: ClaimController; windowObserver?: WindowObserver };
  metrics: SidecarMetrics;
  /** The HTTP endpoints, when `serve` asked for them. */
  http?: SidecarHttp;
  /** Graceful stop: executor first (it gives back what it resumed), then the reconciler. */
  stop(): Promise<void>;
}

export class ApplierNotAvailable extends ConfigError {}

/** Loads sidecar/<applier>/index.ts; a clear one-line error when that kind is not built. */
export async function loadApplierKind<K extends SidecarApplier>(
  applier: K,
): Promise<ApplierKindModule<KindOptions[K]>> {
  const entry = Object.hasOwn(KINDS, applier) ? KINDS[applier] : undefined;
  if (!entry) {
    throw new ApplierNotAvailable(
      `the ${applier} applier is not available: sidecar/${applier}/index.ts does not exist in this build`,
    );
  }
  let mod: Partial<ApplierKindModule<KindOptions[K]>>;
  try {
    mod = await entry.load();
  } catch (err) {
    const e = err as { code?: string; message?: string };
    if (e.code === "ERR_MODULE_NOT_FOUND" && String(e.message).includes(`${applier}/index`)) {
      throw new ApplierNotAvailable(
        `the ${applier} applier is not available: sidecar/${applier}/index.ts does not exist in this build`,
      );
    }
    throw err;
  }
  if (typeof mod.createApplierKind !== "function") {
    throw new ApplierNotAvailable(`sidecar/${applier}/index.ts does not export createApplierKind(deps)`);
  }
  return mod as ApplierKindModule<KindOptions[K]>;
}

export async function startSidecar<K extends SidecarApplier>(opts: SidecarOptions<K>): Promise<Sidecar> {
  const module = opts.kindModule ?? (await loadApplierKind(opts.applier));
  const log = (opts.log ?? createLogger({ name: "sidecar" })).child({ applierKind: opts.applier });
  const now = opts.now ?? (() => new Date());
  const kube = new Kube(opts.kubeConfig, { log });
  const following = new Following(now);
  const events = new KubeEventRecorder(kube, {
    instance: opts.instance ?? hostname(),
    log,
    now,
  });
  const reporter = queueReporter({ redisUrl: opts.redisUrl, prefix: opts.redisPrefix });
  const metrics = createSidecarMetrics({ kinds: [opts.applier], processMetrics: Boolean(opts.serve) });
  // One connection for the short checks: the tip recheck and the readiness PING. It fails fast
  // while Redis is away: an attempt whose check cannot be answered is RequestFailed, and the
  // readiness PING's deadline answers false.
  const checksRedis = connectRedis(opts.redisUrl, { maxRetriesPerRequest: 1 });
  // Served before the claim watch syncs, so the startup probe sees a live process meanwhile.
  let claimsSynced = false;
  const checks = async () => ({
    redis: await redisAnswersPing(checksRedis),
    claimsSynced,
    unsyncedWatches: kube.unsyncedWatches(),
  });
  metrics.readyFrom(async () => readiness(await checks()).ready);
  let http: SidecarHttp | undefined;
  if (opts.serve) {
    try {
      http = await startSidecarHttp({ ...opts.serve, metrics, log, checks });
    } catch (err) {
      checksRedis.disconnect();
      await reporter.close();
      throw err;
    }
    log.info({ port: http.port }, "serving /metrics, /healthz and /readyz");
  }
  // One set of clones per process, shared by the approval check and the kind (Argo CD's proof).
  const git = new GitAncestry({
    cacheDir: opts.cacheDir ?? defaultCacheDir(),
    remoteFor: remoteFromCluster(kube, log, { allowHttpCredentials: opts.allowHttpCredentials === true }),
    log,
  });
  const deps: ApplierDeps<KindOptions[K]> = {
    kind: opts.applier,
    kube,
    log,
    events,
    following,
    reporter,
    // The short-check connection: the webhook kind reads the tool's reports over it.
    redis: checksRedis,
    redisPrefix: opts.redisPrefix,
    now,
    git,
    checks: {
      // The recheck before a resume or sync asks the tip the branch worker recorded.
      tip: redisTipCheck(checksRedis, opts.redisPrefix),
      // Just before that write: the tip again and any edit accepted after the attempt's flush mark.
      freshness: redisFreshnessCheck(checksRedis, opts.redisPrefix),
      // And the decision still holds: the claim in control, the grant, a GitTarget standing, and
      // every commit the apply would bring approved as read now (never on the attempt's word).
      standing: standingWithEvents(kube, events, {
        brought: approvalRecheck({
          kube,
          git,
          published: publishedFromRedis(checksRedis, opts.redisPrefix),
          allowHttpCredentials: opts.allowHttpCredentials === true,
        }),
      }),
    },
    // What the branch worker found superseded, and the tip it records, read on the same connection.
    supersessions: redisSupersessions(checksRedis, opts.redisPrefix),
    // cacheDir is the Argo CD kind's (its ancestry clones); another kind ignores it, as before.
    options: {
      ...(opts.cacheDir ? { cacheDir: opts.cacheDir } : {}),
      ...(opts.allowHttpCredentials ? { allowHttpCredentials: true } : {}),
      ...opts.options,
    } as KindOptions[K],
  };
  const parts = module.createApplierKind(deps);
  const executor = startExecutorHost({
    kind: opts.applier,
    executor: parts.executor,
    reporter,
    following,
    log,
    redisUrl: opts.redisUrl,
    prefix: opts.redisPrefix,
    now,
    metrics,
    ...(opts.concurrency ? { concurrency: opts.concurrency } : {}),
    // An attempt whose process died: recorded on its claim means restart recovery follows it.
    recorded: async (attempt) =>
      (
        await readOperation(kube, {
          type: KINDS[opts.applier].claimType,
          namespace: attempt.claim.namespace,
          name: attempt.claim.name,
        })
      )?.token === attempt.token,
  });
  // The branch worker's supersession notices reach the operation this process runs at once.
  const unsubscribe = subscribeSupersessions({
    redisUrl: opts.redisUrl,
    prefix: opts.redisPrefix,
    log,
    onNotice: (notice) => executor.supersede(notice),
  });
  const reconciler = new ClaimReconciler({
    claimType: KINDS[opts.applier].claimType,
    kube,
    log,
    events,
    following,
    controller: parts.controller,
    executor,
    reporter,
    now,
    metrics,
    ...(opts.resyncMs ? { resyncMs: opts.resyncMs } : {}),
    ...(opts.releaseTimeoutMs ? { releaseTimeoutMs: opts.releaseTimeoutMs } : {}),
  });
  try {
    await reconciler.start();
    // Ready only once the window observer's watches exist too (they are counted from then on).
    await parts.windowObserver?.start?.();
    claimsSynced = true;
  } catch (err) {
    await unsubscribe();
    await executor.stop();
    await reconciler.stop();
    await kube.close();
    await reporter.close();
    await http?.close();
    checksRedis.disconnect();
    throw err;
  }
  log.info({ fieldManager: FIELD_MANAGER }, "sidecar started");
  let stopping: Promise<void> | undefined;
  return {
    kube,
    following,
    executor,
    reconciler,
    parts,
    metrics,
    ...(http ? { http } : {}),
    stop() {
      stopping ??= (async () => {
        await unsubscribe();
        await executor.stop();
        await parts.windowObserver?.stop();
        await reconciler.stop();
        await kube.close();
        await reporter.close();
        await http?.close();
        checksRedis.disconnect();
        log.info("sidecar stopped");
      })();
      return stopping;
    },
  };
}

export const sidecarSettings = {
  applier: {
    flag: "applier",
    env: "APPLYGATE_APPLIER",
    help: "the applier kind this sidecar runs beside: flux or argocd; webhook runs on its own and calls the endpoints WebhookClaims name",
    parse: parsers.oneOf("flux", "argocd", "webhook"),
  } as Setting<SidecarApplier>,
  kubeconfig: kubeconfigSetting,
  startupWait: startupWaitSetting,
  ...commonSettings,
  resync: {
    flag: "resync",
    env: "APPLYGATE_RESYNC",
    help: "the safety net: how often every claim is reconciled, events or not (each change is acted on at once)",
    parse: parsers.duration,
    default: 60_000,
    defaultLabel: "1m",
  } as Setting<number>,
  cacheDir: {
    flag: "cache-dir",
    env: "APPLYGATE_SIDECAR_CACHE_DIR",
    help: "folder of the sidecar's own Git clones: what an apply would bring, read at the write for a claim that requires approval; argocd: proof that a running operation is stale",
    parse: parsers.string,
    default: defaultCacheDir(),
  } as Setting<string>,
  concurrency: {
    flag: "concurrency",
    env: "APPLYGATE_SIDECAR_CONCURRENCY",
    help: "attempts carried out at once (for different claims)",
    parse: parsers.positiveInt,
    default: 16,
  } as Setting<number>,
  metricsPort: {
    flag: "metrics-port",
    env: "APPLYGATE_SIDECAR_METRICS_PORT",
    help: "port serving /metrics, /healthz and /readyz (0 for any free port)",
    parse: parsers.port,
    default: 9091,
  } as Setting<number>,
  metricsHost: metricsHostSetting("APPLYGATE_SIDECAR_METRICS_HOST"),
  controlNamespace: {
    flag: "control-namespace",
    env: "POD_NAMESPACE",
    help: "argocd: Argo CD's own namespace (Applications there track their objects as <name>, others as <namespace>_<name>); the manifests set the pod's namespace",
    parse: parsers.string,
    default: "argocd",
  } as Setting<string>,
  watchKinds: {
    flag: "watch-kinds",
    env: "APPLYGATE_ARGOCD_WATCH_KINDS",
    help: "argocd and webhook: kinds whose writes by Argo CD (or by a WebhookClaim's field managers) the window observer watches, as apiVersion/Kind separated by commas, or none (each is listed and kept in memory cluster-wide)",
    parse: parseWatchKinds,
    default: DEFAULT_WATCHED_KINDS,
    defaultLabel: DEFAULT_WATCHED_KINDS.map((k) => `${k.apiVersion}/${k.kind}`).join(","),
  } as Setting<WatchedKind[]>,
  webhookAllowInternal: {
    flag: "webhook-allow-internal",
    env: "APPLYGATE_WEBHOOK_ALLOW_INTERNAL",
    help: "webhook: allow endpoints on loopback, link-local and cloud-metadata addresses (refused by default: a claim must not reach the node or the metadata service)",
    parse: parsers.boolean,
    boolean: true,
    default: false,
  } as Setting<boolean>,
  webhookRefusePrivate: {
    flag: "webhook-refuse-private",
    env: "APPLYGATE_WEBHOOK_REFUSE_PRIVATE",
    help: "webhook: refuse endpoints on private addresses too (10/8, 172.16/12, 192.168/16, 100.64/10, fc00::/7, fec0::/10; allowed by default, since in-cluster tools live there)",
    parse: parsers.boolean,
    boolean: true,
    default: false,
  } as Setting<boolean>,
  allowHttpCredentials: allowHttpCredentialsSetting,
  instance: {
    flag: "instance",
    env: "POD_NAME",
    help: "reportingInstance of the Events this sidecar records",
    parse: parsers.string,
    default: hostname(),
  } as Setting<string>,
  help: helpSetting,
};

export async function run(argv: string[]): Promise<number> {
  if (argv.includes("--help") || argv.includes("-h")) {
    process.stdout.write(
      `${helpText("sidecar", "Execute and follow apply operations beside Flux or Argo CD, or through webhook endpoints.", sidecarSettings)}\n`,
    );
    return 0;
  }
  const { config } = loadConfig(sidecarSettings, argv);
  const log = createLogger({ name: "sidecar", level: config.logLevel });
  const kc = loadKubeConfig(config.kubeconfig);
  // What it needs answers before it starts: the API server, then Redis. Beside Flux or Argo CD,
  // in the applier's own pod, it starts without Redis all the same (not ready, its applier's
  // claims held until Redis answers: docs/operations.md), saying so once; the webhook applier, a
  // Deployment of its own, stops like every other component.
  await apiServerAnswers(kc, config.startupWait);
  if (config.applier === "webhook") await redisAnswersAt(config.redisUrl, config.startupWait);
  else
    await redisAnswersAt(config.redisUrl, 0).catch((err: unknown) => {
      if (!(err instanceof Unreachable)) throw err;
      log.warn(`${err.message}; starting not ready until it answers`);
    });
  const sidecar = await startSidecar({
    applier: config.applier,
    kubeConfig: kc,
    redisUrl: config.redisUrl,
    redisPrefix: config.redisPrefix,
    log,
    instance: config.instance,
    resyncMs: config.resync,
    concurrency: config.concurrency,
    cacheDir: config.cacheDir,
    allowHttpCredentials: config.allowHttpCredentials,
    serve: { port: config.metricsPort, ...(config.metricsHost ? { host: config.metricsHost } : {}) },
    ...(config.applier === "argocd"
      ? { options: { controlNamespace: config.controlNamespace, watchKinds: config.watchKinds } }
      : config.applier === "webhook"
        ? {
            options: {
              allowInternal: config.webhookAllowInternal,
              refusePrivate: config.webhookRefusePrivate,
              watchKinds: config.watchKinds,
            },
          }
        : {}),
  });
  const signal = await stopSignal();
  log.info({ signal }, "stopping");
  await sidecar.stop().catch((err) => log.error({ err: errorMessage(err) }, "stop failed"));
  return 0;
}
