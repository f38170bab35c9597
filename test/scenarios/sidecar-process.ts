/**
 * A Flux sidecar in a process of its own (sidecar-child.ts) on a scene's cluster and Redis, for a
 * scenario to SIGKILL. It runs as the Flux sidecar's own identity: the ServiceAccount its patch
 * runs under, with only its rules.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { createInterface } from "node:readline";
import type * as k8s from "@kubernetes/client-node";
import type { Scene } from "./harness.js";

/**
 * Starts the process and waits for its "ready" line. With `serveMetrics` it serves /metrics,
 * /healthz and /readyz on a port of its own, the one answered.
 */
export async function fluxSidecarProcess(
  s: Scene,
  opts: { serveMetrics?: boolean } = {},
): Promise<{ child: ChildProcess; port: number | undefined }> {
  const kc = s.a.identities.flux.kubeConfig;
  const cluster = kc.getCurrentCluster() as k8s.Cluster;
  const user = kc.getCurrentUser() as k8s.User & { token: string };
  const child = spawn(
    process.execPath,
    ["--import", "tsx", new URL("./sidecar-child.ts", import.meta.url).pathname],
    {
      stdio: ["ignore", "pipe", "inherit"],
      env: {
        ...process.env,
        APPLYGATE_SERVER: cluster.server,
        APPLYGATE_TOKEN: user.token,
        APPLYGATE_USER: user.name,
        REDIS_URL: s.a.redis.url,
        REDIS_PREFIX: s.a.prefix,
        APPLIER: "flux",
        SIDECAR_OPTIONS: JSON.stringify(s.a.timers.sidecar.flux),
        RESYNC_MS: String(s.a.timers.sidecar.resyncMs),
        ...(opts.serveMetrics ? { SERVE_METRICS: "1" } : {}),
      },
    },
  );
  const lines = createInterface({ input: child.stdout! })[Symbol.asyncIterator]();
  const first = await lines.next();
  // "ready <port>" when serving, "ready" alone otherwise.
  const m = (opts.serveMetrics ? /^ready (\d+)$/ : /^ready$/).exec(String(first.value ?? "").trim());
  if (first.done || !m) throw new Error("the sidecar process did not start");
  return { child, port: m[1] === undefined ? undefined : Number(m[1]) };
}
