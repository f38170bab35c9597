/**
 * A real Prometheus server (Debian's `prometheus`) for a test: bound to 127.0.0.1 on an ephemeral
 * port, its storage in a temporary folder removed on stop, its targets in file_sd files the test
 * rewrites as processes come and go (as Kubernetes service discovery follows pods), and its HTTP
 * API read as an operator's tools read it.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtemp, rename, rm, writeFile } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { stringify } from "yaml";
import { errorMessage } from "../../queue/errors.js";
import { until } from "./wait.js";

export interface ScrapeJob {
  name: string;
  metricsPath: string;
  scrapeInterval: string;
  scrapeTimeout?: string;
  scheme?: string;
  honorLabels?: boolean;
}

export interface TargetGroup {
  targets: string[];
  labels: Record<string, string>;
}

export interface PrometheusAlert {
  labels: Record<string, string>;
  annotations: Record<string, string>;
  state: "pending" | "firing";
  activeAt: string;
  value: string;
}

export interface Prometheus {
  url: string;
  /** Replaces a job's targets (the file Prometheus watches is rewritten atomically). */
  setTargets(job: string, groups: TargetGroup[]): Promise<void>;
  /** An instant query's result vector. */
  query(expr: string): Promise<{ metric: Record<string, string>; value: [number, string] }[]>;
  alerts(): Promise<PrometheusAlert[]>;
  targets(): Promise<
    { labels: Record<string, string>; health: string; lastError: string; scrapePool: string }[]
  >;
  /** What the server printed (for a failure's message). */
  output(): string;
  stop(): Promise<void>;
}

function freePort(): Promise<number> {
  return new Promise((done, fail) => {
    const srv = createServer();
    srv.once("error", fail);
    srv.listen(0, "127.0.0.1", () => {
      const { port } = srv.address() as { port: number };
      srv.close(() => done(port));
    });
  });
}

/**
 * Starts Prometheus with `jobs` (targets from file_sd files, empty until setTargets), `rules` (a
 * rule file's text) and the given evaluation interval.
 */
export async function startPrometheus(o: {
  jobs: ScrapeJob[];
  rules: string;
  evaluationInterval: string;
}): Promise<Prometheus> {
  const dir = await mkdtemp(join(tmpdir(), "applygate-prometheus-"));
  const sdFile = (job: string) => join(dir, `targets-${encodeURIComponent(job).replace(/%/g, "_")}.json`);
  for (const job of o.jobs) await writeFile(sdFile(job.name), "[]");
  await writeFile(join(dir, "rules.yaml"), o.rules);
  const config = {
    global: { evaluation_interval: o.evaluationInterval },
    rule_files: [join(dir, "rules.yaml")],
    scrape_configs: o.jobs.map((j) => ({
      job_name: j.name,
      metrics_path: j.metricsPath,
      scrape_interval: j.scrapeInterval,
      ...(j.scrapeTimeout ? { scrape_timeout: j.scrapeTimeout } : {}),
      ...(j.scheme ? { scheme: j.scheme } : {}),
      ...(j.honorLabels !== undefined ? { honor_labels: j.honorLabels } : {}),
      file_sd_configs: [{ files: [sdFile(j.name)], refresh_interval: "1s" }],
    })),
  };
  await writeFile(join(dir, "prometheus.yml"), stringify(config));

  let child: ChildProcess | undefined;
  let out = "";
  let url = "";
  // The port is free when picked; another process may take it before Prometheus binds: try again.
  for (let attempt = 1; attempt <= 3 && !child; attempt++) {
    const port = await freePort();
    url = `http://127.0.0.1:${port}`;
    const c = spawn(
      "prometheus",
      [
        `--config.file=${join(dir, "prometheus.yml")}`,
        `--storage.tsdb.path=${join(dir, "data")}`,
        `--web.listen-address=127.0.0.1:${port}`,
        "--log.level=warn",
      ],
      { stdio: ["ignore", "pipe", "pipe"] },
    );
    c.stdout?.on("data", (d) => (out += d));
    c.stderr?.on("data", (d) => (out += d));
    const exited = new Promise<void>((done) => c.once("exit", () => done()));
    const ready = until(
      async () => {
        if (c.exitCode !== null) return "exited";
        try {
          return (await fetch(`${url}/-/ready`)).status === 200 && "ready";
        } catch {
          return false;
        }
      },
      `Prometheus to answer /-/ready on ${url}`,
      { timeoutMs: 60_000, everyMs: 100 },
    );
    const outcome = await ready.catch((err) => {
      c.kill("SIGKILL");
      throw new Error(`${errorMessage(err)}\n${out}`);
    });
    if (outcome === "ready") child = c;
    else {
      await exited;
      if (!out.includes("address already in use")) throw new Error(`Prometheus exited:\n${out}`);
    }
  }
  if (!child) throw new Error(`Prometheus found no free port:\n${out}`);
  const proc = child;

  const api = async <T>(path: string): Promise<T> => {
    const res = await fetch(`${url}${path}`);
    const body = (await res.json()) as { status: string; data: T; error?: string };
    if (body.status !== "success") throw new Error(`${path}: ${body.error}`);
    return body.data;
  };
  return {
    url,
    async setTargets(job, groups) {
      const file = sdFile(job);
      await writeFile(`${file}.tmp`, JSON.stringify(groups));
      await rename(`${file}.tmp`, file);
    },
    async query(expr) {
      const data = await api<{ result: { metric: Record<string, string>; value: [number, string] }[] }>(
        `/api/v1/query?query=${encodeURIComponent(expr)}`,
      );
      return data.result;
    },
    async alerts() {
      return (await api<{ alerts: PrometheusAlert[] }>("/api/v1/alerts")).alerts;
    },
    async targets() {
      return (
        await api<{
          activeTargets: {
            labels: Record<string, string>;
            health: string;
            lastError: string;
            scrapePool: string;
          }[];
        }>("/api/v1/targets?state=active")
      ).activeTargets;
    },
    output: () => out,
    async stop() {
      if (proc.exitCode === null) {
        const exited = new Promise<void>((done) => proc.once("exit", () => done()));
        proc.kill("SIGTERM");
        await Promise.race([exited, new Promise((r) => setTimeout(r, 10_000))]);
        if (proc.exitCode === null) proc.kill("SIGKILL");
      }
      await rm(dir, { recursive: true, force: true });
    },
  };
}
