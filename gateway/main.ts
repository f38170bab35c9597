/**
 * `applygate gateway`: settings, catalog source (a YAML file with --config, else the cluster), and
 * the server. `createGateway` and `startGateway` are re-exported for tests and the playground.
 */
import { stopSignal } from "../queue/cli/stop-signal.js";
import {
  ConfigError,
  commonSettings,
  helpSetting,
  helpText,
  kubeconfigSetting,
  loadConfig,
  parsers,
  type Setting,
} from "../queue/config.js";
import { createLogger } from "../queue/log.js";
import {
  apiServerAnswers,
  findKubeConfig,
  redisAnswersAt,
  startupWaitSetting,
} from "../queue/startup-check.js";
import { DEFAULT_BODY_LIMIT, DEFAULT_KEEP_ALIVE_TIMEOUT_MS, startGateway } from "./app.js";
import type { Catalog } from "./catalog.js";
import { FileCatalog } from "./catalog-file.js";
import type { DashboardAuth } from "./dashboard.js";
import { DEFAULT_SECRET_REFRESH_MS } from "./secret-refs.js";

export { createGateway, type GatewayOptions, type StartedGateway, startGateway } from "./app.js";

const optionalString = (
  flag: string,
  env: string,
  help: string,
  secret = false,
): Setting<string | undefined> => ({
  flag,
  env,
  help,
  parse: parsers.string,
  default: undefined,
  ...(secret ? { defaultLabel: "unset" } : {}),
});

export const gatewaySettings = {
  ...commonSettings,
  kubeconfig: kubeconfigSetting,
  startupWait: startupWaitSetting,
  host: {
    flag: "host",
    env: "APPLYGATE_GATEWAY_HOST",
    help: "address to listen on",
    parse: parsers.string,
    default: "0.0.0.0",
  } as Setting<string>,
  port: {
    flag: "port",
    env: "APPLYGATE_GATEWAY_PORT",
    help: "port for webhooks, intake and dashboard",
    parse: parsers.port,
    default: 8080,
  } as Setting<number>,
  redisWaitReplicas: {
    flag: "redis-wait-replicas",
    env: "APPLYGATE_REDIS_WAIT_REPLICAS",
    help: "acknowledge a write or notice only once this many Redis replicas hold it (Redis WAIT; fewer within 2 s answers 503); 0: once the primary holds it",
    parse: (raw: string) => {
      if (!/^\d+$/.test(raw)) throw new Error(`expected a number of replicas (0 or more), got "${raw}"`);
      return Number(raw);
    },
    default: 0,
  } as Setting<number>,
  metricsPort: {
    flag: "metrics-port",
    env: "APPLYGATE_GATEWAY_METRICS_PORT",
    help: "port for /metrics alone, apart from the receivers",
    parse: parsers.port,
    default: 9090,
  } as Setting<number>,
  config: optionalString(
    "config",
    "APPLYGATE_GATEWAY_CONFIG",
    "YAML file of GitProvider, GitTarget and Secret objects (reloaded on change); unset: watch the cluster",
  ),
  namespace: optionalString(
    "namespace",
    "APPLYGATE_WATCH_NAMESPACE",
    "watch only this namespace in the cluster (unset: all namespaces)",
  ),
  secretRefresh: {
    flag: "secret-refresh",
    env: "APPLYGATE_SECRET_REFRESH",
    help: "how often the webhook and intake Secrets are read again from the cluster (rotation takes effect within it)",
    parse: (raw: string) => {
      const ms = parsers.duration(raw);
      if (ms < 100) throw new Error(`expected at least 100ms, got "${raw}"`);
      return ms;
    },
    default: DEFAULT_SECRET_REFRESH_MS,
    defaultLabel: "30s",
  } as Setting<number>,
  bodyLimit: {
    flag: "body-limit",
    env: "APPLYGATE_GATEWAY_BODY_LIMIT",
    help: "largest request body; larger ones get 413",
    parse: parsers.bytes,
    default: DEFAULT_BODY_LIMIT,
    defaultLabel: "2MiB",
  } as Setting<number>,
  keepAliveTimeout: {
    flag: "keep-alive-timeout",
    env: "APPLYGATE_GATEWAY_KEEP_ALIVE_TIMEOUT",
    help: "an idle keep-alive connection is closed after this long (behind a proxy that keeps upstream connections open, set it above the proxy's idle timeout)",
    parse: (raw: string) => {
      const ms = parsers.duration(raw);
      if (ms < 1000 || ms > 600_000) throw new Error(`expected between 1s and 10m, got "${raw}"`);
      return ms;
    },
    default: DEFAULT_KEEP_ALIVE_TIMEOUT_MS,
    defaultLabel: "5s",
  } as Setting<number>,
  maxWait: {
    flag: "max-wait",
    env: "APPLYGATE_GATEWAY_MAX_WAIT",
    help: "longest a write with wait=published is held before answering unpublished",
    parse: parsers.duration,
    default: 30_000,
    defaultLabel: "30s",
  } as Setting<number>,
  stuckAfter: {
    flag: "stuck-after",
    env: "APPLYGATE_STUCK_AFTER",
    help: "a job active longer than this counts as stuck in the metrics (an attempt's job only when its sidecar is gone)",
    parse: parsers.duration,
    default: 300_000,
    defaultLabel: "5m",
  } as Setting<number>,
  dashboardUser: optionalString("dashboard-user", "APPLYGATE_DASHBOARD_USER", "dashboard basic-auth user"),
  dashboardPassword: optionalString(
    "dashboard-password",
    "APPLYGATE_DASHBOARD_PASSWORD",
    "dashboard basic-auth password",
    true,
  ),
  dashboardToken: optionalString(
    "dashboard-token",
    "APPLYGATE_DASHBOARD_TOKEN",
    "dashboard bearer token",
    true,
  ),
  dashboardInsecure: {
    flag: "dashboard-insecure",
    env: "APPLYGATE_DASHBOARD_INSECURE",
    help: "serve the dashboard without credentials (local use only)",
    parse: parsers.boolean,
    default: false,
    boolean: true,
  } as Setting<boolean>,
  dashboardWritable: {
    flag: "dashboard-writable",
    env: "APPLYGATE_DASHBOARD_WRITABLE",
    help: "let the dashboard change the queues (add, retry, promote, remove, clean, pause jobs); it only shows them by default. Whoever has its credentials can then queue any job, an apply attempt included",
    parse: parsers.boolean,
    default: false,
    boolean: true,
  } as Setting<boolean>,
  help: helpSetting,
};

/**
 * Dashboard credentials from the settings. Without any (and without --dashboard-insecure) the
 * dashboard is off: the gateway still runs, `/queues` answers 404, and start-up logs why. Pure.
 */
export function dashboardAuth(c: {
  dashboardUser: string | undefined;
  dashboardPassword: string | undefined;
  dashboardToken: string | undefined;
  dashboardInsecure: boolean;
}): DashboardAuth | "off" {
  if ((c.dashboardUser === undefined) !== (c.dashboardPassword === undefined)) {
    throw new ConfigError(
      "invalid setting --dashboard-user/--dashboard-password: set both or neither (APPLYGATE_DASHBOARD_USER, APPLYGATE_DASHBOARD_PASSWORD)",
    );
  }
  const basic =
    c.dashboardUser !== undefined ? { user: c.dashboardUser, password: c.dashboardPassword! } : undefined;
  if (basic && c.dashboardToken) return { basic, bearer: c.dashboardToken };
  if (basic) return { basic };
  if (c.dashboardToken) return { bearer: c.dashboardToken };
  if (c.dashboardInsecure) return "insecure";
  return "off";
}

/**
 * The dashboard the settings ask for: off without credentials, else read-only unless
 * `--dashboard-writable` says otherwise. Pure.
 */
export function dashboardSetting(
  c: Parameters<typeof dashboardAuth>[0] & { dashboardWritable: boolean },
): { auth: DashboardAuth; readOnly: boolean } | false {
  const auth = dashboardAuth(c);
  return auth === "off" ? false : { auth, readOnly: !c.dashboardWritable };
}

/** What start-up says about the dashboard; the off case names the settings that turn it on. */
export const DASHBOARD_OFF_MESSAGE =
  "dashboard off: no credentials given (set APPLYGATE_DASHBOARD_USER and APPLYGATE_DASHBOARD_PASSWORD, or APPLYGATE_DASHBOARD_TOKEN; the manifests read them from the optional Secret applygate-dashboard)";

const SUMMARY =
  "Receive Git push webhooks and intake calls, verify them, and queue them in Redis; serve the queue dashboard at /queues, and metrics at /metrics on a port of their own.";

export async function run(argv: string[]): Promise<number | undefined> {
  if (argv.includes("--help") || argv.includes("-h")) {
    process.stdout.write(`${helpText("gateway", SUMMARY, gatewaySettings)}\n`);
    return 0;
  }
  const { config } = loadConfig(gatewaySettings, argv);
  const dashboard = dashboardSetting(config);
  const log = createLogger({ level: config.logLevel, name: "gateway" });
  // A bad --config file is a bad setting, said before anything is asked of the network; then what
  // the gateway needs must answer: the API server (unless --config) and Redis.
  const file = config.config ? new FileCatalog(config.config, log) : undefined;
  const kubeConfig = file ? undefined : findKubeConfig(config.kubeconfig);
  try {
    if (kubeConfig) await apiServerAnswers(kubeConfig, config.startupWait);
    await redisAnswersAt(config.redisUrl, config.startupWait);
  } catch (err) {
    await file?.close();
    throw err;
  }
  let catalog: Catalog;
  if (file) catalog = file;
  else {
    const { ClusterCatalog } = await import("./catalog-cluster.js");
    catalog = await ClusterCatalog.start({
      kubeConfig: kubeConfig as NonNullable<typeof kubeConfig>,
      log,
      namespace: config.namespace,
      secretRefreshMs: config.secretRefresh,
    });
  }
  const gw = await startGateway({
    host: config.host,
    port: config.port,
    metricsPort: config.metricsPort,
    redisUrl: config.redisUrl,
    prefix: config.redisPrefix,
    catalog,
    logger: log,
    bodyLimit: config.bodyLimit,
    keepAliveTimeoutMs: config.keepAliveTimeout,
    maxWaitMs: config.maxWait,
    redisWaitReplicas: config.redisWaitReplicas,
    stuckAfterMs: config.stuckAfter,
    dashboard,
  });
  if (!dashboard) log.warn({ dashboard: "off" }, DASHBOARD_OFF_MESSAGE);
  log.info(
    {
      url: gw.url,
      metrics: gw.metricsUrl,
      catalog: config.config ?? "cluster",
      dashboard: !dashboard ? "off" : dashboard.auth === "insecure" ? "insecure" : "authenticated",
      ...(dashboard ? { dashboardWritable: !dashboard.readOnly } : {}),
    },
    "gateway listening",
  );
  const signal = await stopSignal();
  log.info({ signal }, "gateway stopping");
  await gw.close();
  await catalog.close();
  return 0;
}
