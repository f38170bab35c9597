/**
 * Renders the Helm chart with the real `helm` (built by `npm run real:build`), and compares what it
 * renders with a kustomize build: object by object, field by field, after taking off the labels
 * Helm adds to every object's metadata. Comparison is pure.
 */
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { parseAllDocuments, stringify } from "yaml";
import { findRealBinaries } from "../real/binaries.js";
import { type K8sObject, REPO_ROOT } from "./kustomize.js";

export const CHART_DIR = resolve(REPO_ROOT, "manifests/chart");
export const RELEASE_NAMESPACE = "applygate-system";

const bins = findRealBinaries(["helm"]);
/** The helm binary, or why there is none. */
export const HELM: { path: string } | { missing: string } = bins.built
  ? { path: bins.path("helm") }
  : { missing: bins.message };

/** Runs helm; throws with its stderr on a non-zero exit. */
export function helm(args: string[]): string {
  if (!("path" in HELM)) throw new Error(HELM.missing);
  return execFileSync(HELM.path, args, {
    encoding: "utf8",
    stdio: ["ignore", "pipe", "pipe"],
    // Helm keeps caches and plugin config under these; none of the user's leaks in.
    env: { ...process.env, HELM_CACHE_HOME: join(tmpdir(), "applygate-helm-cache") },
  });
}

/** `helm template` of the chart with these values (and CRDs), as objects. */
export function renderChart(values: object = {}, chartDir = CHART_DIR): K8sObject[] {
  const dir = mkdtempSync(join(tmpdir(), "applygate-values-"));
  try {
    const file = join(dir, "values.yaml");
    writeFileSync(file, stringify(values));
    const out = helm([
      "template",
      "applygate",
      chartDir,
      "--namespace",
      RELEASE_NAMESPACE,
      "--include-crds",
      "--values",
      file,
    ]);
    return parseAllDocuments(out)
      .map((d) => d.toJS() as K8sObject | null)
      .filter((o): o is K8sObject => o !== null);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The labels Helm's chart adds to each object's own metadata (never to selectors or pod templates). */
export const HELM_LABELS = [
  "app.kubernetes.io/managed-by",
  "app.kubernetes.io/instance",
  "app.kubernetes.io/version",
  "helm.sh/chart",
] as const;

export function keyOf(o: K8sObject): string {
  return `${o.kind} ${o.metadata.namespace ? `${o.metadata.namespace}/` : ""}${o.metadata.name}`;
}

/**
 * Kinds without a namespace. kustomize sets its `namespace:` on ValidatingAdmissionPolicies too (its
 * built-in schema does not know them as cluster-scoped); the API server drops a namespace on a
 * cluster-scoped object, so the comparison does as well.
 */
const CLUSTER_SCOPED = new Set([
  "Namespace",
  "CustomResourceDefinition",
  "ClusterRole",
  "ClusterRoleBinding",
  "ValidatingAdmissionPolicy",
  "ValidatingAdmissionPolicyBinding",
]);

/** An object as the comparison sees it: Helm's labels off, no namespace where the API server keeps none. */
function normalised(o: K8sObject): K8sObject {
  const copy = structuredClone(o);
  if (CLUSTER_SCOPED.has(copy.kind)) delete copy.metadata.namespace;
  const labels = copy.metadata.labels;
  if (labels) {
    for (const l of HELM_LABELS) delete labels[l];
    if (Object.keys(labels).length === 0) delete copy.metadata.labels;
  }
  return copy;
}

/** Every difference between two JSON values, as `path: a != b` lines. */
export function diffValues(a: unknown, b: unknown, path = ""): string[] {
  if (Object.is(a, b)) return [];
  const bothObjects =
    typeof a === "object" &&
    a !== null &&
    typeof b === "object" &&
    b !== null &&
    Array.isArray(a) === Array.isArray(b);
  if (!bothObjects) return [`${path || "."}: ${JSON.stringify(a)} != ${JSON.stringify(b)}`];
  if (Array.isArray(a) && Array.isArray(b)) {
    const out: string[] = [];
    if (a.length !== b.length) out.push(`${path}: ${a.length} items != ${b.length} items`);
    for (let i = 0; i < Math.min(a.length, b.length); i++)
      out.push(...diffValues(a[i], b[i], `${path}[${i}]`));
    return out;
  }
  const ao = a as Record<string, unknown>;
  const bo = b as Record<string, unknown>;
  const out: string[] = [];
  for (const k of new Set([...Object.keys(ao), ...Object.keys(bo)])) {
    if (!(k in bo)) out.push(`${path}.${k}: only in the first`);
    else if (!(k in ao)) out.push(`${path}.${k}: only in the second`);
    else out.push(...diffValues(ao[k], bo[k], `${path}.${k}`));
  }
  return out;
}

export interface Expected {
  /** Objects only the kustomize build has, each with the reason. */
  onlyKustomize?: Record<string, string>;
  /** Objects only the chart renders, each with the reason. */
  onlyChart?: Record<string, string>;
}

/**
 * What differs between the kustomize build and the chart's rendering, one line per difference;
 * empty when they are the same but for the objects `expected` names (and those must differ so).
 */
export function compareBuilds(kustomize: K8sObject[], chart: K8sObject[], expected: Expected = {}): string[] {
  const index = (objects: K8sObject[], side: string) => {
    const m = new Map<string, K8sObject>();
    for (const o of objects) {
      const n = normalised(o);
      const key = keyOf(n);
      if (m.has(key)) throw new Error(`${side} has ${key} twice`);
      m.set(key, n);
    }
    return m;
  };
  const k = index(kustomize, "the kustomize build");
  const c = index(chart, "the chart");
  const out: string[] = [];
  for (const key of new Set([...k.keys(), ...c.keys()])) {
    const inK = k.get(key);
    const inC = c.get(key);
    if (inK && !inC) {
      if (!expected.onlyKustomize?.[key]) out.push(`${key}: in the kustomize build, not in the chart`);
    } else if (inC && !inK) {
      if (!expected.onlyChart?.[key]) out.push(`${key}: in the chart, not in the kustomize build`);
    } else {
      if (expected.onlyKustomize?.[key] || expected.onlyChart?.[key])
        out.push(`${key}: expected on one side only, found on both`);
      for (const d of diffValues(inK, inC)) out.push(`${key} ${d} (kustomize != chart)`);
    }
  }
  for (const key of Object.keys(expected.onlyKustomize ?? {}))
    if (!k.has(key)) out.push(`${key}: expected in the kustomize build, missing`);
  for (const key of Object.keys(expected.onlyChart ?? {}))
    if (!c.has(key)) out.push(`${key}: expected in the chart, missing`);
  return out;
}
