/**
 * The start and the end that `applygate sidecar` and `applygate mirror` share, around what each
 * runs: --help prints and stops; otherwise the settings are loaded, the logger made and the API
 * server asked to answer (within --startup-wait) before anything else; at SIGTERM or SIGINT what
 * runs is stopped.
 */
import type { KubeConfig } from "@kubernetes/client-node";
import { stopSignal } from "../queue/cli/stop-signal.js";
import {
  commonSettings,
  helpText,
  kubeconfigSetting,
  type Loaded,
  loadConfig,
  type Settings,
} from "../queue/config.js";
import { errorMessage } from "../queue/errors.js";
import { loadKubeConfig } from "../queue/kube/index.js";
import { createLogger, type Logger } from "../queue/log.js";
import { apiServerAnswers, startupWaitSetting } from "../queue/startup-check.js";

/** The settings the start reads, part of each command's own (spread into them). */
export const clusterCommandSettings = {
  kubeconfig: kubeconfigSetting,
  startupWait: startupWaitSetting,
  ...commonSettings,
};
type StartSettings = Settings & typeof clusterCommandSettings;

export interface ClusterCommand<S extends Settings> {
  config: Loaded<S>;
  log: Logger;
  kc: KubeConfig;
}

/** The command started, its API server answering; undefined once --help is printed (exit 0). */
export async function startClusterCommand<S extends StartSettings>(
  command: string,
  summary: string,
  settings: S,
  argv: string[],
): Promise<ClusterCommand<S> | undefined> {
  if (argv.includes("--help") || argv.includes("-h")) {
    process.stdout.write(`${helpText(command, summary, settings)}\n`);
    return undefined;
  }
  const { config } = loadConfig(settings, argv);
  const start = config as Loaded<StartSettings>;
  const log = createLogger({ name: command, level: start.logLevel });
  const kc = loadKubeConfig(start.kubeconfig);
  await apiServerAnswers(kc, start.startupWait);
  return { config, log, kc };
}

/** Waits for SIGTERM or SIGINT, then stops `running`; a failed stop is logged, not thrown. */
export async function stopOnSignal(log: Logger, running: { stop(): Promise<unknown> }): Promise<void> {
  const signal = await stopSignal();
  log.info({ signal }, "stopping");
  await running.stop().catch((err) => log.error({ err: errorMessage(err) }, "stop failed"));
}
