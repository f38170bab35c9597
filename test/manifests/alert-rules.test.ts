/**
 * The shipped alerts, evaluated by Prometheus' own engine: `promtool check rules` on the
 * PrometheusRule's groups, and `promtool test rules` with a unit test per alert. Each alert fires
 * on the series its runbook in docs/operations.md describes, with the labels and text an operator
 * reads, and fires neither on an idle cluster nor during a healthy long sync. The input series are
 * named by the constants the code registers its metrics with (queue/metric-names.ts), so a metric
 * renamed on one side only leaves its alert silent here and fails.
 */
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { stringify } from "yaml";
import { APPLIER_KINDS, attemptsQueue, QUEUES } from "../../queue/contract.js";
import {
  ALL_METRIC_NAMES,
  METRIC_NAMES as M,
  METRIC_LABELS,
  type MetricName,
} from "../../queue/metric-names.js";
import { REPO_ROOT } from "./kustomize.js";
import {
  type AlertRule,
  inTempDir,
  PROMTOOL_AVAILABLE,
  promtool,
  ruleFile,
  shippedRuleGroups,
} from "./promtool.js";

const groups = shippedRuleGroups();
const rules: AlertRule[] = groups.flatMap((g) => g.rules);
const runbook = (alert: string) => rules.find((r) => r.alert === alert)!.annotations!.runbook_url!;

interface Series {
  series: string;
  values: string;
}

/** Labels Prometheus (Operator) sets on every series at scrape. */
const TARGET_LABELS = ["namespace", "pod", "container", "service", "endpoint", "job", "instance"];

/**
 * One input series: a metric (by its constant), its labels (exactly those the code registers it
 * with, plus what a scrape adds), and promtool's expanding notation.
 */
function s(metric: MetricName, labels: Record<string, string>, values: string): Series {
  const own = Object.keys(labels).filter((l) => !TARGET_LABELS.includes(l));
  if (own.sort().join() !== [...METRIC_LABELS[metric]].sort().join())
    throw new Error(`${metric} carries ${METRIC_LABELS[metric].join(", ")}, not ${own.join(", ")}`);
  const l = Object.entries(labels)
    .map(([k, v]) => `${k}="${v}"`)
    .join(",");
  return { series: `${metric}{${l}}`, values };
}

const MINUTES = 120;
const flat = (v: number | string) => `${v}x${MINUTES}`;
const QUEUE_NAMES = [...Object.values(QUEUES), ...APPLIER_KINDS.map(attemptsQueue)];
const BRANCH = "git.example/team/app@main";
/** What Prometheus adds at scrape: the gateway's and the sidecars' series carry their pod. */
const gateway = (pod = "applygate-gateway-0") => ({ namespace: "applygate-system", pod });

/** A healthy cluster with nothing to do: every figure at rest, every claim and sidecar ready. */
function idle(): Series[] {
  return [
    ...QUEUE_NAMES.flatMap((queue) => [
      ...["waiting", "active", "delayed", "failed"].map((state) =>
        s(M.queueJobs, { ...gateway(), queue, state }, flat(0)),
      ),
      s(M.queueJobs, { ...gateway(), queue, state: "completed" }, `40+1x${MINUTES}`),
      s(M.queueOldestWaitingSeconds, { ...gateway(), queue }, flat(0)),
      s(M.queueStuckJobs, { ...gateway(), queue }, flat(0)),
      s(M.jobsFailedTotal, { ...gateway(), queue }, flat(0)),
    ]),
    s(M.branchIntakePaused, { branch: BRANCH }, flat(0)),
    s(M.branchRetryingSeconds, { branch: BRANCH }, flat(0)),
    ...APPLIER_KINDS.flatMap((kind) => [
      s(M.operationsUnresolved, { applier_kind: kind }, flat(0)),
      s(M.applyWindowCollisionsTotal, { applier_kind: kind }, flat(2)),
      s(M.sidecarReady, { applier_kind: kind, namespace: `${kind}-ns`, pod: `${kind}-0` }, flat(1)),
    ]),
    s(M.claimReady, { kind: "FluxClaim", claim_namespace: "team-a", name: "app" }, flat(1)),
    s(M.claimReady, { kind: "ArgoCDClaim", claim_namespace: "team-b", name: "app" }, flat(1)),
  ];
}

/** `base`, with each series in `changed` in place of the one of the same name and labels. */
function withSeries(base: Series[], ...changed: Series[]): Series[] {
  const names = new Set(changed.map((c) => c.series));
  return [...base.filter((b) => !names.has(b.series)), ...changed];
}

/**
 * A sync that takes an hour, followed all along by a live sidecar: its attempt job stays active
 * (its lock renewed, so never stuck), the operation is within its deadline, the branch waits.
 */
function longSync(): Series[] {
  return withSeries(
    idle(),
    s(M.queueJobs, { ...gateway(), queue: attemptsQueue("flux"), state: "active" }, flat(1)),
    s(M.queueJobs, { ...gateway(), queue: QUEUES.branches, state: "delayed" }, flat(1)),
  );
}

interface Expected {
  labels: Record<string, string>;
  summary: string;
  description: string;
}

interface Firing {
  /** What the runbook says happens. */
  name: string;
  series: Series[];
  /** Minutes after the start when the alert is evaluated. */
  at: number;
  alerts: Expected[];
}

/** Per alert: the series its runbook describes, and what the operator then reads. */
const FIRING: Record<string, Firing[]> = {
  ApplygateJobWaitingTooLong: [
    {
      name: "no worker takes jobs: the oldest waiting branch job ages",
      series: withSeries(
        idle(),
        s(M.queueOldestWaitingSeconds, { ...gateway(), queue: "branches" }, "0+60x20"),
      ),
      at: 10,
      alerts: [
        {
          labels: { severity: "warning", queue: "branches" },
          summary: "A job has waited more than 5 minutes in queue branches.",
          description:
            "The oldest waiting job in branches is 10m 0s old: no worker is taking jobs fast enough.",
        },
      ],
    },
  ],
  ApplygateJobStuck: [
    {
      name: "the flux sidecar died holding an attempt (both gateway replicas see it, counted once)",
      series: withSeries(
        idle(),
        s(M.queueStuckJobs, { ...gateway(), queue: attemptsQueue("flux") }, "0 0 1x20"),
        s(M.queueStuckJobs, { ...gateway("applygate-gateway-1"), queue: attemptsQueue("flux") }, "0 0 1x20"),
      ),
      at: 10,
      alerts: [
        {
          labels: { severity: "critical", queue: attemptsQueue("flux") },
          summary: "1 job(s) in queue attempts-flux are stuck.",
          description:
            "A job is active but nothing carries it on: the process that took it died, or it hangs past its deadline; its branch makes no progress.",
        },
      ],
    },
    {
      name: "a worker hangs on a branch job past --stuck-after",
      series: withSeries(idle(), s(M.queueStuckJobs, { ...gateway(), queue: "branches" }, "0 0 2x20")),
      at: 10,
      alerts: [
        {
          labels: { severity: "critical", queue: "branches" },
          summary: "2 job(s) in queue branches are stuck.",
          description:
            "A job is active but nothing carries it on: the process that took it died, or it hangs past its deadline; its branch makes no progress.",
        },
      ],
    },
  ],
  ApplygateJobsFailing: [
    {
      name: "reports keep failing, one a minute, for half an hour",
      series: withSeries(idle(), s(M.jobsFailedTotal, { ...gateway(), queue: "reports" }, "0+1x30")),
      at: 30,
      alerts: [
        {
          labels: { severity: "warning", queue: "reports" },
          summary: "Jobs in queue reports keep failing.",
          description:
            "15 job(s) failed in the last 15 minutes, and failures have not stopped for 15 minutes.",
        },
      ],
    },
  ],
  ApplygateMetricsMissing: [
    {
      name: "the gateway is not scraped: only the worker's and the sidecars' series arrive",
      series: idle().filter(
        (x) => !x.series.startsWith(`${M.queueJobs}{`) && !x.series.includes('namespace="applygate-system"'),
      ),
      at: 20,
      alerts: [
        {
          labels: { severity: "warning" },
          summary: "No applygate queue metrics are being scraped.",
          description:
            "Prometheus has no applygate_queue_jobs series: every other applygate alert is blind until this is fixed.",
        },
      ],
    },
  ],
  ApplygateBranchIntakePaused: [
    {
      name: "the branch retains too many unpublished writes",
      series: withSeries(idle(), s(M.branchIntakePaused, { branch: BRANCH }, "0 0 1x10")),
      at: 5,
      alerts: [
        {
          labels: { severity: "critical", branch: BRANCH },
          summary: `Branch ${BRANCH} refuses new writes.`,
          description: `Too many writes are retained unpublished on ${BRANCH}; API edits mirrored to it are refused until publication succeeds.`,
        },
      ],
    },
  ],
  ApplygatePublicationRetrying: [
    {
      name: "publication has been retrying for a quarter of an hour",
      series: withSeries(idle(), s(M.branchRetryingSeconds, { branch: BRANCH }, "0+60x20")),
      at: 15,
      alerts: [
        {
          labels: { severity: "warning", branch: BRANCH },
          summary: `Publication to branch ${BRANCH} has been retrying for more than 10 minutes.`,
          description: `Pending writes for ${BRANCH} are kept, but none has reached Git for 15m 0s.`,
        },
      ],
    },
  ],
  ApplygateOperationUnresolved: [
    {
      name: "an Argo CD operation's end is not observed within its deadline",
      series: withSeries(idle(), s(M.operationsUnresolved, { applier_kind: "argocd" }, "0 0 1x20")),
      at: 10,
      alerts: [
        {
          labels: { severity: "warning", applier_kind: "argocd" },
          summary: "1 argocd operation(s) are Unresolved.",
          description:
            "An apply's end has not been observed within its deadline; the sidecar keeps following it.",
        },
      ],
    },
  ],
  ApplygateClaimNotReady: [
    {
      name: "a FluxClaim does not hold its Kustomization",
      series: withSeries(
        idle(),
        s(M.claimReady, { kind: "FluxClaim", claim_namespace: "team-a", name: "app" }, "1 1 0x20"),
      ),
      at: 15,
      alerts: [
        {
          labels: { severity: "warning", kind: "FluxClaim", claim_namespace: "team-a", name: "app" },
          summary: "FluxClaim team-a/app is not Ready.",
          description: "The claim does not hold its applier; applies for its GitTargets cannot start.",
        },
      ],
    },
  ],
  ApplygateSidecarNotReady: [
    {
      name: "the flux sidecar's watches do not sync",
      series: withSeries(
        idle(),
        s(M.sidecarReady, { applier_kind: "flux", namespace: "flux-ns", pod: "flux-0" }, "1 1 0x20"),
      ),
      at: 15,
      alerts: [
        {
          labels: { severity: "warning", applier_kind: "flux", namespace: "flux-ns", pod: "flux-0" },
          summary: "The applygate sidecar in flux-ns/flux-0 is not ready.",
          description:
            "Redis does not answer or a watch of the sidecar does not sync; its applier keeps running, but no flux apply starts from this pod.",
        },
      ],
    },
  ],
  ApplygateApplyWindowCollisions: [
    {
      name: "Flux applies land over newer edits every five minutes",
      series: withSeries(idle(), s(M.applyWindowCollisionsTotal, { applier_kind: "flux" }, "0+0.2x60")),
      at: 45,
      alerts: [
        {
          labels: { severity: "warning", applier_kind: "flux" },
          summary: "flux applies keep landing over newer API edits.",
          description:
            "6 late applies over a newer edit were withheld in the last 30 minutes; each one was reverted on the cluster until its Repair applied the edit again.",
        },
      ],
    },
  ],
};

/** A promtool test file: one test per case, each naming the alert it evaluates. */
function testFile(
  alert: string,
  cases: { name: string; series: Series[]; at: number; alerts: Expected[] }[],
) {
  return stringify({
    rule_files: ["rules.yaml"],
    evaluation_interval: "1m",
    tests: cases.map((c) => ({
      name: `${alert}: ${c.name}`,
      interval: "1m",
      input_series: c.series,
      alert_rule_test: [
        {
          eval_time: `${c.at}m`,
          alertname: alert,
          exp_alerts: c.alerts.map((a) => ({
            exp_labels: a.labels,
            exp_annotations: { summary: a.summary, description: a.description, runbook_url: runbook(alert) },
          })),
        },
      ],
    })),
  });
}

/** Runs `promtool test rules` on the shipped rules with one alert's cases. */
async function unitTest(alert: string, cases: Parameters<typeof testFile>[1]) {
  return inTempDir({ "rules.yaml": ruleFile(groups), "tests.yaml": testFile(alert, cases) }, (dir) =>
    promtool(["test", "rules", "tests.yaml"], dir),
  );
}

describe("the alert rules' unit tests", () => {
  it("cover every alert the PrometheusRule ships, each with a case that fires", () => {
    expect(Object.keys(FIRING).sort()).toEqual(rules.map((r) => r.alert).sort());
    for (const cases of Object.values(FIRING)) expect(cases.length).toBeGreaterThan(0);
  });

  it("feed every metric the code registers for alerts to some alert that fires on it", () => {
    const fed = new Set(
      Object.values(FIRING).flatMap((cases) =>
        cases.flatMap((c) => {
          // The series that differ from the idle cluster's are what made it fire.
          const rest = new Set(idle().map((x) => `${x.series} ${x.values}`));
          return c.series
            .filter((x) => !rest.has(`${x.series} ${x.values}`))
            .map((x) => x.series.split("{")[0]);
        }),
      ),
    );
    fed.add(M.queueJobs); // ApplygateMetricsMissing fires on its absence
    expect([...fed].sort()).toEqual([...ALL_METRIC_NAMES].sort());
  });
});

const dashboard = JSON.parse(
  readFileSync(resolve(REPO_ROOT, "manifests/monitoring/dashboard.json"), "utf8"),
) as {
  panels: { title: string; targets?: { expr: string }[] }[];
};
const panels = dashboard.panels.flatMap((p) =>
  (p.targets ?? []).map((t) => ({ title: p.title, expr: t.expr })),
);

describe.skipIf(!PROMTOOL_AVAILABLE)("the alert rules, evaluated by promtool", () => {
  it("pass promtool check rules", async () => {
    const r = await inTempDir({ "rules.yaml": ruleFile(groups) }, (dir) =>
      promtool(["check", "rules", "rules.yaml"], dir),
    );
    expect(r.code, r.output).toBe(0);
    expect(r.output).toContain(`SUCCESS: ${rules.length} rules found`);
  });

  it("are refused by promtool check rules when an expression is broken (the check has teeth)", async () => {
    const broken = structuredClone(groups);
    broken[0]!.rules[0]!.expr = "max by (queue (applygate_queue_jobs)";
    const r = await inTempDir({ "rules.yaml": ruleFile(broken) }, (dir) =>
      promtool(["check", "rules", "rules.yaml"], dir),
    );
    expect(r.code).not.toBe(0);
  });

  it.each(Object.entries(FIRING))("%s fires on the series its runbook describes", async (alert, cases) => {
    const r = await unitTest(alert, cases);
    expect(r.code, r.output).toBe(0);
    expect(r.output).toContain("SUCCESS");
  });

  it.each(rules.map((r) => r.alert))(
    "%s fires neither on an idle cluster nor during a healthy hour-long sync",
    async (alert) => {
      const r = await unitTest(
        alert,
        [10, 30, 60, 119].flatMap((at) => [
          { name: `idle, at ${at}m`, series: idle(), at, alerts: [] },
          { name: `a healthy hour-long sync, at ${at}m`, series: longSync(), at, alerts: [] },
        ]),
      );
      expect(r.code, r.output).toBe(0);
    },
  );

  it("shows data in every panel of the Grafana dashboard on an idle cluster (an empty panel reads as broken)", async () => {
    // Each panel's query as an alert on its absence: promtool says which ones return nothing.
    const checks = panels.map((p, i) => ({ alert: `DashboardPanel${i}Empty`, expr: `absent(${p.expr})` }));
    const files = {
      "rules.yaml": ruleFile([{ name: "dashboard", rules: checks }]),
      "tests.yaml": stringify({
        rule_files: ["rules.yaml"],
        evaluation_interval: "1m",
        tests: [
          {
            name: "the dashboard on an idle cluster",
            interval: "1m",
            input_series: idle(),
            alert_rule_test: checks.map((c) => ({ eval_time: "90m", alertname: c.alert, exp_alerts: [] })),
          },
        ],
      }),
    };
    const r = await inTempDir(files, async (dir) => ({
      check: await promtool(["check", "rules", "rules.yaml"], dir),
      test: await promtool(["test", "rules", "tests.yaml"], dir),
    }));
    expect(r.check.code, r.check.output).toBe(0);
    const empty = panels.filter((_p, i) => r.test.output.includes(`alertname: DashboardPanel${i}Empty,`));
    expect(empty.map((p) => `${p.title}: ${p.expr}`)).toEqual([]);
    expect(r.test.code, r.test.output).toBe(0);
  });

  it("fails a unit test whose alert does not fire (the unit tests have teeth)", async () => {
    const [first] = FIRING.ApplygateJobStuck!;
    const r = await unitTest("ApplygateJobStuck", [{ ...first!, series: idle() }]);
    expect(r.code).not.toBe(0);
    expect(r.output).toContain("FAILED");
  });
});
