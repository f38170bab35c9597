/**
 * Prometheus' own tools over the shipped alerts: the PrometheusRule's groups as a plain rule file
 * (what the Prometheus Operator hands Prometheus), and `promtool` (Debian's `prometheus` package)
 * to check and unit-test it. Where promtool is missing the tests that need it are skipped with a
 * notice naming the package.
 */
import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { parse, stringify } from "yaml";
import { REPO_ROOT } from "./kustomize.js";

export interface AlertRule {
  alert: string;
  expr: string;
  for?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}

export interface RuleGroup {
  name: string;
  interval?: string;
  rules: AlertRule[];
}

/** The groups of manifests/monitoring/prometheus-rule.yaml, as shipped. */
export function shippedRuleGroups(): RuleGroup[] {
  const text = readFileSync(resolve(REPO_ROOT, "manifests/monitoring/prometheus-rule.yaml"), "utf8");
  return (parse(text) as { spec: { groups: RuleGroup[] } }).spec.groups;
}

/** A rule file Prometheus loads: `groups:` as the operator writes them from a PrometheusRule. */
export function ruleFile(groups: RuleGroup[]): string {
  return stringify({ groups });
}

function which(cmd: string): Promise<boolean> {
  return new Promise((done) => execFile(cmd, ["--version"], (err) => done(!err)));
}

export const PROMTOOL_AVAILABLE = await which("promtool");
export const PROMETHEUS_AVAILABLE = await which("prometheus");
if (!PROMTOOL_AVAILABLE || !PROMETHEUS_AVAILABLE)
  console.warn(
    `NOTICE: ${[!PROMTOOL_AVAILABLE && "promtool", !PROMETHEUS_AVAILABLE && "prometheus"].filter(Boolean).join(" and ")} not found on PATH: the alert rules' unit tests and the real-Prometheus scenario are SKIPPED. Install Debian's package: apt-get install --no-install-recommends prometheus`,
  );

export interface ToolRun {
  code: number;
  output: string;
}

export function promtool(args: string[], cwd: string): Promise<ToolRun> {
  return new Promise((done) =>
    execFile("promtool", args, { cwd, timeout: 60_000 }, (err, stdout, stderr) =>
      done({ code: err ? Number((err as { code?: number }).code ?? 1) : 0, output: `${stdout}${stderr}` }),
    ),
  );
}

/** Writes `files` into a fresh directory, runs `fn` there, and removes it. */
export async function inTempDir<T>(
  files: Record<string, string>,
  fn: (dir: string) => Promise<T>,
): Promise<T> {
  const dir = await mkdtemp(join(tmpdir(), "applygate-promtool-"));
  try {
    for (const [name, text] of Object.entries(files)) await writeFile(join(dir, name), text);
    return await fn(dir);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
