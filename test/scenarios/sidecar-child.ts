/**
 * A sidecar in a process of its own, started exactly as the assembly starts one in-process, so a
 * scenario can SIGKILL it. Environment: APPLYGATE_SERVER, APPLYGATE_USER and APPLYGATE_TOKEN (the API
 * server and the sidecar's ServiceAccount identity), REDIS_URL, REDIS_PREFIX, APPLIER,
 * SIDECAR_OPTIONS (JSON, the kind's options), RESYNC_MS, and SERVE_METRICS=1 to serve /metrics,
 * /healthz and /readyz on an ephemeral loopback port. Prints "ready" once started ("ready <port>"
 * when serving).
 */
import pino from "pino";
import { silentLogger } from "../../queue/log.js";
import { type SidecarApplier, startSidecar } from "../../sidecar/main.js";
import { makeKubeConfig } from "../cluster/kubeconfig.js";

const kubeConfig = makeKubeConfig({
  server: process.env.APPLYGATE_SERVER as string,
  user: process.env.APPLYGATE_USER as string,
  token: process.env.APPLYGATE_TOKEN as string,
});
const applier = process.env.APPLIER as SidecarApplier;
const sidecar = await startSidecar({
  applier,
  kubeConfig,
  redisUrl: process.env.REDIS_URL as string,
  redisPrefix: process.env.REDIS_PREFIX as string,
  // Logs go to stderr: stdout carries the "ready" line.
  log: process.env.SCENARIO_LOG
    ? pino({ level: process.env.SCENARIO_LOG }, pino.destination(2))
    : silentLogger(),
  instance: `scenario-${applier}-${process.pid}`,
  resyncMs: Number(process.env.RESYNC_MS ?? 2000),
  options: JSON.parse(process.env.SIDECAR_OPTIONS ?? "{}"),
  ...(process.env.SERVE_METRICS === "1" ? { serve: { port: 0, host: "127.0.0.1" } } : {}),
});
process.stdout.write(sidecar.http ? `ready ${sidecar.http.port}\n` : "ready\n");
process.once("SIGTERM", () => {
  void sidecar.stop().finally(() => process.exit(0));
});
