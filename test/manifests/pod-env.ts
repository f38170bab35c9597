/**
 * What the kubelet gives a container, read from a built manifest: its args and its environment
 * with `value`, `secretKeyRef` and `fieldRef` resolved the way a pod start resolves them (a
 * missing Secret key fails the start unless the reference is optional). Pure.
 */
import { readFile, writeFile } from "node:fs/promises";
import { parse, stringify } from "yaml";
import type { ApiServer } from "../cluster/apiserver/index.js";
import type { K8sObject } from "./kustomize.js";

export interface ContainerSpec {
  name: string;
  image: string;
  args?: string[];
  command?: string[];
  ports?: { name?: string; containerPort: number; protocol?: string }[];
  env?: EnvVar[];
  envFrom?: unknown[];
  startupProbe?: Probe;
  livenessProbe?: Probe;
  readinessProbe?: Probe;
}

interface EnvVar {
  name: string;
  value?: string;
  valueFrom?: {
    secretKeyRef?: { name: string; key: string; optional?: boolean };
    configMapKeyRef?: { name: string; key: string; optional?: boolean };
    fieldRef?: { fieldPath: string };
  };
}

export interface Probe {
  httpGet?: { path: string; port: number | string };
}

export interface PodFacts {
  /** metadata.name of the pod the kubelet would run. */
  podName: string;
  namespace: string;
  /** Secret data by `namespace/name`, then key. */
  secrets: Record<string, Record<string, string>>;
}

export class PodStartError extends Error {}

/** The container's environment as the kubelet sets it; throws PodStartError where a pod would not start. */
export function containerEnv(c: ContainerSpec, pod: PodFacts): Record<string, string> {
  if (c.envFrom?.length) throw new PodStartError(`${c.name}: envFrom is not resolved by this test`);
  const out: Record<string, string> = {};
  for (const e of c.env ?? []) {
    if (e.value !== undefined) out[e.name] = e.value;
    else if (e.valueFrom?.secretKeyRef) {
      const ref = e.valueFrom.secretKeyRef;
      const value = pod.secrets[`${pod.namespace}/${ref.name}`]?.[ref.key];
      if (value !== undefined) out[e.name] = value;
      else if (!ref.optional)
        throw new PodStartError(
          `${c.name}: env ${e.name} needs key ${ref.key} of Secret ${pod.namespace}/${ref.name}`,
        );
    } else if (e.valueFrom?.fieldRef) {
      const path = e.valueFrom.fieldRef.fieldPath;
      if (path === "metadata.name") out[e.name] = pod.podName;
      else if (path === "metadata.namespace") out[e.name] = pod.namespace;
      else throw new PodStartError(`${c.name}: env ${e.name}: fieldRef ${path} is not resolved by this test`);
    } else {
      throw new PodStartError(`${c.name}: env ${e.name} has a source this test does not resolve`);
    }
  }
  return out;
}

/** The container port a probe's `port` (a name or a number) means. */
export function probePort(c: ContainerSpec, port: number | string): number {
  if (typeof port === "number") return port;
  const p = c.ports?.find((x) => x.name === port);
  if (!p) throw new Error(`${c.name}: probe names port "${port}", which the container does not declare`);
  return p.containerPort;
}

/** The httpGet probes of a container, by kind. */
export function httpProbes(c: ContainerSpec): { kind: string; path: string; port: number }[] {
  const out: { kind: string; path: string; port: number }[] = [];
  for (const kind of ["startupProbe", "livenessProbe", "readinessProbe"] as const) {
    const get = c[kind]?.httpGet;
    if (get) out.push({ kind, path: get.path, port: probePort(c, get.port) });
  }
  return out;
}

/** The containers of a Deployment or StatefulSet. */
export function containersOf(o: K8sObject): ContainerSpec[] {
  return (o as unknown as { spec: { template: { spec: { containers: ContainerSpec[] } } } }).spec.template
    .spec.containers;
}

/**
 * The simulated API server's kubeconfig for a process of ours (it stands in for the in-cluster
 * ServiceAccount): client-node 1.4 refuses a plain-http server unless the cluster entry says
 * insecure-skip-tls-verify, which kubectl's file leaves out.
 */
export async function writeProcessKubeconfig(api: ApiServer, path: string, user?: string): Promise<void> {
  await api.writeKubeconfig(path, user);
  const config = parse(await readFile(path, "utf8")) as { clusters: { cluster: Record<string, unknown> }[] };
  for (const c of config.clusters) c.cluster["insecure-skip-tls-verify"] = true;
  await writeFile(path, stringify(config), { mode: 0o600 });
}
