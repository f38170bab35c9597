/**
 * The mirror's HTTP endpoints (port 9092 in the manifests): `/healthz` (the process answers) for
 * the startup and liveness probes, `/readyz` (Redis answers, the rules are listed and every kind
 * watch has synced), `/metrics` (process metrics and the mirror's counters).
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { Counter, collectDefaultMetrics, Registry } from "prom-client";
import { errorMessage } from "../../queue/errors.js";

export interface MirrorMetrics {
  registry: Registry;
  /** A watched write handed to a branch's inbox, refused, or excluded. */
  outcome(outcome: "mirrored" | "refused" | "excluded"): void;
}

export function createMirrorMetrics(processMetrics = false): MirrorMetrics {
  const registry = new Registry();
  if (processMetrics) collectDefaultMetrics({ register: registry });
  const writes = new Counter({
    name: "applygate_mirror_writes_total",
    help: "Watched writes by outcome: mirrored (handed to the branch worker), refused (what the branch worker could not store), excluded (another applier's, controller-owned)",
    labelNames: ["outcome"],
    registers: [registry],
  });
  return { registry, outcome: (outcome) => writes.inc({ outcome }) };
}

export interface MirrorChecks {
  redis: boolean;
  started: boolean;
  unsyncedWatches: string[];
}

export async function startMirrorHttp(o: {
  port: number;
  host?: string;
  metrics: MirrorMetrics;
  checks: () => Promise<MirrorChecks>;
}): Promise<{ port: number; close(): Promise<void> }> {
  const server: Server = createServer((req, res) => {
    const path = (req.url ?? "/").split("?")[0];
    const send = (status: number, body: string, type = "text/plain; charset=utf-8") => {
      res.writeHead(status, { "content-type": type });
      res.end(body);
    };
    if (path === "/healthz") return send(200, "ok\n");
    if (path === "/readyz") {
      void o.checks().then(
        (c) => {
          const lines = [
            `redis: ${c.redis ? "ok" : "not answering"}`,
            `rules: ${c.started ? "listed" : "not listed yet"}`,
            `watches: ${c.unsyncedWatches.length === 0 ? "synced" : `not synced: ${c.unsyncedWatches.join(", ")}`}`,
          ];
          const ready = c.redis && c.started && c.unsyncedWatches.length === 0;
          send(ready ? 200 : 503, `${lines.join("\n")}\n`);
        },
        (err) => send(503, `readiness check failed: ${errorMessage(err)}\n`),
      );
      return;
    }
    if (path === "/metrics") {
      void o.metrics.registry.metrics().then(
        (text) => send(200, text, o.metrics.registry.contentType),
        () => send(500, "metrics collection failed\n"),
      );
      return;
    }
    send(404, "not found\n");
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(o.port, o.host, () => resolve());
  });
  return {
    port: (server.address() as AddressInfo).port,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
