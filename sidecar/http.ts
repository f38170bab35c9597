/**
 * The sidecar's HTTP endpoints (port 9091 in the manifests): `/metrics` for the PodMonitor,
 * `/healthz` (the process answers) for the startup and liveness probes, and `/readyz` (Redis
 * answers and every watch the sidecar needs has synced and is not failing).
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { errorMessage } from "../queue/errors.js";
import type { Logger } from "../queue/log.js";
import type { SidecarMetrics } from "./metrics.js";

export interface ReadinessChecks {
  redis: boolean;
  claimsSynced: boolean;
  /** API paths of the watches (informers) whose list has not landed, or fails since. */
  unsyncedWatches?: string[];
}

/** Ready only when every check passes; the body names each check, so a failing probe says why. */
export function readiness(checks: ReadinessChecks): { ready: boolean; body: string } {
  const unsynced = checks.unsyncedWatches ?? [];
  const lines = [
    `redis: ${checks.redis ? "ok" : "not answering"}`,
    `claims: ${checks.claimsSynced ? "synced" : "not synced yet"}`,
    `watches: ${unsynced.length === 0 ? "synced" : `not synced: ${unsynced.join(", ")}`}`,
  ];
  return {
    ready: checks.redis && checks.claimsSynced && unsynced.length === 0,
    body: `${lines.join("\n")}\n`,
  };
}

export { redisAnswersPing } from "../queue/redis.js";

export interface SidecarHttpOptions {
  /** 0 picks any free port. */
  port: number;
  /** Interface to listen on; all of them when omitted (the kubelet probes the pod's IP). */
  host?: string;
  metrics: SidecarMetrics;
  checks: () => Promise<ReadinessChecks>;
  log: Logger;
}

export interface SidecarHttp {
  port: number;
  /** http://host:port, with 127.0.0.1 when listening on every interface. */
  url: string;
  close(): Promise<void>;
}

export async function startSidecarHttp(o: SidecarHttpOptions): Promise<SidecarHttp> {
  const server: Server = createServer((req, res) => {
    const path = (req.url ?? "/").split("?")[0];
    const send = (status: number, body: string, type = "text/plain; charset=utf-8") => {
      res.writeHead(status, { "content-type": type });
      res.end(body);
    };
    if (req.method !== "GET" && req.method !== "HEAD") return send(405, "method not allowed\n");
    if (path === "/healthz") return send(200, "ok\n");
    if (path === "/readyz") {
      void o.checks().then(
        (checks) => {
          const r = readiness(checks);
          send(r.ready ? 200 : 503, r.body);
        },
        (err) => send(503, `readiness check failed: ${errorMessage(err)}\n`),
      );
      return;
    }
    if (path === "/metrics") {
      void o.metrics.text().then(
        (text) => send(200, text, o.metrics.registry.contentType),
        (err) => {
          o.log.warn({ err: errorMessage(err) }, "metrics collection failed");
          send(500, "metrics collection failed\n");
        },
      );
      return;
    }
    send(404, "not found\n");
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(o.port, o.host, () => {
      server.off("error", reject);
      resolve();
    });
  });
  const { port } = server.address() as AddressInfo;
  const host = o.host && o.host !== "0.0.0.0" && o.host !== "::" ? o.host : "127.0.0.1";
  return {
    port,
    url: `http://${host.includes(":") ? `[${host}]` : host}:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
