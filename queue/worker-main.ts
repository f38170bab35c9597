/**
 * `applygate worker`: one worker replica. Takes branches through their leases, runs a branch
 * worker for each, serves /metrics and /healthz. GitProviders and GitTargets come from the
 * Kubernetes API, or from a YAML file (`--targets-file`) to run without a cluster.
 */
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { collectDefaultMetrics, Registry } from "prom-client";
import {
  COMMIT_STATUS_POLL_MS,
  createApplyMetrics,
  createDecisions,
  KubeObjects,
  keysFromObjects,
  loadObjectsFile,
  type ObjectSource,
  SAFETY_NET_LIST_INTERVAL_MS,
} from "./apply/index.js";
import { stopSignal } from "./cli/stop-signal.js";
import {
  allowHttpCredentialsSetting,
  commonSettings,
  helpSetting,
  helpText,
  kubeconfigSetting,
  loadConfig,
  metricsHostSetting,
  parsers,
  type Setting,
} from "./config.js";
import type { Directory } from "./directory.js";
import { loadDirectoryFile, withGitTimeout } from "./directory.js";
import { DEFAULT_CALL_TIMEOUT_MS } from "./git/smart-http.js";
import type { KeysSecrets } from "./governance/signatures.js";
import { Kube } from "./kube/index.js";
import { createLogger } from "./log.js";
import { connectRedis, redisAnswersPing } from "./redis.js";
import { apiServerAnswers, findKubeConfig, redisAnswersAt, startupWaitSetting } from "./startup-check.js";
import { discoverBranches } from "./worker/branch-discovery.js";
import { ClusterCache } from "./worker/cluster-cache.js";
import { DEFAULT_IDLE_POLL_MS, DEFAULT_INBOX_CHECK_MS } from "./worker/idle.js";
import { DEFAULT_INTAKE_BUDGET_BYTES } from "./worker/intake-budget.js";
import { KubeDirectory, KubeStatusSink } from "./worker/kube.js";
import { DEFAULT_LEASE_MS } from "./worker/lease.js";
import { createWorkerMetrics } from "./worker/metrics.js";
import { DEFAULT_PUSH_CYCLE_TIMEOUT_MS } from "./worker/publication.js";
import { DEFAULT_BASELINE_CONCURRENCY, Replica } from "./worker/replica.js";
import type { StatusSink } from "./worker/status.js";

export const workerSettings = {
  ...commonSettings,
  kubeconfig: kubeconfigSetting,
  startupWait: startupWaitSetting,
  targetsFile: {
    flag: "targets-file",
    env: "APPLYGATE_TARGETS_FILE",
    help: "YAML file of GitProviders, GitTargets and Secrets to use instead of the Kubernetes API",
    parse: parsers.string,
    default: "",
    defaultLabel: "none (use the Kubernetes API)",
  } as Setting<string>,
  cacheDir: {
    flag: "cache-dir",
    env: "APPLYGATE_CACHE_DIR",
    help: "folder for the persistent bare clone of each repository",
    parse: parsers.string,
    default: join(tmpdir(), "applygate-worker"),
  } as Setting<string>,
  replicaId: {
    flag: "replica-id",
    env: "APPLYGATE_REPLICA_ID",
    help: "name of this replica in branch leases (defaults to the host name)",
    parse: parsers.string,
    default: (process.env.HOSTNAME ?? "worker").replace(/:/g, "-"),
  } as Setting<string>,
  lease: {
    flag: "lease",
    env: "APPLYGATE_LEASE",
    help: "how long a branch's lease lasts without renewal (a dead replica's branches move after it)",
    parse: parsers.duration,
    default: DEFAULT_LEASE_MS,
  } as Setting<number>,
  balance: {
    flag: "balance",
    env: "APPLYGATE_BALANCE",
    help: "balance branches between worker replicas: a replica owning more than its fair share (known branches / live replicas, plus 10 %) hands quiet branches over a few at a time; false leaves each branch with whichever replica took it",
    parse: parsers.boolean,
    default: true,
  } as Setting<boolean>,
  intakeBudget: {
    flag: "intake-budget",
    env: "APPLYGATE_INTAKE_BUDGET",
    help: "bytes of unpublished writes per branch (payload plus 1 KiB each), charged as a write is accepted: a write that would pass it is refused (429), and while publication retries that refusal pauses intake until a push lands",
    parse: parsers.bytes,
    default: DEFAULT_INTAKE_BUDGET_BYTES,
  } as Setting<number>,
  fetchInterval: {
    flag: "fetch-interval",
    env: "APPLYGATE_FETCH_INTERVAL",
    help: "periodic read of each branch's remote tip",
    parse: parsers.duration,
    default: 60_000,
  } as Setting<number>,
  listInterval: {
    flag: "list-interval",
    env: "APPLYGATE_LIST_INTERVAL",
    help: "safety-net period of each branch's listing of its GitTargets and claims; a change the worker's watches see lists the branch concerned at once",
    parse: parsers.duration,
    default: SAFETY_NET_LIST_INTERVAL_MS,
  } as Setting<number>,
  inboxCheckInterval: {
    flag: "inbox-check-interval",
    env: "APPLYGATE_INBOX_CHECK_INTERVAL",
    help: "how often the replica asks Redis, in one round trip for all its branches, which inboxes hold entries their branch worker has not read, and wakes those: how late a write whose wake-up signal was lost is noticed",
    parse: parsers.duration,
    default: DEFAULT_INBOX_CHECK_MS,
  } as Setting<number>,
  idlePollInterval: {
    flag: "idle-poll-interval",
    env: "APPLYGATE_IDLE_POLL_INTERVAL",
    help: "longest sleep of an idle branch worker (no retry pending, no commit window, fetch or cooldown due sooner); the inbox check wakes it for news",
    parse: parsers.duration,
    default: DEFAULT_IDLE_POLL_MS,
  } as Setting<number>,
  baselineConcurrency: {
    flag: "baseline-concurrency",
    env: "APPLYGATE_BASELINE_CONCURRENCY",
    help: "branches reading the remote for the first time (their baseline: a read of the tip and a download) at once; a replica taking many branches reads them this many at a time, not all at once against one Git host",
    parse: parsers.positiveInt,
    default: DEFAULT_BASELINE_CONCURRENCY,
  } as Setting<number>,
  pushCooldown: {
    flag: "push-cooldown",
    env: "APPLYGATE_PUSH_COOLDOWN",
    help: "minimum gap between two pushes of one branch (a flush ignores it)",
    parse: parsers.duration,
    default: 1000,
  } as Setting<number>,
  gitTimeout: {
    flag: "git-timeout",
    env: "APPLYGATE_GIT_TIMEOUT",
    help: "deadline of each Git network call (an advertisement, a download, a push); a call past it fails and is retried on the publication schedule",
    parse: parsers.duration,
    default: DEFAULT_CALL_TIMEOUT_MS,
  } as Setting<number>,
  pushCycleTimeout: {
    flag: "push-cycle-timeout",
    env: "APPLYGATE_PUSH_CYCLE_TIMEOUT",
    help: "deadline of a whole publication cycle (fetch, replay, push, contention retries), checked throughout: a call under way when it passes is abandoned",
    parse: parsers.duration,
    default: DEFAULT_PUSH_CYCLE_TIMEOUT_MS,
  } as Setting<number>,
  commitStatusPoll: {
    flag: "commit-status-poll",
    env: "APPLYGATE_COMMIT_STATUS_POLL",
    help: "how often a commit status awaited for approval (a claim's approval.commitStatus) is read again from the Git host",
    parse: parsers.duration,
    default: COMMIT_STATUS_POLL_MS,
  } as Setting<number>,
  argocdNamespace: {
    flag: "argocd-namespace",
    env: "APPLYGATE_ARGOCD_NAMESPACE",
    help: "Argo CD's own namespace, where the AppProjects whose sync windows an ArgoCDClaim's claim shows live",
    parse: parsers.string,
    default: "argocd",
  } as Setting<string>,
  metricsPort: {
    flag: "metrics-port",
    env: "APPLYGATE_METRICS_PORT",
    help: "port serving /metrics, /healthz and /readyz (0 for any free port)",
    parse: parsers.port,
    // The port the worker Deployment's container port, probes and metrics Service name.
    default: 9090,
  } as Setting<number>,
  metricsHost: metricsHostSetting("APPLYGATE_METRICS_HOST"),
  allowHttpCredentials: allowHttpCredentialsSetting,
  help: helpSetting,
};

/** Ready when Redis answers and the replica has started; the body names each check. Pure. */
export function workerReadiness(checks: { redis: boolean; started: boolean }): {
  ready: boolean;
  body: string;
} {
  const lines = [
    `redis: ${checks.redis ? "ok" : "not answering"}`,
    `replica: ${checks.started ? "started" : "starting"}`,
  ];
  return { ready: checks.redis && checks.started, body: `${lines.join("\n")}\n` };
}

/** Logs each publication report (running without a cluster). */
function logStatusSink(log: ReturnType<typeof createLogger>): StatusSink {
  return {
    async report(targets, report) {
      log.info({ targets: targets.map((t) => `${t.namespace}/${t.name}`), ...report }, "publication status");
    },
  };
}

export async function run(argv: string[]): Promise<number> {
  const { config } = loadConfig(workerSettings, argv);
  if (config.help) {
    process.stdout.write(`${helpText("worker", "run branch workers", workerSettings)}\n`);
    return 0;
  }
  const log = createLogger({ level: config.logLevel, name: "worker" });
  let directory: Directory;
  let status: StatusSink;
  // GitTargets, claims and appliers the decisions read (and claims' repairPending they write).
  let objects: ObjectSource;
  let cache: ClusterCache | undefined;
  let keys: KeysSecrets;
  if (config.targetsFile) {
    directory = withGitTimeout(
      await loadDirectoryFile(config.targetsFile, { allowHttpCredentials: config.allowHttpCredentials }),
      config.gitTimeout,
    );
    status = logStatusSink(log);
    const file = await loadObjectsFile(config.targetsFile);
    objects = file;
    keys = keysFromObjects(file.objects);
  } else {
    const kc = findKubeConfig(config.kubeconfig);
    await apiServerAnswers(kc, config.startupWait);
    // One client and one set of informers for the process: branch lookups and listings make no requests.
    const kube = new Kube(kc, { log });
    cache = new ClusterCache(kube, log);
    await cache.start();
    const sink = new KubeStatusSink(kube, log, Date.now, 8, cache);
    directory = withGitTimeout(
      new KubeDirectory(cache, { log, status: sink }, { allowHttpCredentials: config.allowHttpCredentials }),
      config.gitTimeout,
    );
    status = sink;
    objects = new KubeObjects(kube, log, {}, cache);
    const watched = cache;
    keys = (namespace, name) => watched.secret(namespace, name);
  }
  await redisAnswersAt(config.redisUrl, config.startupWait);
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  let replica: Replica | undefined;
  const metrics = createWorkerMetrics(registry, () =>
    (replica?.owned() ?? []).flatMap((k) => {
      const b = replica?.branch(k);
      return b ? [b.snapshot()] : [];
    }),
  );
  const decisions = createDecisions({
    redisUrl: config.redisUrl,
    prefix: config.redisPrefix,
    objects,
    directory,
    log,
    metrics: createApplyMetrics(registry),
    listIntervalMs: config.listInterval,
    commitStatusPollMs: config.commitStatusPoll,
    argocdNamespace: config.argocdNamespace,
    ...(cache ? { changes: cache } : {}),
    keys,
  });
  replica = new Replica({
    attach: decisions.attach,
    redisUrl: config.redisUrl,
    prefix: config.redisPrefix,
    directory,
    cacheDir: config.cacheDir,
    log,
    replicaId: config.replicaId,
    leaseMs: config.lease,
    baselineConcurrency: config.baselineConcurrency,
    ...(config.balance ? {} : { balance: false as const }),
    inboxCheckMs: config.inboxCheckInterval,
    status,
    metrics,
    branch: {
      budgetBytes: config.intakeBudget,
      fetchIntervalMs: config.fetchInterval,
      idlePollMs: config.idlePollInterval,
      pushCooldownMs: config.pushCooldown,
      pushCycleTimeoutMs: config.pushCycleTimeout,
    },
  });
  // Served before the replica starts, so the startup probe sees a live process meanwhile.
  let started = false;
  const checksRedis = connectRedis(config.redisUrl, { maxRetriesPerRequest: 1 });
  const http = createServer((req, res) => {
    const path = (req.url ?? "/").split("?")[0];
    if (path === "/metrics") {
      void registry.metrics().then((text) => {
        res.writeHead(200, { "content-type": registry.contentType });
        res.end(text);
      });
      return;
    }
    if (path === "/readyz") {
      void redisAnswersPing(checksRedis).then((redis) => {
        const r = workerReadiness({ redis, started });
        res.writeHead(r.ready ? 200 : 503, { "content-type": "text/plain; charset=utf-8" });
        res.end(r.body);
      });
      return;
    }
    res.writeHead(path === "/healthz" ? 200 : 404);
    res.end(path === "/healthz" ? "ok\n" : "not found\n");
  });
  await new Promise<void>((r) => http.listen(config.metricsPort, config.metricsHost, r));
  await replica.start();
  // Branches GitTargets write are known before any write or push names them.
  const discoveryRedis = cache ? connectRedis(config.redisUrl) : undefined;
  const discovery =
    cache && discoveryRedis
      ? discoverBranches({ source: cache, redis: discoveryRedis, prefix: config.redisPrefix, log })
      : undefined;
  started = true;
  log.info({ replica: replica.id, metricsPort: config.metricsPort }, "worker started");
  await stopSignal();
  log.info("stopping: giving branches back");
  discovery?.stop();
  discoveryRedis?.disconnect();
  await replica.stop();
  await decisions.close();
  await cache?.close();
  checksRedis.disconnect();
  http.close();
  return 0;
}
