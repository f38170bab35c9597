import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import { ALL_METRIC_NAMES, METRIC_LABELS, type MetricName } from "../../queue/metric-names.js";
import { REPO_ROOT } from "./kustomize.js";
import { readExpr } from "./promql.js";

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

describe("reading PromQL", () => {
  it("finds metric names and grouping labels, not functions, keywords, labels or ranges", () => {
    expect(
      readExpr('sum by (queue) (increase(a_total{state="x",b=~"y"}[15m])) > 0 and on(queue) b_gauge'),
    ).toEqual({
      metrics: ["a_total", "b_gauge"],
      groupingLabels: ["queue", "queue"],
    });
    expect(readExpr("absent(up) or vector(0)").metrics).toEqual(["up"]);
  });
});

describe("PrometheusRule ↔ queue/metric-names.ts", () => {
  const expressions = [
    ...alerts.map((a) => ({ where: `alert ${a.alert}`, expr: a.expr })),
    ...dashboardExprs.map((expr, i) => ({ where: `dashboard target ${i}`, expr })),
  ];

  it("has the eight alerts the operators' runbook covers, and one for missing metrics", () => {
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
      ].sort(),
    );
  });

  it.each(expressions)(
    "$where names only metrics the code registers, grouped by their own labels",
    ({ expr }) => {
      const use = readExpr(expr);
      expect(use.metrics.length).toBeGreaterThan(0);
      for (const m of use.metrics) expect(ALL_METRIC_NAMES).toContain(m);
      const labels = new Set(use.metrics.flatMap((m) => METRIC_LABELS[m as MetricName] ?? []));
      for (const l of use.groupingLabels) expect([...labels]).toContain(l);
    },
  );

  it("watches every metric in METRIC_NAMES with at least one alert", () => {
    const watched = new Set(alerts.flatMap((a) => readExpr(a.expr).metrics));
    for (const name of ALL_METRIC_NAMES) expect([...watched], name).toContain(name);
  });

  it.each(alerts)("$alert has a severity, a summary and a runbook section in docs/operations.md", (a) => {
    expect(["warning", "critical"]).toContain(a.labels?.severity);
    expect(a.annotations?.summary).toBeTruthy();
    const anchor = a.alert.toLowerCase();
    expect(a.annotations?.runbook_url).toBe(`docs/operations.md#${anchor}`);
    expect(operations).toMatch(new RegExp(`^### ${a.alert}$`, "m"));
  });
});
