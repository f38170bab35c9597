/**
 * Every component's metrics are scraped: for each container of ours in the built overlays, the
 * port its process serves /metrics on (its --metrics-port, from the container's own args and env
 * as the process reads them) is declared by the container and scraped by a ServiceMonitor or
 * PodMonitor of manifests/monitoring. And no monitor endpoint scrapes nothing.
 */
import { describe, expect, it } from "vitest";
import { gatewaySettings } from "../../gateway/main.js";
import { loadConfig, type Settings } from "../../queue/config.js";
import { workerSettings } from "../../queue/worker-main.js";
import { sidecarSettings } from "../../sidecar/main.js";
import { mirrorSettings } from "../../sidecar/mirror/main.js";
import { build, type K8sObject, KUBECTL_AVAILABLE, OVERLAYS } from "./kustomize.js";
import { scrapeTargets, selects } from "./monitors.js";
import { type ContainerSpec, containerEnv, containersOf } from "./pod-env.js";

const SETTINGS: Record<string, Settings> = {
  gateway: gatewaySettings,
  worker: workerSettings,
  sidecar: sidecarSettings,
  mirror: mirrorSettings,
};

/** The port a container's process serves /metrics on, read from its args and env as the process reads them. */
function metricsPortOf(object: K8sObject, c: ContainerSpec): number {
  const [command, ...argv] = c.args ?? [];
  const settings = SETTINGS[command ?? ""];
  if (!settings) throw new Error(`${c.name}: no settings for command ${command}`);
  const namespace = object.metadata.namespace ?? "default";
  const env = containerEnv(c, {
    podName: `${object.metadata.name}-0`,
    namespace,
    // Only what a container cannot start without; the optional ones (dashboard) stay unset.
    secrets: { [`${namespace}/applygate-redis`]: { url: "redis://127.0.0.1:6379" } },
  });
  const { config } = loadConfig(settings, argv, env);
  return (config as { metricsPort: number }).metricsPort;
}

describe("label selectors as the operator reads them", () => {
  it("matches labels and every expression operator", () => {
    const labels = { a: "1", b: "2" };
    expect(selects({ matchLabels: { a: "1" } }, labels)).toBe(true);
    expect(selects({ matchLabels: { a: "2" } }, labels)).toBe(false);
    expect(selects({ matchExpressions: [{ key: "b", operator: "In", values: ["2", "3"] }] }, labels)).toBe(
      true,
    );
    expect(selects({ matchExpressions: [{ key: "b", operator: "NotIn", values: ["2"] }] }, labels)).toBe(
      false,
    );
    expect(selects({ matchExpressions: [{ key: "c", operator: "NotIn", values: ["2"] }] }, labels)).toBe(
      true,
    );
    expect(selects({ matchExpressions: [{ key: "a", operator: "Exists" }] }, labels)).toBe(true);
    expect(selects({ matchExpressions: [{ key: "a", operator: "DoesNotExist" }] }, labels)).toBe(false);
    expect(selects({}, labels)).toBe(true);
    expect(selects(undefined, labels)).toBe(false);
  });
});

describe.skipIf(!KUBECTL_AVAILABLE)("metrics ports and monitors", () => {
  const overlays = ["base", "flux", "argocd", "webhook"] as const;
  const workloads = overlays.flatMap((overlay) => build(OVERLAYS[overlay]));
  const monitors = build(OVERLAYS.monitoring);
  const targets = scrapeTargets([...workloads, ...monitors]);
  const ours = workloads
    .filter((o) => o.kind === "Deployment" || o.kind === "StatefulSet")
    .flatMap((object) =>
      containersOf(object)
        .filter((c) => c.image.startsWith("ghcr.io/applygate/"))
        .map((container) => ({ object, container })),
    );

  it("finds every component of ours", () => {
    expect(
      ours.map((w) => `${w.object.metadata.namespace}/${w.object.metadata.name}/${w.container.name}`).sort(),
    ).toEqual(
      [
        "applygate-system/applygate-gateway/gateway",
        "applygate-system/applygate-mirror/mirror",
        "applygate-system/applygate-webhook/webhook",
        "applygate-system/applygate-worker/worker",
        "argocd/argocd-application-controller/applygate-sidecar",
        "flux-system/kustomize-controller/applygate-sidecar",
      ].sort(),
    );
  });

  it.each(ours.map((w) => [`${w.object.metadata.name}/${w.container.name}`, w] as const))(
    "%s declares its metrics port, and a monitor scrapes /metrics there",
    (_label, { object, container }) => {
      const port = metricsPortOf(object, container);
      const declared = (container.ports ?? []).find((p) => p.containerPort === port);
      expect(declared, `container port ${port}`).toBeDefined();
      const scraping = targets.filter(
        (t) => t.pods.workload === object && t.container === container.name && t.port.containerPort === port,
      );
      expect(
        scraping.map((t) => `${t.kind} ${t.monitor}`),
        `${object.metadata.namespace}/${object.metadata.name} port ${declared?.name ?? port}`,
      ).not.toEqual([]);
      for (const t of scraping) expect(t.endpoint.path).toBe("/metrics");
    },
  );

  it("scrapes nothing but those metrics ports, and every monitor endpoint scrapes something", () => {
    const metricsPorts = new Set(
      ours.map(
        (w) =>
          `${w.object.metadata.namespace}/${w.object.metadata.name}/${w.container.name}:${metricsPortOf(w.object, w.container)}`,
      ),
    );
    for (const t of targets)
      expect(metricsPorts).toContain(
        `${t.pods.namespace}/${t.pods.workload.metadata.name}/${t.container}:${t.port.containerPort}`,
      );
    for (const m of monitors.filter((o) => o.kind === "ServiceMonitor" || o.kind === "PodMonitor")) {
      const spec = m.spec as { endpoints?: unknown[]; podMetricsEndpoints?: unknown[] };
      const endpoints = spec.endpoints ?? spec.podMetricsEndpoints ?? [];
      for (let i = 0; i < endpoints.length; i++)
        expect(
          targets.some((t) => t.monitor === m.metadata.name && t.endpointIndex === i),
          `${m.kind} ${m.metadata.name} endpoint ${i}`,
        ).toBe(true);
    }
  });
});
