/**
 * Which container ports the Prometheus Operator's ServiceMonitors and PodMonitors scrape, read
 * the way the operator reads them: a ServiceMonitor selects Services (in its namespaceSelector's
 * namespaces, its own by default) and scrapes, on each pod a selected Service's selector picks,
 * the port that the endpoint's Service port targets; a PodMonitor selects pods and scrapes the
 * container port its endpoint names. Pure, over built manifests.
 */
import type { K8sObject } from "./kustomize.js";

export interface LabelSelector {
  matchLabels?: Record<string, string>;
  matchExpressions?: {
    key: string;
    operator: "In" | "NotIn" | "Exists" | "DoesNotExist";
    values?: string[];
  }[];
}

/** A Kubernetes label selector; an empty one selects everything, as the API defines it. */
export function selects(sel: LabelSelector | undefined, labels: Record<string, string> = {}): boolean {
  if (!sel) return false;
  for (const [k, v] of Object.entries(sel.matchLabels ?? {})) if (labels[k] !== v) return false;
  for (const e of sel.matchExpressions ?? []) {
    const has = Object.hasOwn(labels, e.key);
    const inValues = has && (e.values ?? []).includes(labels[e.key]!);
    const ok =
      e.operator === "In"
        ? inValues
        : e.operator === "NotIn"
          ? !inValues
          : e.operator === "Exists"
            ? has
            : !has;
    if (!ok) return false;
  }
  return true;
}

interface NamespaceSelector {
  any?: boolean;
  matchNames?: string[];
}

/** The operator's rule: `any`, the names listed, or else the monitor's own namespace. */
function inNamespaces(
  sel: NamespaceSelector | undefined,
  monitorNamespace: string,
  namespace: string,
): boolean {
  if (sel?.any) return true;
  if (sel?.matchNames?.length) return sel.matchNames.includes(namespace);
  return namespace === monitorNamespace;
}

export interface ContainerPort {
  name?: string;
  containerPort: number;
  protocol?: string;
}

interface PodTemplate {
  metadata?: { labels?: Record<string, string> };
  spec: { containers: { name: string; image: string; ports?: ContainerPort[] }[] };
}

/** A workload's pods as a monitor sees them: namespace, labels, containers and their ports. */
export interface Pods {
  workload: K8sObject;
  namespace: string;
  labels: Record<string, string>;
  containers: { name: string; image: string; ports: ContainerPort[] }[];
}

export function podsOf(objects: K8sObject[]): Pods[] {
  return objects
    .filter((o) => o.kind === "Deployment" || o.kind === "StatefulSet" || o.kind === "DaemonSet")
    .map((o) => {
      const template = (o.spec as { template: PodTemplate }).template;
      return {
        workload: o,
        namespace: o.metadata.namespace ?? "default",
        labels: template.metadata?.labels ?? {},
        containers: template.spec.containers.map((c) => ({
          name: c.name,
          image: c.image,
          ports: c.ports ?? [],
        })),
      };
    });
}

/** Settings of one scrape endpoint that a scrape config needs. */
export interface Endpoint {
  path: string;
  interval?: string;
  scrapeTimeout?: string;
  scheme?: string;
  honorLabels?: boolean;
}

/** One port a monitor scrapes. */
export interface Target {
  monitor: string;
  monitorNamespace: string;
  kind: "ServiceMonitor" | "PodMonitor";
  pods: Pods;
  container: string;
  port: ContainerPort;
  endpoint: Endpoint;
  /** Which of the monitor's endpoints this is. */
  endpointIndex: number;
}

interface ServicePort {
  name?: string;
  port: number;
  targetPort?: number | string;
}

interface MonitorEndpoint extends Endpoint {
  port?: string;
  targetPort?: number | string;
  portNumber?: number;
}

/** The container port a Service port, or a monitor's port reference, lands on in a pod. */
function containerPortFor(pods: Pods, ref: number | string): { container: string; port: ContainerPort }[] {
  const out: { container: string; port: ContainerPort }[] = [];
  for (const c of pods.containers)
    for (const p of c.ports)
      if (typeof ref === "number" ? p.containerPort === ref : p.name === ref)
        out.push({ container: c.name, port: p });
  return out;
}

/** Every port any ServiceMonitor or PodMonitor in `objects` scrapes on the workloads in `objects`. */
export function scrapeTargets(objects: K8sObject[]): Target[] {
  const pods = podsOf(objects);
  const services = objects.filter((o) => o.kind === "Service");
  const targets: Target[] = [];
  const endpointOf = (e: MonitorEndpoint): Endpoint => ({
    path: e.path ?? "/metrics",
    ...(e.interval ? { interval: e.interval } : {}),
    ...(e.scrapeTimeout ? { scrapeTimeout: e.scrapeTimeout } : {}),
    ...(e.scheme ? { scheme: e.scheme } : {}),
    ...(e.honorLabels !== undefined ? { honorLabels: e.honorLabels } : {}),
  });

  for (const m of objects.filter((o) => o.kind === "ServiceMonitor")) {
    const spec = m.spec as {
      selector: LabelSelector;
      namespaceSelector?: NamespaceSelector;
      endpoints: MonitorEndpoint[];
    };
    const ns = m.metadata.namespace ?? "default";
    for (const svc of services) {
      const svcNs = svc.metadata.namespace ?? "default";
      if (!inNamespaces(spec.namespaceSelector, ns, svcNs) || !selects(spec.selector, svc.metadata.labels))
        continue;
      const svcSpec = svc.spec as { selector?: Record<string, string>; ports: ServicePort[] };
      if (!svcSpec.selector) continue;
      for (const [endpointIndex, e] of spec.endpoints.entries()) {
        const svcPorts = svcSpec.ports.filter((p) => (e.port !== undefined ? p.name === e.port : true));
        for (const sp of svcPorts) {
          const ref =
            e.port === undefined && e.targetPort !== undefined ? e.targetPort : (sp.targetPort ?? sp.port);
          for (const p of pods) {
            if (p.namespace !== svcNs || !selects({ matchLabels: svcSpec.selector }, p.labels)) continue;
            for (const hit of containerPortFor(p, ref))
              targets.push({
                monitor: m.metadata.name,
                monitorNamespace: ns,
                kind: "ServiceMonitor",
                pods: p,
                ...hit,
                endpoint: endpointOf(e),
                endpointIndex,
              });
          }
        }
      }
    }
  }

  for (const m of objects.filter((o) => o.kind === "PodMonitor")) {
    const spec = m.spec as {
      selector: LabelSelector;
      namespaceSelector?: NamespaceSelector;
      podMetricsEndpoints: MonitorEndpoint[];
    };
    const ns = m.metadata.namespace ?? "default";
    for (const p of pods) {
      if (!inNamespaces(spec.namespaceSelector, ns, p.namespace) || !selects(spec.selector, p.labels))
        continue;
      for (const [endpointIndex, e] of spec.podMetricsEndpoints.entries()) {
        const ref = e.port ?? e.portNumber ?? e.targetPort;
        if (ref === undefined) continue;
        for (const hit of containerPortFor(p, ref))
          targets.push({
            monitor: m.metadata.name,
            monitorNamespace: ns,
            kind: "PodMonitor",
            pods: p,
            ...hit,
            endpoint: endpointOf(e),
            endpointIndex,
          });
      }
    }
  }
  return targets;
}
