/**
 * The shipped alerts in a real Prometheus (Debian's `prometheus` server). It scrapes the
 * playground's gateway, worker and sidecars as the ServiceMonitor and PodMonitors of
 * manifests/monitoring say — one scrape job per monitor endpoint, its path and the labels the
 * Prometheus Operator gives each target — and evaluates the PrometheusRule's groups.
 *
 * A Flux sidecar in a process of its own takes an attempt and follows a long sync: the attempt
 * job is active, and nothing alerts. Then the process is killed mid-operation: the job's lock
 * runs out, ApplygateJobStuck fires in Prometheus' own /api/v1/alerts, and once a sidecar runs
 * again and the operation ends, it resolves. Every query of the Grafana dashboard returns data.
 *
 * Compressed for a test: scrapes and rule evaluations every second (the monitors say 30 s), and
 * ApplygateJobStuck's `for:` is 5 s instead of 5 m, in the rule file this test renders; every
 * expression is the shipped one.
 */
import type { ChildProcess } from "node:child_process";
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { attemptsQueue } from "../../queue/contract.js";
import { ATTEMPT_LOCK_MS } from "../../sidecar/executor.js";
import { build, KUBECTL_AVAILABLE, OVERLAYS, REPO_ROOT } from "../manifests/kustomize.js";
import { scrapeTargets, type Target } from "../manifests/monitors.js";
import { PROMETHEUS_AVAILABLE, ruleFile, shippedRuleGroups } from "../manifests/promtool.js";
import { foreignPush, readClaim, until } from "../playground/actors.js";
import { type Prometheus, startPrometheus, type TargetGroup } from "../support/prometheus.js";
import { type Scene, startScene, unique } from "./harness.js";
import { fluxSidecarProcess } from "./sidecar-process.js";

const STUCK_FOR = "5s";
const STUCK_FOR_MS = 5_000;
const SCRAPE = "1s";

if (!KUBECTL_AVAILABLE) console.warn("NOTICE: kubectl not found: the real-Prometheus scenario is SKIPPED");

/** Which playground component runs each workload of the manifests. */
const COMPONENT_OF: Record<string, "gateway" | "worker" | "flux" | "argocd" | "webhook" | "mirror"> = {
  "applygate-system/applygate-gateway": "gateway",
  "applygate-system/applygate-worker": "worker",
  "flux-system/kustomize-controller": "flux",
  "argocd/argocd-application-controller": "argocd",
  "applygate-system/applygate-webhook": "webhook",
  "applygate-system/applygate-mirror": "mirror",
};

/** The scrape job the operator makes of one monitor endpoint. */
interface Job {
  name: string;
  targets: Target[];
}

function jobsOf(targets: Target[]): Job[] {
  const jobs = new Map<string, Target[]>();
  for (const t of targets) {
    const kind = t.kind === "ServiceMonitor" ? "serviceMonitor" : "podMonitor";
    const name = `${kind}/${t.monitorNamespace}/${t.monitor}/${t.endpointIndex}`;
    jobs.set(name, [...(jobs.get(name) ?? []), t]);
  }
  return [...jobs].map(([name, ts]) => ({ name, targets: ts }));
}

/** The target labels the operator's relabelling gives a pod's port. */
function labelsOf(t: Target): Record<string, string> {
  const workload = t.pods.workload.metadata.name;
  return {
    namespace: t.pods.namespace,
    pod: `${workload}-0`,
    container: t.container,
    endpoint: t.port.name ?? String(t.port.containerPort),
    // A ServiceMonitor's job is the Service's name, a PodMonitor's `<its namespace>/<its name>`.
    job: t.kind === "ServiceMonitor" ? `${workload}-metrics` : `${t.monitorNamespace}/${t.monitor}`,
  };
}

describe.skipIf(!PROMETHEUS_AVAILABLE || !KUBECTL_AVAILABLE)("the alerts in a real Prometheus", () => {
  let s: Scene;
  let prom: Prometheus;
  let child: ChildProcess | undefined;
  let jobs: Job[];
  /** Each job's targets, from the playground's addresses now (a restarted sidecar moves). */
  let refreshTargets: (flux?: string) => Promise<void>;

  beforeAll(async () => {
    // Built before anything runs: `kubectl kustomize` blocks this process.
    const objects = [
      ...(["base", "flux", "argocd", "webhook", "monitoring"] as const).flatMap((o) => build(OVERLAYS[o])),
    ];
    jobs = jobsOf(scrapeTargets(objects));
    s = await startScene();
    const groups = shippedRuleGroups().map((g) => ({
      ...g,
      rules: g.rules.map((r) => (r.alert === "ApplygateJobStuck" ? { ...r, for: STUCK_FOR } : r)),
    }));
    prom = await startPrometheus({
      evaluationInterval: SCRAPE,
      rules: ruleFile(groups),
      jobs: jobs.map((j) => {
        const e = j.targets[0]!.endpoint;
        return {
          name: j.name,
          metricsPath: e.path,
          scrapeInterval: SCRAPE,
          ...(e.scheme ? { scheme: e.scheme } : {}),
          ...(e.honorLabels !== undefined ? { honorLabels: e.honorLabels } : {}),
        };
      }),
    });
    refreshTargets = async (flux?: string) => {
      const addresses: Record<string, string | undefined> = {
        ...s.a.metricsAddresses(),
        ...(flux ? { flux } : {}),
      };
      for (const j of jobs) {
        const groups: TargetGroup[] = j.targets.flatMap((t) => {
          const address = addresses[COMPONENT_OF[`${t.pods.namespace}/${t.pods.workload.metadata.name}`]!];
          return address ? [{ targets: [address], labels: labelsOf(t) }] : [];
        });
        await prom.setTargets(j.name, groups);
      }
    };
    await refreshTargets();
  }, 180_000);

  afterAll(async () => {
    if (child && child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
    await prom?.stop();
    await s?.stop();
  });

  it("scrapes every component the monitors name, raises ApplygateJobStuck for an attempt whose sidecar died, and resolves it", {
    timeout: 240_000,
  }, async () => {
    // The playground runs its own Flux sidecar in-process; this one runs in a process to kill.
    await s.a.stopSidecar("flux");
    const sidecar = await fluxSidecarProcess(s, { serveMetrics: true });
    child = sidecar.child;
    await refreshTargets(`127.0.0.1:${sidecar.port}`);

    // Every job scrapes what the monitors select and the playground runs (the mirror does not run here).
    const scraped = ["gateway", "worker", "flux", "argocd", "webhook"];
    await until(
      async () => {
        const up = (await prom.targets()).filter((t) => t.health === "up");
        return scraped.every((c) =>
          up.some((t) => COMPONENT_OF[`${t.labels.namespace}/${t.labels.pod?.replace(/-0$/, "")}`] === c),
        );
      },
      "Prometheus to scrape the gateway, the worker and the three sidecars",
      60_000,
      200,
    );
    // The process's own target (the in-process sidecar's went when it stopped), as the operator labels it.
    const sidecarUp = await until(
      async () => {
        const r = await prom.query(`up{instance="127.0.0.1:${sidecar.port}"}`);
        return r[0]?.value[1] === "1" && r;
      },
      "Prometheus to scrape the sidecar process",
      60_000,
      200,
    );
    expect(
      sidecarUp.map((r) => [r.metric.namespace, r.metric.container, r.metric.job, r.metric.endpoint]),
    ).toEqual([["flux-system", "applygate-sidecar", "applygate-system/applygate-sidecar", "applygate-http"]]);

    // A long sync followed by a live sidecar: the attempt is active, its lock held, nothing alerts.
    s.a.flux.knobs.buildMs = 8_000;
    const attempts = attemptsQueue("flux");
    const commit = await foreignPush(s.a, "flux", `stalled-${unique()}`);
    await until(
      async () =>
        (await prom.query(`max by (queue) (applygate_queue_jobs{queue="${attempts}",state="active"})`))[0]
          ?.value[1] === "1",
      "Prometheus to see the attempt active",
      60_000,
      200,
    );
    // Two more scrapes and evaluations while the sync goes on.
    await new Promise((r) => setTimeout(r, 2_500)); // a sampling interval: nothing may happen meanwhile
    expect(
      (await prom.query(`applygate_queue_stuck_jobs{queue="${attempts}"}`)).map((r) => r.value[1]),
    ).toEqual(["0"]);
    expect((await prom.alerts()).filter((a) => a.labels.alertname === "ApplygateJobStuck")).toEqual([]);

    // The sidecar dies in the middle of the operation.
    const op = (await readClaim(s.a, "flux"))?.status?.operation as { token: string; commit: string };
    expect(op.commit).toBe(commit);
    child.kill("SIGKILL");
    await new Promise<void>((r) =>
      child!.exitCode !== null || child!.signalCode !== null ? r() : child!.once("exit", () => r()),
    );
    const killedAt = Date.now();

    const firing = await until(
      async () =>
        (await prom.alerts()).find(
          (a) =>
            a.labels.alertname === "ApplygateJobStuck" && a.labels.queue === attempts && a.state === "firing",
        ),
      "ApplygateJobStuck to fire in Prometheus",
      120_000,
      200,
    );
    const firedAfter = Date.now() - killedAt;
    expect(firing.labels.severity).toBe("critical");
    expect(firing.annotations.summary).toBe("1 job(s) in queue attempts-flux are stuck.");
    // The lock runs out, a scrape and an evaluation see it, and the alert is pending for its `for:`.
    expect(Date.now() - Date.parse(firing.activeAt)).toBeGreaterThanOrEqual(STUCK_FOR_MS - 1_000);
    expect(firedAfter).toBeLessThan(ATTEMPT_LOCK_MS + STUCK_FOR_MS + 20_000);

    // A sidecar runs again: it finds the attempt stalled, follows the operation to its end, and
    // the alert resolves.
    s.a.flux.knobs.buildMs = 0;
    await s.a.startSidecar("flux");
    await refreshTargets();
    await until(
      async () => {
        const now = (await readClaim(s.a, "flux"))?.status?.operation as { token?: string; phase?: string };
        return now?.token === op.token && now.phase === "Succeeded";
      },
      "the operation to end Succeeded",
      60_000,
      100,
    );
    await until(
      async () => !(await prom.alerts()).some((a) => a.labels.alertname === "ApplygateJobStuck"),
      "ApplygateJobStuck to resolve",
      60_000,
      200,
    );
    expect(
      (await prom.query(`applygate_queue_stuck_jobs{queue="${attempts}"}`)).map((r) => r.value[1]),
    ).toEqual(["0"]);
  });

  it("answers every query of the Grafana dashboard with data", async () => {
    const dashboard = JSON.parse(
      readFileSync(resolve(REPO_ROOT, "manifests/monitoring/dashboard.json"), "utf8"),
    ) as {
      panels: { title: string; targets?: { expr: string }[] }[];
    };
    const panels = dashboard.panels.flatMap((p) =>
      (p.targets ?? []).map((t) => ({ title: p.title, expr: t.expr })),
    );
    expect(panels.length).toBeGreaterThan(0);
    // Rates need two samples in their window: wait until every panel answers, naming the empty ones.
    let empty: string[] = [];
    await until(
      async () => {
        empty = [];
        for (const p of panels)
          if ((await prom.query(p.expr)).length === 0) empty.push(`${p.title}: ${p.expr}`);
        return empty.length === 0;
      },
      "every dashboard query to return data",
      30_000,
      500,
    ).catch(() => undefined);
    expect(empty).toEqual([]);
  });
});
