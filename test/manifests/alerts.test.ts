import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import { METRIC_LABELS, METRIC_NAMES } from "../../queue/metric-names.js";
import { build, KUBECTL_AVAILABLE, OVERLAYS, REPO_ROOT } from "./kustomize.js";

interface Rule {
  alert: string;
  expr: string;
  for?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}

const rule = parse(readFileSync(resolve(REPO_ROOT, "manifests/monitoring/prometheus-rule.yaml"), "utf8"));
const alerts: Rule[] = rule.spec.groups.flatMap((g: { rules: Rule[] }) => g.rules);
const dashboard = JSON.parse(readFileSync(resolve(REPO_ROOT, "manifests/monitoring/dashboard.json"), "utf8"));
const dashboardExprs: string[] = dashboard.panels.flatMap((p: { targets?: { expr: string }[] }) =>
  (p.targets ?? []).map((t) => t.expr),
);
const operations = readFileSync(resolve(REPO_ROOT, "docs/operations.md"), "utf8");
const runbookBase = parse(readFileSync(resolve(REPO_ROOT, "manifests/monitoring/runbooks.yaml"), "utf8")).data
  .base as string;

/** Labels Prometheus (Operator) sets on every series at scrape: a metric label of the same name is renamed exported_<name>. */
const TARGET_LABELS = ["namespace", "pod", "container", "service", "endpoint", "job", "instance"];

/** The runbook section of one alert in docs/operations.md. */
function runbook(alert: string): string {
  const start = operations.indexOf(`### ${alert}\n`);
  const next = operations.indexOf("\n### ", start + 1);
  return operations.slice(start, next === -1 ? undefined : next);
}

// What each expression computes is Prometheus' own to judge: test/manifests/alert-rules.test.ts
// runs promtool over the rules and the dashboard's queries.
describe("PrometheusRule ↔ queue/metric-names.ts", () => {
  it("has the nine alerts the operators' runbook covers, and one for missing metrics", () => {
    expect(alerts.map((a) => a.alert).sort()).toEqual(
      [
        "ApplygateApplyWindowCollisions",
        "ApplygateBranchIntakePaused",
        "ApplygateClaimNotReady",
        "ApplygateJobStuck",
        "ApplygateJobWaitingTooLong",
        "ApplygateJobsFailing",
        "ApplygateMetricsMissing",
        "ApplygateOperationUnresolved",
        "ApplygatePublicationRetrying",
        "ApplygateSidecarNotReady",
      ].sort(),
    );
  });

  it.each(alerts)("$alert has a severity, a summary and a runbook section in docs/operations.md", (a) => {
    expect(["warning", "critical"]).toContain(a.labels?.severity);
    expect(a.annotations?.summary).toBeTruthy();
    const anchor = a.alert.toLowerCase();
    expect(a.annotations?.runbook_url).toBe(`${runbookBase}#${anchor}`);
    expect(operations).toMatch(new RegExp(`^### ${a.alert}$`, "m"));
  });

  it("links runbooks absolutely, from a base one ConfigMap sets for the whole rule", () => {
    expect(new URL(runbookBase).protocol).toBe("https:");
  });

  it.skipIf(!KUBECTL_AVAILABLE)("takes the runbook base from runbooks.yaml when built", () => {
    const built = build(OVERLAYS.monitoring);
    // The ConfigMap is local-config: it sets the links and is not applied.
    expect(built.filter((o) => o.metadata.name === "applygate-runbooks")).toEqual([]);
    const builtRule = built.find((o) => o.kind === "PrometheusRule") as unknown as {
      spec: { groups: { rules: Rule[] }[] };
    };
    const urls = builtRule.spec.groups.flatMap((g: { rules: Rule[] }) =>
      g.rules.map((r) => r.annotations?.runbook_url),
    );
    expect(urls.length).toBe(alerts.length);
    for (const url of urls)
      expect(url).toMatch(new RegExp(`^${runbookBase.replace(/[.]/g, "\\.")}#applygate`));
  });

  it("gives no metric a label Prometheus sets at scrape (it would be renamed exported_<label>)", () => {
    for (const [metric, labels] of Object.entries(METRIC_LABELS)) {
      for (const l of labels) expect(TARGET_LABELS, `${metric} label ${l}`).not.toContain(l);
    }
  });

  it("names the gateway, which exports the queue metrics, in the MetricsMissing runbook", () => {
    const text = runbook("ApplygateMetricsMissing");
    expect(text).toContain("applygate-gateway");
    expect(text).not.toContain("applygate-worker-metrics");
  });
});

describe("Grafana dashboard", () => {
  // Every gateway replica exports the same queue figures (read from Redis, or counted from the
  // same queue events): summing over replicas would double them.
  const perQueue = [
    METRIC_NAMES.queueJobs,
    METRIC_NAMES.queueOldestWaitingSeconds,
    METRIC_NAMES.queueStuckJobs,
    METRIC_NAMES.jobsFailedTotal,
  ];
  it.each(dashboardExprs.filter((e) => perQueue.some((m) => e.includes(m))))(
    "%s takes one replica's figure (max), never a sum over replicas",
    (expr) => {
      expect(expr).not.toMatch(/\b(sum|count)\b/);
      expect(expr).toMatch(/\bmax\b/);
    },
  );
});
