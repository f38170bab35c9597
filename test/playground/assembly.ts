/**
 * The playground's assembly: every process of applygate plus the embedded services it runs
 * against, in one process. The scenario suite and `applygate playground race` start the same
 * assembly, with compressed timers.
 *
 *   Redis · Git server (demo repository, push webhook to the gateway) · simulated API server with
 *   our CRDs, Flux's and Argo CD's · fluxsim · argosim · gateway (intake, dashboard) · one worker
 *   replica with the decisions · one sidecar per applier kind (flux, argocd).
 */
import { randomBytes } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { CustomObjectsApi, type KubeConfig } from "@kubernetes/client-node";
import { Registry } from "prom-client";
import { ClusterCatalog } from "../../gateway/catalog-cluster.js";
import { dashboardSetting, type StartedGateway, startGateway } from "../../gateway/main.js";
import { createApplyMetrics, createDecisions, type Decisions, KubeObjects } from "../../queue/apply/index.js";
import { branchKey } from "../../queue/contract.js";
import { crdFiles } from "../../queue/crds/files.js";
import { type Logger, silentLogger } from "../../queue/log.js";
import { connectRedis, type EmbeddedRedis, resolveEmbeddedRedis } from "../../queue/redis.js";
import { discoverBranches } from "../../queue/worker/branch-discovery.js";
import type { BranchWorkerOptions } from "../../queue/worker/branch-worker.js";
import { ClusterCache } from "../../queue/worker/cluster-cache.js";
import { KubeDirectory, KubeStatusSink } from "../../queue/worker/kube.js";
import { createWorkerMetrics } from "../../queue/worker/metrics.js";
import { Replica } from "../../queue/worker/replica.js";
import { type Sidecar, type SidecarApplier, startSidecar } from "../../sidecar/main.js";
import { Mirror } from "../../sidecar/mirror/mirror.js";
import { type ApiServer, readAuditLog, startApiServer } from "../cluster/apiserver/index.js";
import {
  type ArgoKnobs,
  type ArgoSim,
  argocdApplicationCrd,
  startArgoSim,
} from "../cluster/argosim/index.js";
import { type FluxKnobs, type FluxSim, startFluxSim } from "../cluster/fluxsim/index.js";
import { type GitServer, startGitServer } from "../git/server.js";
import { ensureRedisServer } from "../redis/install.js";
import { type AuditFindings, auditFindings, SIMULATOR_USERS } from "./audit-check.js";
import {
  ARGOCD_NAMESPACE,
  DEMO_BRANCH,
  DEMO_NAMESPACE,
  DEMO_PROVIDER,
  DEMO_REPO,
  DEMO_TARGETS,
  DEMO_WEBHOOK_APP,
  demoAppliersYaml,
  demoClaimsYaml,
  demoFiles,
  demoObjectsYaml,
  demoWatchRulesYaml,
  hookPathFor,
  type PlaygroundApp,
  secretReaderYaml,
  WEBHOOK_TOKEN,
} from "./demo.js";
import { type Deployer, startDeployer } from "./deployer.js";
import { type Component, deployedIdentities, usernameOf } from "./identities.js";

/**
 * Kinds of applied objects the Argo CD window observer watches: the demo applies ConfigMaps, and
 * the simulated API server serves no workloads (the manifests grant its default kinds).
 */
const SIMULATED_KINDS = [{ apiVersion: "v1", kind: "ConfigMap" }];

const simCrd = (file: string) => fileURLToPath(new URL(`../cluster/crds/${file}`, import.meta.url));

/** Timers of every component; the scenarios and the race compress them. */
export interface AssemblyTimers {
  flux: Partial<FluxKnobs>;
  argo: Partial<ArgoKnobs>;
  /** GitRepository and Kustomization `spec.interval`. */
  fluxInterval: string;
  /** Branch lease of the worker replica. */
  leaseMs: number;
  /** Settings of every branch worker (periodic fetch, push cooldown...). */
  branch: Partial<Omit<BranchWorkerOptions, "spec" | "redis" | "prefix" | "lease" | "repo" | "log">>;
  /** Options of each sidecar kind (poll intervals, apply window grace...). */
  sidecar: {
    flux: Record<string, unknown>;
    argocd: Record<string, unknown>;
    webhook?: Record<string, unknown>;
    resyncMs: number;
  };
  /** How often the decisions list GitTargets again. */
  listIntervalMs: number;
  /** The playground deployer's build: between fetching a commit and applying it (default none). */
  deployer?: { buildMs?: number };
  /** GitTargets' commit windows, idle seconds (default 5 s), by app. */
  commitIdleSeconds?: Partial<Record<PlaygroundApp, number>>;
}

/** What the playground runs with: the products' defaults, except what would make a demo dull. */
export const PLAYGROUND_TIMERS: AssemblyTimers = {
  flux: {},
  argo: { refreshIntervalMs: 30_000, revisionCacheMs: 30_000 },
  fluxInterval: "1m",
  leaseMs: 10_000,
  branch: { fetchIntervalMs: 60_000 },
  sidecar: { flux: {}, argocd: {}, resyncMs: 60_000 },
  listIntervalMs: 5_000,
};

/** Compressed timers for the scenarios: every wait is on a condition, these only bound it. */
export const FAST_TIMERS: AssemblyTimers = {
  // The Kustomization first reconciles before its source has an artifact, which arms
  // kustomize-controller's 30 s dependency requeue; a Kustomization is held suspended by then,
  // but that timer still fires, and inside an operation's resume it is a second apply of the
  // same revision (real Flux does the same). Tests that count applies push it past their length;
  // the soak keeps it.
  flux: { perObjectApplyMs: 1, dependencyRequeueMs: 3_600_000 },
  argo: { refreshIntervalMs: 3_600_000 },
  fluxInterval: "1h",
  leaseMs: 3_000,
  branch: { fetchIntervalMs: 60_000, pushCooldownMs: 0 },
  sidecar: {
    flux: { pollMs: 25, windowGraceMs: 2_000 },
    argocd: { pollMs: 50, windowGraceMs: 2_000 },
    webhook: { pollMs: 25, windowGraceMs: 2_000 },
    resyncMs: 2_000,
  },
  listIntervalMs: 500,
};

export interface AssemblyOptions {
  log?: Logger;
  /** Redis prefix (default: a fresh one per run, whose keys are removed on stop). */
  prefix?: string;
  /** Redis URL (default: the embedded-default rule: REDIS_URL, a local Redis, else a private one). */
  redisUrl?: string;
  /** Port for the gateway (0: any free one). */
  gatewayPort?: number;
  /** Port for the gateway's /metrics, apart from the receivers as deployed (0: any free one). */
  metricsPort?: number;
  dashboard?: { user: string; password: string };
  timers?: AssemblyTimers;
  /**
   * Start without the claims (nothing holds the appliers): Flux and Argo CD run on their own
   * timers, and the deployer applies each pushed commit touching its folder, as a CI pipeline
   * triggered by the Git host's push webhook does (its first run applies the tip at start).
   * `applyClaims` takes the deployer's push trigger away again. Default false.
   */
  withoutClaims?: boolean;
  /**
   * Run the watch plane (`applygate mirror`) under its ServiceAccount, with a WatchRule for each
   * demo folder: API edits of the demo ConfigMaps become commits with no intake call. Default false.
   */
  withMirror?: boolean;
  /**
   * A broken assembly for the soak's own tests: the decisions' flush answers "published" at the
   * remote tip without publishing anything (pair it with `branch.autoPublish: false`).
   */
  flushSkipsPublication?: boolean;
}

export interface Assembly {
  redis: EmbeddedRedis;
  prefix: string;
  git: GitServer;
  api: ApiServer;
  flux: FluxSim;
  argo: ArgoSim;
  gateway: StartedGateway;
  worker: { replica: Replica; decisions: Decisions };
  sidecars: Record<SidecarApplier, Sidecar>;
  /** The webhook applier's endpoint: applies `apps/webhook` when its claim calls it (or on pushes, unheld). */
  deployer: Deployer;
  /** The watch plane, when `withMirror` asked for it. */
  mirror?: Mirror;
  workdir: string;
  /** The admin's kubeconfig (the test setup and the person at the playground). */
  kubeconfigPath: string;
  kubeConfig: KubeConfig;
  /** Each component's ServiceAccount identity, with exactly what the manifests grant it. */
  identities: Record<Component, { username: string; kubeConfig: KubeConfig }>;
  /** The simulated API server's audit log (audit.k8s.io/v1 Events, one JSON line each). */
  auditLogPath: string;
  /** What the audit log says of the components so far: requests, 403s, admin use. */
  audit(): AuditFindings;
  /** The demo repository and branch; `key` is the branch key of the demo GitProvider's branch. */
  demo: { repoUrl: string; branch: string; namespace: string; hookUrl: string; key: string };
  /** The queue dashboard, read-only as the gateway's settings make it by default. */
  dashboard: { url: string; user: string; password: string; readOnly: boolean };
  timers: AssemblyTimers;
  /** Stops the worker replica gracefully (its leases are given back). */
  stopWorker(): Promise<void>;
  /** Starts a new worker replica (after `stopWorker`). */
  startWorker(): Promise<void>;
  /**
   * Where each running component serves /metrics (host:port on 127.0.0.1), as Prometheus scrapes
   * them when deployed: the gateway's metrics port, the worker's, and each sidecar's.
   */
  metricsAddresses(): Partial<Record<"gateway" | "worker" | SidecarApplier, string>>;
  stopSidecar(kind: SidecarApplier): Promise<void>;
  startSidecar(kind: SidecarApplier): Promise<void>;
  /** Creates the FluxClaim, ArgoCDClaim and WebhookClaim the GitTargets name (the deployer no longer builds on pushes). */
  applyClaims(): Promise<void>;
  /** Stops everything; answers what the audit log said of the components, read before it is removed. */
  stop(): Promise<AuditFindings>;
}

export async function startAssembly(opts: AssemblyOptions = {}): Promise<Assembly> {
  const log = opts.log ?? silentLogger();
  const timers = opts.timers ?? PLAYGROUND_TIMERS;
  const prefix = opts.prefix ?? `applygate-playground-${randomBytes(4).toString("hex")}`;
  const stops: Array<() => Promise<unknown>> = [];
  let findings: () => AuditFindings = () => auditFindings([], {});
  const stop = async () => {
    for (const s of stops.splice(0).reverse()) await s().catch((err) => log.warn({ err }, "stop failed"));
    return findings();
  };
  try {
    // Built first: `kubectl kustomize` blocks this process, which must not stall a running server.
    const deployed = deployedIdentities();
    const workdir = await mkdtemp(join(tmpdir(), "applygate-playground-"));
    const auditLogPath = join(workdir, "audit.log");
    let last: AuditFindings | undefined;
    stops.push(async () => {
      // Read once everything stopped (the last requests included), before the folder goes.
      last = findings();
      await rm(workdir, { recursive: true, force: true });
    });

    const redis = opts.redisUrl
      ? { url: opts.redisUrl, origin: "REDIS_URL" as const, stop: async () => {} }
      : await resolveEmbeddedRedis(process.env, { ensureServer: ensureRedisServer });
    stops.push(() => redis.stop());
    if (!opts.prefix) stops.push(() => removeKeys(redis.url, prefix));

    const api = await startApiServer({ bookmarkIntervalMs: 200, auditLog: auditLogPath });
    stops.push(() => api.close());
    for (const file of crdFiles()) await api.installCrdFile(file);
    await api.installCrdFile(simCrd("flux-gitrepository.yaml"));
    await api.installCrdFile(simCrd("flux-kustomization.yaml"));
    await api.installCrdFile(argocdApplicationCrd("3.5"));
    await api.installCrdFile(simCrd("argocd-appproject.yaml"));
    await api.installCrdFile(simCrd("argocd-applicationset.yaml"));
    const kubeconfigPath = join(workdir, "kubeconfig");
    await api.writeKubeconfig(kubeconfigPath);
    const kc = api.kubeConfig();

    // The gateway's hook URL is known only once it listens; the Git server learns it then.
    let hookUrl = "";
    const git = await startGitServer({
      root: join(workdir, "git"),
      webhook: {
        get url() {
          return hookUrl;
        },
        secret: WEBHOOK_TOKEN,
      },
    });
    stops.push(() => git.close());
    const repoUrl = await git.createRepo(DEMO_REPO, demoFiles(), { branch: DEMO_BRANCH });
    await api.applyYaml(
      demoObjectsYaml(
        repoUrl,
        timers.commitIdleSeconds ? { commitIdleSeconds: timers.commitIdleSeconds } : {},
      ),
    );
    await api.applyYaml(demoAppliersYaml(repoUrl, { fluxInterval: timers.fluxInterval }));

    // Each component runs as the ServiceAccount its manifests name, with only the RBAC they grant;
    // the Secrets of the demo namespace are readable as install.md's "Connect a repository" makes them.
    const rbacNamespaces = new Set(deployed.rbac.map((o) => o.metadata.namespace).filter(Boolean));
    await api.applyYaml(
      [...rbacNamespaces]
        .map((name) => JSON.stringify({ apiVersion: "v1", kind: "Namespace", metadata: { name } }))
        .join("\n---\n"),
    );
    await api.applyYaml(deployed.rbac.map((o) => JSON.stringify(o)).join("\n---\n"));
    // Who approved a release is the API server's word: the shipped admission policy holds here too.
    await api.applyYaml(deployed.admission.map((o) => JSON.stringify(o)).join("\n---\n"));
    const sa = deployed.serviceAccounts;
    await api.applyYaml(secretReaderYaml(DEMO_NAMESPACE, [sa.gateway]));
    await api.applyYaml(secretReaderYaml(DEMO_NAMESPACE, [sa.worker], "applygate-secret-watcher"));
    // The webhook applier watches the deployer's key Secret, as docs/webhook-applier.md's binding lets it.
    await api.applyYaml(
      secretReaderYaml(DEMO_NAMESPACE, [sa.webhook], "applygate-secret-watcher").replace(
        '"name":"applygate-secret-watcher","namespace"',
        '"name":"applygate-webhook-secret-watcher","namespace"',
      ),
    );
    const identities = Object.fromEntries(
      (Object.keys(sa) as Component[]).map((c) => {
        const username = api.addServiceAccount(sa[c].namespace, sa[c].name);
        return [c, { username, kubeConfig: api.kubeConfig(username) }];
      }),
    ) as Assembly["identities"];
    const usernames = Object.fromEntries(
      (Object.keys(sa) as Component[]).map((c) => [c, usernameOf(sa[c])]),
    ) as Record<Component, string>;
    const readFindings = () => auditFindings(readAuditLog(auditLogPath), usernames);
    findings = () => last ?? readFindings();
    // The simulators play Flux and Argo CD themselves: admins of their own, never a component's identity.
    const simulator = (name: string) => {
      api.addUser(name, randomBytes(16).toString("hex"), "all");
      return api.kubeConfig(name);
    };

    const flux = await startFluxSim({
      kubeConfig: simulator(SIMULATOR_USERS.fluxsim),
      knobs: timers.flux,
      log: log.child({ c: "fluxsim" }),
    });
    stops.push(() => flux.stop());
    const argo = await startArgoSim({
      kubeConfig: simulator(SIMULATOR_USERS.argosim),
      knobs: timers.argo,
      namespace: ARGOCD_NAMESPACE,
      applicationSets: false,
      log: log.child({ c: "argosim" }),
    });
    stops.push(() => argo.stop());

    const catalog = await ClusterCatalog.start({
      kubeConfig: identities.gateway.kubeConfig,
      log: log.child({ component: "catalog" }),
    });
    stops.push(() => catalog.close());
    const dashboard = opts.dashboard ?? { user: "admin", password: "playground" };
    const dashboardSettings = dashboardSetting({
      dashboardUser: dashboard.user,
      dashboardPassword: dashboard.password,
      dashboardToken: undefined,
      dashboardInsecure: false,
      dashboardWritable: false,
    });
    const gateway = await startGateway({
      redisUrl: redis.url,
      prefix,
      catalog,
      logger: log.child({ component: "gateway" }),
      port: opts.gatewayPort ?? 0,
      metricsPort: opts.metricsPort ?? 0,
      // As the gateway's own settings make it with these credentials and no other flag: read-only.
      dashboard: dashboardSettings,
    });
    stops.push(() => gateway.close());
    // The third applier: a deployer the WebhookClaim calls, applying apps/webhook as its own
    // ServiceAccount and reporting back to the gateway.
    const deployerSa = DEMO_WEBHOOK_APP.serviceAccount;
    const deployer = await startDeployer({
      key: DEMO_WEBHOOK_APP.key,
      folder: DEMO_WEBHOOK_APP.folder,
      repoUrl,
      gatewayUrl: () => gateway.url,
      kubeConfig: api.kubeConfig(api.addServiceAccount(deployerSa.namespace, deployerSa.name)),
      log: log.child({ component: "deployer" }),
      pushSecret: DEMO_WEBHOOK_APP.pushSecret,
      ...(timers.deployer?.buildMs ? { buildMs: timers.deployer.buildMs } : {}),
    });
    stops.push(() => deployer.close());
    // The Git host notifies the deployer of every push, as a CI system subscribed to the repository;
    // only while nothing holds it does a push trigger a build.
    const unhook = git.addWebhook({ url: deployer.pushUrl, secret: DEMO_WEBHOOK_APP.pushSecret });
    stops.push(async () => unhook());
    hookUrl = `${gateway.url}${hookPathFor(WEBHOOK_TOKEN, DEMO_REPO, DEMO_NAMESPACE)}`;

    // The worker replica with the decisions, as `applygate worker` assembles it.
    let worker:
      | {
          replica: Replica;
          decisions: Decisions;
          cache: ClusterCache;
          metrics: MetricsServer;
          discovery: { stop(): void };
          discoveryRedis: ReturnType<typeof connectRedis>;
        }
      | undefined;
    const startWorker = async () => {
      const wlog = log.child({ component: "worker" });
      const kc = identities.worker.kubeConfig;
      const cache = new ClusterCache(kc, wlog);
      await cache.start();
      // The worker's metrics as `applygate worker` registers them, on a port of their own.
      const registry = new Registry();
      let started: Replica | undefined;
      const workerMetrics = createWorkerMetrics(registry, () =>
        (started?.owned() ?? []).flatMap((k) => {
          const b = started?.branch(k);
          return b ? [b.snapshot()] : [];
        }),
      );
      const status = new KubeStatusSink(cache.kube, wlog, Date.now, 8, cache);
      const directory = new KubeDirectory(cache, { log: wlog, status });
      const decisions = createDecisions({
        redisUrl: redis.url,
        prefix,
        objects: new KubeObjects(cache.kube, wlog, {}, cache),
        changes: cache,
        keys: (namespace, name) => cache.secret(namespace, name),
        directory,
        log: wlog,
        listIntervalMs: timers.listIntervalMs,
        metrics: createApplyMetrics(registry),
      });
      const replica = new Replica({
        redisUrl: redis.url,
        prefix,
        directory,
        cacheDir: join(workdir, "worker-cache"),
        log: wlog,
        leaseMs: timers.leaseMs,
        status,
        attach: opts.flushSkipsPublication
          ? flushSkippingPublication(decisions.attach, git)
          : decisions.attach,
        branch: timers.branch,
        metrics: workerMetrics,
      });
      started = replica;
      const metrics = await serveMetrics(registry);
      await replica.start();
      // As `applygate worker` does: the demo GitTargets' branch is known from the start, so the
      // worker takes it at once and its baseline converges the appliers before anybody writes.
      const discoveryRedis = connectRedis(redis.url);
      const discovery = discoverBranches({ source: cache, redis: discoveryRedis, prefix, log: wlog });
      await discovery.settled();
      worker = { replica, decisions, cache, metrics, discovery, discoveryRedis };
    };
    const stopWorker = async () => {
      const w = worker;
      worker = undefined;
      if (!w) return;
      w.discovery.stop();
      w.discoveryRedis.disconnect();
      await w.replica.stop();
      await w.decisions.close();
      await w.cache.close();
      await w.metrics.close();
    };

    const sidecars = {} as Record<SidecarApplier, Sidecar>;
    const startOneSidecar = async (kind: SidecarApplier) => {
      sidecars[kind] = await startSidecar({
        applier: kind,
        kubeConfig: identities[kind].kubeConfig,
        redisUrl: redis.url,
        redisPrefix: prefix,
        log: log.child({ component: `sidecar-${kind}` }),
        instance: `playground-${kind}`,
        resyncMs: timers.sidecar.resyncMs,
        // /metrics, /healthz and /readyz as deployed, on loopback.
        serve: { port: 0, host: "127.0.0.1" },
        options:
          kind === "argocd"
            ? { watchKinds: SIMULATED_KINDS, ...timers.sidecar[kind] }
            : kind === "webhook"
              ? // The deployer listens on loopback: the operator flag the playground sets.
                { allowInternal: true, watchKinds: SIMULATED_KINDS, ...timers.sidecar.webhook }
              : timers.sidecar[kind],
      });
    };
    const stopOneSidecar = async (kind: SidecarApplier) => {
      const s = sidecars[kind];
      if (!s) return;
      delete (sidecars as Partial<Record<SidecarApplier, Sidecar>>)[kind];
      await s.stop();
    };
    await startOneSidecar("flux");
    stops.push(() => stopOneSidecar("flux"));
    await startOneSidecar("argocd");
    stops.push(() => stopOneSidecar("argocd"));
    await startOneSidecar("webhook");
    stops.push(() => stopOneSidecar("webhook"));

    const applyClaims = async () => {
      deployer.triggerOnPush(false);
      await api.applyYaml(demoClaimsYaml(deployer.url));
    };
    if (!opts.withoutClaims) {
      await applyClaims();
      // The worker starts once the sidecars hold their appliers, as in a cluster where the claims
      // were made long before: its first converge then applies at once. Started before, its
      // converge found the claims not holding yet (Flux RequestFailed, Argo CD Rejected), and
      // Argo CD waited out the 15 s a rejected attempt waits: its first apply came ~15 s after Flux's.
      await claimsInControl(kc, 30_000);
    } else {
      // Its own trigger: every push, and a first run that applies the tip the repository starts at.
      deployer.triggerOnPush(true);
      void deployer.build((await git.tip(DEMO_REPO, DEMO_BRANCH)) as string);
    }
    await startWorker();
    stops.push(() => stopWorker());

    let mirror: Mirror | undefined;
    if (opts.withMirror) {
      await api.applyYaml(demoWatchRulesYaml());
      mirror = new Mirror({
        kubeConfig: identities.mirror.kubeConfig,
        redisUrl: redis.url,
        redisPrefix: prefix,
        log: log.child({ component: "mirror" }),
        statusIntervalMs: 500,
      });
      await mirror.start();
      const m = mirror;
      stops.push(() => m.stop());
    }

    return {
      redis,
      prefix,
      git,
      api,
      flux,
      argo,
      gateway,
      get worker() {
        if (!worker) throw new Error("the worker replica is stopped");
        return worker;
      },
      sidecars,
      deployer,
      ...(mirror ? { mirror } : {}),
      workdir,
      kubeconfigPath,
      kubeConfig: kc,
      identities,
      auditLogPath,
      audit: readFindings,
      demo: {
        repoUrl,
        branch: DEMO_BRANCH,
        namespace: DEMO_NAMESPACE,
        hookUrl,
        key: branchKey({ namespace: DEMO_NAMESPACE, name: DEMO_PROVIDER }, repoUrl, DEMO_BRANCH),
      },
      dashboard: {
        url: `${gateway.url}/queues`,
        ...dashboard,
        readOnly: dashboardSettings === false || dashboardSettings.readOnly,
      },
      timers,
      stopWorker,
      startWorker,
      metricsAddresses() {
        const out: Partial<Record<"gateway" | "worker" | SidecarApplier, string>> = {};
        if (gateway.metricsUrl) out.gateway = new URL(gateway.metricsUrl).host;
        if (worker) out.worker = worker.metrics.address;
        for (const [kind, s] of Object.entries(sidecars) as [SidecarApplier, Sidecar][])
          if (s.http) out[kind] = `127.0.0.1:${s.http.port}`;
        return out;
      },
      stopSidecar: stopOneSidecar,
      startSidecar: startOneSidecar,
      applyClaims,
      stop,
    };
  } catch (err) {
    await stop();
    throw err;
  }
}

interface MetricsServer {
  /** host:port */
  address: string;
  close(): Promise<void>;
}

/** /metrics of `registry` on an ephemeral loopback port, as `applygate worker` serves it on its own. */
async function serveMetrics(registry: Registry): Promise<MetricsServer> {
  const server: Server = createServer((req, res) => {
    if ((req.url ?? "/").split("?")[0] !== "/metrics") {
      res.writeHead(404).end();
      return;
    }
    void registry.metrics().then(
      (text) => res.writeHead(200, { "content-type": registry.contentType }).end(text),
      () => res.writeHead(500).end(),
    );
  });
  await new Promise<void>((done) => server.listen(0, "127.0.0.1", done));
  const { port } = server.address() as AddressInfo;
  return {
    address: `127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((done) => {
        server.closeAllConnections();
        server.close(() => done());
      }),
  };
}

/** The decisions attached to a worker whose flush claims the remote tip is published and pushes nothing. */
function flushSkippingPublication(attach: Decisions["attach"], git: GitServer): Decisions["attach"] {
  return (ctx) => {
    const attached = attach(ctx);
    return {
      ...attached,
      start: (worker) =>
        attached.start(
          new Proxy(worker, {
            get(target, prop, receiver) {
              // Answers as a real flush would at the remote tip it leaves unchanged: that tip's
              // folders (the barrier's proof) and no inbox position read.
              if (prop === "flush")
                return async () => {
                  const tip = await git.tip(DEMO_REPO, DEMO_BRANCH);
                  const read = await target.history.folders();
                  return {
                    ok: true,
                    tip,
                    folders: read !== undefined && read.tip === tip ? read.present : [],
                    inboxMark: "0-0",
                  };
                };
              const v = Reflect.get(target, prop, receiver);
              return typeof v === "function" ? v.bind(target) : v;
            },
          }),
        ),
    };
  };
}

/** Waits until the demo's FluxClaim, ArgoCDClaim and WebhookClaim say InControl True. */
async function claimsInControl(kc: KubeConfig, timeoutMs: number): Promise<void> {
  const custom = kc.makeApiClient(CustomObjectsApi);
  const plurals = { flux: "fluxclaims", argocd: "argocdclaims", webhook: "webhookclaims" } as const;
  const deadline = Date.now() + timeoutMs;
  for (const [app, plural] of Object.entries(plurals) as [PlaygroundApp, string][]) {
    for (;;) {
      const claim = (await custom
        .getNamespacedCustomObject({
          group: "applygate.dev",
          version: "v1alpha1",
          plural,
          namespace: DEMO_NAMESPACE,
          name: DEMO_TARGETS[app],
        })
        .catch(() => undefined)) as
        | { status?: { conditions?: { type: string; status: string }[] } }
        | undefined;
      if (claim?.status?.conditions?.some((c) => c.type === "InControl" && c.status === "True")) break;
      if (Date.now() > deadline)
        throw new Error(`the ${app} claim did not take hold of its applier in ${timeoutMs} ms`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }
}

/** Removes every key of a run's own prefix, so a second run starts clean. */
async function removeKeys(url: string, prefix: string): Promise<void> {
  const client = connectRedis(url);
  try {
    let cursor = "0";
    do {
      const [next, keys] = await client.scan(cursor, "MATCH", `${prefix}:*`, "COUNT", 1000);
      cursor = next;
      if (keys.length) await client.del(...keys);
    } while (cursor !== "0");
  } finally {
    client.disconnect();
  }
}
