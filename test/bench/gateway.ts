/**
 * Verified push deliveries per second and p99 latency through the whole gateway path (HMAC
 * verify, normalise, enqueue into real Redis), beside a bare fastify route answering the same
 * payload in the same run. Servers run in a child process; autocannon drives them on loopback.
 * Throughput moves with whatever else the machine runs, so each saturated run is also charged in
 * CPU: the server child's own (process.cpuUsage) and Redis's (INFO cpu), per request answered
 * 2xx. `BENCH_CPU_PROF=<dir>` writes a V8 CPU profile of the server child there.
 */
import { spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { cpus, loadavg } from "node:os";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import autocannon from "autocannon";
import { Redis } from "ioredis";
import { branchPushExample, hmacHex, pathOf, SECRETS } from "../support/gateway.js";
import type { Figure } from "./figure.js";

const DURATION_S = Number(process.env.BENCH_DURATION ?? 8);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 16);
const CPU_PROF_DIR = process.env.BENCH_CPU_PROF;

interface Drive {
  ok: number;
  rps: number;
  p99: number;
  non2xx: number;
  errors: number;
}

async function drive(
  url: string,
  body: string,
  headers: Record<string, string>,
  rate?: number,
): Promise<Drive> {
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
  return {
    ok,
    rps: ok / result.duration,
    p99: result.latency.p99,
    non2xx: result.non2xx,
    errors: result.errors,
  };
}

/** Seconds of CPU Redis has used (user + system, all its threads), from `INFO cpu`. */
function redisCpuSeconds(info: string): number {
  const field = (name: string) =>
    Number(info.match(new RegExp(`^used_cpu_${name}:([\\d.]+)`, "m"))?.[1] ?? 0);
  return field("user") + field("sys");
}

export async function run(): Promise<Figure[]> {
  const redisUrl = process.env.TEST_REDIS_URL ?? "redis://127.0.0.1:6379";
  const prefix = `bench-gw-${randomUUID().slice(0, 8)}`;
  const profiling = CPU_PROF_DIR ? ["--cpu-prof", `--cpu-prof-dir=${CPU_PROF_DIR}`] : [];
  const server = spawn(
    process.execPath,
    [...profiling, "--import", "tsx", fileURLToPath(new URL("./gateway-server.ts", import.meta.url))],
    {
      env: { ...process.env, TEST_REDIS_URL: redisUrl, BENCH_PREFIX: prefix, APPLYGATE_LOG_FORMAT: "json" },
      stdio: ["pipe", "pipe", "inherit"],
    },
  );
  const exited = new Promise<never>((_, reject) =>
    server.once("exit", (code) => reject(new Error(`bench server exited with ${code}`))),
  );
  exited.catch(() => {});
  const lines = createInterface({ input: server.stdout! })[Symbol.asyncIterator]();
  const nextLine = async () => {
    const next = await Promise.race([lines.next(), exited]);
    if (next.done) throw new Error("bench server closed its output");
    return next.value as string;
  };
  const serverCpuMs = async () => {
    server.stdin!.write("cpu\n");
    const { user, system } = JSON.parse(await nextLine()) as NodeJS.CpuUsage;
    return (user + system) / 1000;
  };
  const body = JSON.stringify(branchPushExample());
  const path = pathOf(SECRETS.github, "github");
  const headers = {
    "content-type": "application/json",
    "x-github-event": "push",
    "x-hub-signature-256": `sha256=${hmacHex("sha256", SECRETS.github, body)}`,
  };
  const redis = new Redis(redisUrl);
  const redisCpuMs = async () => redisCpuSeconds(await redis.info("cpu")) * 1000;
  /** A saturated run, with the CPU the server child and Redis spent per request answered 2xx. */
  const charged = async (url: string) => {
    const [node0, redis0] = [await serverCpuMs(), await redisCpuMs()];
    const client0 = process.cpuUsage();
    const result = await drive(url, body, headers);
    const client = process.cpuUsage(client0);
    const [node1, redis1] = [await serverCpuMs(), await redisCpuMs()];
    const per = (ms: number) => (result.ok > 0 ? ms / result.ok : 0);
    return {
      ...result,
      nodeMs: per(node1 - node0),
      redisMs: per(redis1 - redis0),
      clientMs: per((client.user + client.system) / 1000),
    };
  };

  try {
    const urls = JSON.parse(await nextLine()) as { gateway: string; bare: string };
    const loadBefore = loadavg()[0]!;
    await drive(urls.gateway + path, body, headers); // warm-up (JIT, connections)
    const bare = await charged(urls.bare + path);
    const gateway = await charged(urls.gateway + path);
    // Latency when not saturated: half the measured throughput, paced.
    const rate = Math.max(1, Math.round(gateway.rps / 2));
    const pacedBare = await drive(urls.bare + path, body, headers, rate);
    const paced = await drive(urls.gateway + path, body, headers, rate);
    if (gateway.non2xx > 0 || gateway.errors > 0) {
      throw new Error(`gateway answered ${gateway.non2xx} non-2xx and ${gateway.errors} errors`);
    }
    const note = `${CONNECTIONS} connections, ${DURATION_S}s, ${body.length}-byte push, loopback`;
    const ms = (v: number) => Number(v.toFixed(4));
    // CPU per push is steadier than throughput on a shared machine, not immune: say how busy it was.
    const load = `1-min load average ${loadBefore.toFixed(1)} → ${loadavg()[0]!.toFixed(1)} on ${cpus().length} cores`;
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
      {
        bench: "gateway.node_cpu_per_push",
        value: ms(gateway.nodeMs),
        unit: "ms",
        baseline: ms(bare.nodeMs),
        ratio: bare.nodeMs > 0 ? Number((gateway.nodeMs / bare.nodeMs).toFixed(3)) : 0,
        note: `server process CPU (user + system) over the saturated run / requests answered 2xx; ${note}; ${load}`,
      },
      {
        bench: "gateway.redis_cpu_per_push",
        value: ms(gateway.redisMs),
        unit: "ms",
        baseline: ms(bare.redisMs),
        note: "Redis's own CPU (INFO cpu) over the saturated run / requests answered 2xx; anything else using that Redis counts too",
      },
      {
        // The load generator shares the cores: what it costs per request weighs on both routes alike.
        bench: "gateway.load_generator_cpu_per_request",
        value: ms(gateway.clientMs),
        unit: "ms",
        baseline: ms(bare.clientMs),
        note: "autocannon's process (this one) over the saturated run / requests answered 2xx",
      },
    ];
  } finally {
    server.stdin!.end();
    await exited.catch(() => {});
    let cursor = "0";
    do {
      const [next, keys] = await redis.scan(cursor, "MATCH", `${prefix}*`, "COUNT", 1000);
      cursor = next;
      if (keys.length) await redis.del(...keys);
    } while (cursor !== "0");
    redis.disconnect();
  }
}
