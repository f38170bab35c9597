/**
 * Time to the playground's ready screen: `applygate playground` started as a child process, timed
 * until it prints "Ctrl-C stops everything", then stopped with Ctrl-C (SIGINT). The bound
 * is 30 s on 2 cores; the figure is the median of three starts, with that bound as the baseline.
 */
import { spawn } from "node:child_process";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import type { Figure } from "./figure.js";

const root = join(dirname(fileURLToPath(import.meta.url)), "../..");
const bin = join(root, "queue/cli/applygate.mjs");
const BOUND_MS = 30_000;

function timeOneStart(): Promise<number> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const env: NodeJS.ProcessEnv = { ...process.env, LOG_LEVEL: "warn" };
    if (process.env.TEST_REDIS_URL && !env.REDIS_URL) env.REDIS_URL = process.env.TEST_REDIS_URL;
    const child = spawn(process.execPath, [bin, "playground"], {
      cwd: root,
      env,
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    let ready: number | undefined;
    child.stdout.on("data", (c) => {
      out += c;
      if (ready === undefined && out.includes("Ctrl-C stops everything")) {
        ready = performance.now() - started;
        child.kill("SIGINT");
      }
    });
    child.stderr.on("data", (c) => (out += c));
    child.once("exit", () =>
      ready === undefined ? reject(new Error(`playground did not start:\n${out}`)) : resolve(ready),
    );
  });
}

export async function run(): Promise<Figure[]> {
  const times: number[] = [];
  for (let i = 0; i < 3; i++) times.push(await timeOneStart());
  times.sort((a, b) => a - b);
  const median = Math.round(times[1] as number);
  return [
    {
      bench: "playground.ready",
      value: median,
      unit: "ms",
      baseline: BOUND_MS,
      ratio: Number((median / BOUND_MS).toFixed(3)),
      note: `median of 3 starts to the ready screen (${times.map((t) => Math.round(t)).join(", ")} ms); baseline is the 30 s bound`,
    },
  ];
}
