/**
 * Verified push deliveries per second and p99 latency through the whole gateway path (HMAC
 * verify, normalise, enqueue into real Redis), beside a bare fastify route answering the same
 * payload in the same run. Servers run in a child process; autocannon drives them on loopback.
 */
import { spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import autocannon from "autocannon";
import { Redis } from "ioredis";
import { branchPushExample, hmacHex, pathOf, SECRETS } from "../support/gateway.js";
import type { Figure } from "./figure.js";

const DURATION_S = Number(process.env.BENCH_DURATION ?? 8);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 16);

async function drive(url: string, body: string, headers: Record<string, string>, rate?: number) {
  const result = await autocannon({
    url,
    method: "POST",
    connections: rate ? 4 : CONNECTIONS,
    ...(rate ? { overallRate: rate } : {}),
    duration: DURATION_S,
    headers,
    body,
    requests: [
      {
        // A fresh delivery id per request, so every delivery is a new job rather than a duplicate.
        setupRequest: (req: any) => ({
          ...req,
          headers: { ...req.headers, "x-github-delivery": randomUUID() },
        }),
      },
    ],
  });
  const ok = result["2xx"];
  return { rps: ok / result.duration, p99: result.latency.p99, non2xx: result.non2xx, errors: result.errors };
}

export async function run(): Promise<Figure[]> {
  const redisUrl = process.env.TEST_REDIS_URL ?? "redis://127.0.0.1:6379";
  const prefix = `bench-gw-${randomUUID().slice(0, 8)}`;
  const server = spawn(
    process.execPath,
    ["--import", "tsx", fileURLToPath(new URL("./gateway-server.ts", import.meta.url))],
    {
      env: { ...process.env, TEST_REDIS_URL: redisUrl, BENCH_PREFIX: prefix, APPLYGATE_LOG_FORMAT: "json" },
      stdio: ["pipe", "pipe", "inherit"],
    },
  );
  const first = await new Promise<string>((resolve, reject) => {
    server.once("exit", (code) => reject(new Error(`bench server exited with ${code}`)));
    createInterface({ input: server.stdout! }).once("line", resolve);
  });
  const urls = JSON.parse(first) as { gateway: string; bare: string };
  const body = JSON.stringify(branchPushExample());
  const path = pathOf(SECRETS.github, "github");
  const headers = {
    "content-type": "application/json",
    "x-github-event": "push",
    "x-hub-signature-256": `sha256=${hmacHex("sha256", SECRETS.github, body)}`,
  };
  try {
    await drive(urls.gateway + path, body, headers); // warm-up (JIT, connections)
    const bare = await drive(urls.bare + path, body, headers);
    const gateway = await drive(urls.gateway + path, body, headers);
    // Latency when not saturated: half the measured throughput, paced.
    const rate = Math.max(1, Math.round(gateway.rps / 2));
    const pacedBare = await drive(urls.bare + path, body, headers, rate);
    const paced = await drive(urls.gateway + path, body, headers, rate);
    if (gateway.non2xx > 0 || gateway.errors > 0) {
      throw new Error(`gateway answered ${gateway.non2xx} non-2xx and ${gateway.errors} errors`);
    }
    const note = `${CONNECTIONS} connections, ${DURATION_S}s, ${body.length}-byte push, loopback`;
    return [
      {
        bench: "gateway.verified_push_per_second",
        value: Math.round(gateway.rps),
        unit: "req/s",
        baseline: Math.round(bare.rps),
        ratio: Number((gateway.rps / bare.rps).toFixed(3)),
        note,
      },
      {
        bench: "gateway.verified_push_p99",
        value: gateway.p99,
        unit: "ms",
        baseline: bare.p99,
        ratio: bare.p99 > 0 ? Number((gateway.p99 / bare.p99).toFixed(3)) : 0,
        note,
      },
      {
        bench: "gateway.verified_push_p99_at_half_load",
        value: paced.p99,
        unit: "ms",
        baseline: pacedBare.p99,
        ratio: pacedBare.p99 > 0 ? Number((paced.p99 / pacedBare.p99).toFixed(3)) : 0,
        note: `${rate} req/s paced over 4 connections, ${DURATION_S}s`,
      },
    ];
  } finally {
    server.stdin!.end();
    await new Promise((r) => server.once("exit", r));
    const redis = new Redis(redisUrl);
    let cursor = "0";
    do {
      const [next, keys] = await redis.scan(cursor, "MATCH", `${prefix}*`, "COUNT", 1000);
      cursor = next;
      if (keys.length) await redis.del(...keys);
    } while (cursor !== "0");
    redis.disconnect();
  }
}
