/**
 * `applygate playground`: runs applygate on a laptop against embedded defaults and prints what it
 * serves. Ctrl-C stops everything it started and removes its temporary files.
 */
import { commonSettings, helpText, loadConfig, parsers, type Setting } from "../../queue/config.js";
import { createLogger } from "../../queue/log.js";
import { RedisUnavailableError } from "../../queue/redis.js";
import type { Assembly } from "./assembly.js";

const settings = {
  logLevel: commonSettings.logLevel,
  port: {
    flag: "port",
    env: "APPLYGATE_PLAYGROUND_PORT",
    help: "gateway port (0: any free port)",
    parse: parsers.port,
    default: 0,
  } as Setting<number>,
  help: {
    flag: "help",
    help: "print this help",
    parse: parsers.boolean,
    default: false,
    boolean: true,
  } as Setting<boolean>,
};

const SUMMARY =
  "Run the gateway, worker and sidecars against an embedded Redis (REDIS_URL, else 127.0.0.1:6379, else a private redis-server), a local Git server and a simulated cluster.";

export async function run(argv: string[]): Promise<number> {
  if (argv.includes("--help") || argv.includes("-h")) {
    process.stdout.write(`${helpText("playground", SUMMARY, settings)}\n`);
    return 0;
  }
  const { config } = loadConfig(settings, argv);
  const log = createLogger({
    level: config.logLevel === "info" ? "warn" : config.logLevel,
    name: "playground",
  });
  // Loaded only now, so `--help` and bad settings answer without loading every component.
  const { startAssembly } = await import("./assembly.js");
  let assembly: Assembly;
  try {
    assembly = await startAssembly({ log, gatewayPort: config.port });
  } catch (err) {
    if (err instanceof RedisUnavailableError) {
      process.stderr.write(`applygate playground: ${err.message}\n`);
      return 1;
    }
    throw err;
  }
  const a = assembly;
  const lines = [
    "",
    "applygate playground is running",
    "",
    `  Redis        ${a.redis.url} (${a.redis.origin === "private" ? "private redis-server" : a.redis.origin})`,
    `  Git          ${a.demo.repoUrl}  (branch ${a.demo.branch})`,
    `  Gateway      ${a.gateway.url}  (health: ${a.gateway.url}/healthz)`,
    `  Dashboard    ${a.dashboard.url}  (user ${a.dashboard.user}, password ${a.dashboard.password})`,
    `  Cluster      export KUBECONFIG=${a.kubeconfigPath}`,
    "",
    "Try:",
    "  kubectl get gitproviders,gittargets -A",
    `  git clone ${a.demo.repoUrl} demo && cd demo && edit && git commit -am edit && git push`,
    "",
    "Ctrl-C stops everything.",
    "",
  ];
  process.stdout.write(lines.join("\n"));
  await new Promise<void>((resolve) => {
    process.once("SIGINT", resolve);
    process.once("SIGTERM", resolve);
  });
  process.stdout.write("\nstopping…\n");
  await a.stop();
  return 0;
}
