/**
 * `applygate playground`: runs applygate on a laptop against embedded defaults and prints what it
 * serves. Ctrl-C stops everything it started and removes its temporary files.
 */
import { stopSignal } from "../../queue/cli/stop-signal.js";
import {
  commonSettings,
  helpSetting,
  helpText,
  loadConfig,
  parsers,
  type Setting,
} from "../../queue/config.js";
import { createLogger } from "../../queue/log.js";
import { RedisUnavailableError } from "../../queue/redis.js";
import type { Assembly } from "./assembly.js";
import { DEMO_APPS, DEMO_GRANT, DEMO_NAMESPACE, demoConfigPath } from "./demo.js";

const settings = {
  logLevel: commonSettings.logLevel,
  port: {
    flag: "port",
    env: "APPLYGATE_PLAYGROUND_PORT",
    help: "gateway port (0: any free port)",
    parse: parsers.port,
    default: 0,
  } as Setting<number>,
  help: helpSetting,
};

const SUMMARY =
  "Run the gateway, worker and sidecars against Redis (REDIS_URL, else the one on 127.0.0.1:6379, else a private redis-server it starts; none installed: the install command and exit 1), a local Git server and a simulated cluster.";

const RACE_HELP = `usage: applygate playground race [--intake]   (from a checkout: npm start -- race)

Replays the two-edit race twice on assemblies of its own (its own Redis prefix, Git server and
simulated cluster; a running playground is not touched): once with Flux, Argo CD and the webhook
deployer on their own timers (the deployer building every push, as a CI pipeline does), once held
by applygate, and prints the two timelines side by side for each applier, within the terminal's
width. The watch plane mirrors each API edit into Git, as in the playground: on the appliers' own
timers it also records the revert as a commit of its own, and the branch ping-pongs; held, the two
edits are exactly two commits.

  --intake   the edits are posted to the intake API instead and nothing is mirrored: the revert
             then shows on the cluster only, not in Git
`;

/** The ready screen's line for the race: a command that runs from a checkout as it is. */
export const RACE_HINT =
  "  npm start -- race               (the two-edit race, with and without applygate; npx applygate playground race too)";

const REAL_HELP = `
  --real   run on the real components instead (kube-apiserver, etcd, Flux and Argo CD built from
           their Go modules by \`npm run real:build\`, all on 127.0.0.1; docs/playground.md)`;

export async function run(argv: string[]): Promise<number> {
  if (argv[0] === "race") return race(argv.slice(1));
  if (argv.includes("--help") || argv.includes("-h")) {
    process.stdout.write(`${helpText("playground", SUMMARY, settings)}${REAL_HELP}\n`);
    return 0;
  }
  if (argv.includes("--real")) {
    const others = argv.filter((a) => a !== "--real");
    if (others.length > 0) {
      process.stderr.write(`applygate playground --real: takes no other flag (${others.join(" ")})\n`);
      return 2;
    }
    const { runReal } = await import("./real.js");
    return runReal((line) => process.stdout.write(`${line}\n`), stopSignal());
  }
  const { config } = loadConfig(settings, argv);
  const log = createLogger({
    level: config.logLevel === "info" ? "warn" : config.logLevel,
    name: "playground",
  });
  // Loaded only now, so `--help` and bad settings answer without loading every component.
  // Listen for Ctrl-C from the start: a signal during start-up stops once started, one right after the screen stops cleanly.
  const stopAsked = stopSignal();
  const { startAssembly } = await import("./assembly.js");
  let assembly: Assembly;
  try {
    assembly = await startAssembly({ log, gatewayPort: config.port, withMirror: true });
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
    `  Metrics      ${a.gateway.metricsUrl}/metrics  (the gateway's, on a port of its own as deployed)`,
    `  Dashboard    ${a.dashboard.url}  (user ${a.dashboard.user}, password ${a.dashboard.password}; ${
      a.dashboard.readOnly ? "read-only, the gateway's default" : "writable"
    })`,
    `  Cluster      export KUBECONFIG=${a.kubeconfigPath}  (you are admin; each component runs as its ServiceAccount)`,
    `  Audit log    ${a.auditLogPath}`,
    `  Scope        ScopeGrant ${DEMO_GRANT.name} lets GitTargets ${DEMO_NAMESPACE}/flux-app, argo-app and webhook-app hold`,
    `               objects in ${DEMO_GRANT.namespaces.join(", ")}; any other namespace or cluster-scoped kind is refused (403)`,
    "",
    "Try:",
    `  export KUBECONFIG=${a.kubeconfigPath}`,
    "  kubectl get fluxclaims,argocdclaims,webhookclaims -A",
    `  git clone ${a.demo.repoUrl} demo && cd demo`,
    `    edit ${demoConfigPath("flux")}, then git commit -am edit && git push`,
    "    (watch the push notice arrive below and each applier apply it once: Flux, Argo CD and the webhook deployer)",
    `  kubectl edit cm -n ${DEMO_APPS.flux.namespace} ${DEMO_APPS.flux.name}`,
    "    (the mirror writes the edit into Git within the commit window: no intake call, and",
    "     Flux applying it is not mirrored back; kubectl get watchrules -A shows the counts)",
    `  export REDIS_URL=${a.redis.url} APPLYGATE_REDIS_PREFIX=${a.prefix}`,
    `  npx applygate status -n ${DEMO_NAMESPACE}   (why an apply is or is not happening; docs/operations.md)`,
    RACE_HINT,
    "",
    "Ctrl-C stops everything.",
    "",
    "Progress (each apply: Requested → Running → Settling → Succeeded):",
    "",
  ];
  process.stdout.write(lines.join("\n"));
  const { formatProgress, observeProgress } = await import("./progress.js");
  const progress = await observeProgress({
    redisUrl: a.redis.url,
    prefix: a.prefix,
    onEvent: (e) => process.stdout.write(`${formatProgress(e)}\n`),
  }).catch(() => undefined);
  await stopAsked;
  process.stdout.write("\nstopping…\n");
  await progress?.stop();
  await a.stop();
  return 0;
}

async function race(argv: string[]): Promise<number> {
  if (argv.includes("--help") || argv.includes("-h")) {
    process.stdout.write(RACE_HELP);
    return 0;
  }
  const log = createLogger({ level: "error", name: "playground-race" });
  const { runRace } = await import("./race.js");
  try {
    const mirror = !argv.includes("--intake");
    const { held } = await runRace({
      log,
      mirror,
      ...(process.stdout.columns ? { columns: process.stdout.columns } : {}),
      out: (line) => process.stdout.write(`${line}\n`),
    });
    // The promise the race makes, for each of the three appliers: with applygate, the later value
    // wins with one commit per save.
    const kept = held.every(
      (r) => r.cluster === "green" && !r.reverted && r.commits === r.saves && r.applies.length === 0,
    );
    return kept ? 0 : 1;
  } catch (err) {
    if (err instanceof RedisUnavailableError) {
      process.stderr.write(`applygate playground race: ${err.message}\n`);
      return 1;
    }
    throw err;
  }
}
