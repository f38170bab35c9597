/**
 * A worker replica with its decisions in a process of its own, assembled exactly as the
 * playground's assembly assembles one in-process, so a soak run can SIGKILL it. Environment:
 * APPLYGATE_SERVER, APPLYGATE_USER and APPLYGATE_TOKEN (the API server and the worker's
 * ServiceAccount identity), REDIS_URL, REDIS_PREFIX, CACHE_DIR, LEASE_MS, LIST_INTERVAL_MS,
 * BRANCH_OPTIONS (JSON). Logs go to stderr at SCENARIO_LOG's level; prints "ready" once started.
 */
import pino from "pino";
import { createDecisions, KubeObjects } from "../../queue/apply/index.js";
import { silentLogger } from "../../queue/log.js";
import { ClusterCache } from "../../queue/worker/cluster-cache.js";
import { KubeDirectory, KubeStatusSink } from "../../queue/worker/kube.js";
import { Replica } from "../../queue/worker/replica.js";
import { makeKubeConfig } from "../cluster/kubeconfig.js";

const kc = makeKubeConfig({
  server: process.env.APPLYGATE_SERVER as string,
  user: process.env.APPLYGATE_USER as string,
  token: process.env.APPLYGATE_TOKEN as string,
});
const log = process.env.SCENARIO_LOG
  ? pino({ level: process.env.SCENARIO_LOG, timestamp: pino.stdTimeFunctions.isoTime }, pino.destination(2))
  : silentLogger();
const wlog = log.child({ component: "worker", pid: process.pid });
const redisUrl = process.env.REDIS_URL as string;
const prefix = process.env.REDIS_PREFIX as string;
const cache = new ClusterCache(kc, wlog);
await cache.start();
const status = new KubeStatusSink(cache.kube, wlog, Date.now, 8, cache);
const directory = new KubeDirectory(cache, { log: wlog, status });
const decisions = createDecisions({
  redisUrl,
  prefix,
  objects: new KubeObjects(cache.kube, wlog, {}, cache),
  changes: cache,
  keys: (namespace, name) => cache.secret(namespace, name),
  directory,
  log: wlog,
  listIntervalMs: Number(process.env.LIST_INTERVAL_MS ?? 500),
});
const replica = new Replica({
  redisUrl,
  prefix,
  directory,
  cacheDir: process.env.CACHE_DIR as string,
  log: wlog,
  leaseMs: Number(process.env.LEASE_MS ?? 3000),
  status,
  attach: decisions.attach,
  branch: JSON.parse(process.env.BRANCH_OPTIONS ?? "{}"),
});
await replica.start();
process.stdout.write("ready\n");
process.once("SIGTERM", () => {
  void replica
    .stop()
    .then(() => decisions.close())
    .then(() => cache.close())
    .finally(() => process.exit(0));
});
