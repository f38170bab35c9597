/**
 * `applygate mirror`: the watch plane, in the cluster whose objects it watches, under its own
 * ServiceAccount (get, list and watch on the kinds WatchRules select; see docs/mirror.md).
 */
import { stopSignal } from "../../queue/cli/stop-signal.js";
import {
  commonSettings,
  helpSetting,
  helpText,
  kubeconfigSetting,
  loadConfig,
  metricsHostSetting,
  parsers,
  type Setting,
} from "../../queue/config.js";
import { errorMessage } from "../../queue/errors.js";
import { loadKubeConfig } from "../../queue/kube/index.js";
import { createLogger } from "../../queue/log.js";
import { apiServerAnswers, redisAnswersAt, startupWaitSetting } from "../../queue/startup-check.js";
import { createMirrorMetrics, startMirrorHttp } from "./http.js";
import { Mirror } from "./mirror.js";
import { DEFAULT_CONTROLLER_MANAGERS } from "./sanitize.js";

const list = (raw: string) =>
  raw.trim() === "none"
    ? []
    : raw
        .split(",")
        .map((s) => s.trim())
        .filter((s) => s !== "");

export const mirrorSettings = {
  kubeconfig: kubeconfigSetting,
  startupWait: startupWaitSetting,
  ...commonSettings,
  controllerManagers: {
    flag: "controller-managers",
    env: "APPLYGATE_MIRROR_CONTROLLER_MANAGERS",
    help: "field managers of controllers that are not a person's tool, separated by commas (or none): a field only they own is left out of Git",
    parse: list,
    default: [...DEFAULT_CONTROLLER_MANAGERS],
    defaultLabel: DEFAULT_CONTROLLER_MANAGERS.join(","),
  } as Setting<string[]>,
  authorDomain: {
    flag: "author-domain",
    env: "APPLYGATE_MIRROR_AUTHOR_DOMAIN",
    help: "a mirrored edit's commit author is <manager> <manager@domain>",
    parse: parsers.string,
    default: "cluster.local",
  } as Setting<string>,
  resolveInterval: {
    flag: "resolve-interval",
    env: "APPLYGATE_MIRROR_RESOLVE_INTERVAL",
    help: "how often a kind the API server does not serve yet (a CRD not installed) is looked up again",
    parse: parsers.duration,
    default: 10_000,
    defaultLabel: "10s",
  } as Setting<number>,
  metricsPort: {
    flag: "metrics-port",
    env: "APPLYGATE_MIRROR_METRICS_PORT",
    help: "port serving /metrics, /healthz and /readyz (0 for any free port)",
    parse: parsers.port,
    default: 9092,
  } as Setting<number>,
  metricsHost: metricsHostSetting("APPLYGATE_MIRROR_METRICS_HOST"),
  help: helpSetting,
};

export async function run(argv: string[]): Promise<number> {
  if (argv.includes("--help") || argv.includes("-h")) {
    process.stdout.write(
      `${helpText("mirror", "Mirror API edits that WatchRules select into Git.", mirrorSettings)}\n`,
    );
    return 0;
  }
  const { config } = loadConfig(mirrorSettings, argv);
  const log = createLogger({ name: "mirror", level: config.logLevel });
  const kc = loadKubeConfig(config.kubeconfig);
  // What it needs answers before it starts: the API server, then Redis.
  await apiServerAnswers(kc, config.startupWait);
  await redisAnswersAt(config.redisUrl, config.startupWait);
  const metrics = createMirrorMetrics(true);
  const mirror = new Mirror({
    metrics,
    kubeConfig: kc,
    redisUrl: config.redisUrl,
    redisPrefix: config.redisPrefix,
    log,
    controllerManagers: config.controllerManagers,
    authorDomain: config.authorDomain,
    resolveIntervalMs: config.resolveInterval,
  });
  // Probes answer from the start: /readyz says what is still missing until the rules are listed.
  const http = await startMirrorHttp({
    port: config.metricsPort,
    ...(config.metricsHost ? { host: config.metricsHost } : {}),
    metrics,
    checks: () => mirror.checks(),
  });
  await mirror.start();
  const signal = await stopSignal();
  log.info({ signal }, "stopping");
  await mirror.stop().catch((err) => log.error({ err: errorMessage(err) }, "stop failed"));
  await http.close();
  return 0;
}
