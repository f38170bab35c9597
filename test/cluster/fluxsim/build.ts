/**
 * The build of a Kustomization from an artifact's files (pure). A trimmed kustomize: under
 * spec.path, a kustomization.yaml lists `resources` (files or folders, read the same way) and may
 * set `namespace`; without one, every YAML file below the folder is read, as Flux's generator
 * does. Multi-document files are split; documents without apiVersion and kind are skipped when
 * scanning but refused when listed.
 */
import { createHash } from "node:crypto";
import { parseAllDocuments, stringify } from "yaml";

export interface Manifest {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string>; [k: string]: unknown };
  [k: string]: unknown;
}

export class BuildError extends Error {}
export class PathNotFound extends Error {}

const KUSTOMIZATION_FILES = ["kustomization.yaml", "kustomization.yml", "Kustomization"];
const isYaml = (p: string) => p.endsWith(".yaml") || p.endsWith(".yml");

export function normalizePath(p: string | undefined): string {
  const parts = (p ?? "").split("/").filter((s) => s && s !== ".");
  return parts.join("/");
}

const under = (dir: string, file: string) => (dir === "" ? true : file.startsWith(`${dir}/`));
const join = (dir: string, rel: string) => normalizePath(dir ? `${dir}/${rel}` : rel);

export function pathExists(files: ReadonlyMap<string, string>, dir: string): boolean {
  if (dir === "") return true;
  if (files.has(dir)) return true;
  for (const f of files.keys()) if (under(dir, f)) return true;
  return false;
}

function parseDocs(text: string, file: string, strict: boolean): Manifest[] {
  const out: Manifest[] = [];
  for (const doc of parseAllDocuments(text)) {
    if (doc.errors.length > 0)
      throw new BuildError(`kustomize build failed: ${file}: ${doc.errors[0]?.message}`);
    const v = doc.toJSON() as Manifest | null;
    if (v === null || typeof v !== "object") continue;
    if (!v.apiVersion || !v.kind || !v.metadata?.name) {
      if (!strict) continue;
      throw new BuildError(`failed to decode Kubernetes apiVersion, kind and name from ${file}`);
    }
    out.push(v);
  }
  return out;
}

function readDir(files: ReadonlyMap<string, string>, dir: string, depth: number): Manifest[] {
  if (depth > 20) throw new BuildError(`kustomize build failed: resources nest too deep at ${dir}`);
  const kfile = KUSTOMIZATION_FILES.map((n) => join(dir, n)).find((p) => files.has(p));
  if (kfile) {
    const k = (parseAllDocuments(files.get(kfile) as string)[0]?.toJSON() ?? {}) as {
      resources?: string[];
      namespace?: string;
    };
    const out: Manifest[] = [];
    for (const r of k.resources ?? []) {
      const p = join(dir, r);
      if (files.has(p)) out.push(...parseDocs(files.get(p) as string, p, true));
      else if (pathExists(files, p)) out.push(...readDir(files, p, depth + 1));
      else throw new BuildError(`kustomize build failed: accumulating resources: '${p}' does not exist`);
    }
    if (k.namespace) setNamespace(out, k.namespace, CLUSTER_SCOPED);
    return out;
  }
  const out: Manifest[] = [];
  const names = [...files.keys()].filter((f) => under(dir, f) && isYaml(f)).sort();
  // A sub-folder with its own kustomization.yaml is built as one resource, as the generator does.
  const nested = new Set<string>();
  for (const f of names) {
    const rest = dir ? f.slice(dir.length + 1) : f;
    const segs = rest.split("/");
    for (let i = 1; i < segs.length; i++) {
      const sub = join(dir, segs.slice(0, i).join("/"));
      if (KUSTOMIZATION_FILES.some((n) => files.has(join(sub, n)))) {
        nested.add(sub);
        break;
      }
    }
  }
  const done = new Set<string>();
  for (const f of names) {
    const sub = [...nested].find((n) => under(n, f));
    if (sub) {
      if (!done.has(sub)) out.push(...readDir(files, sub, depth + 1));
      done.add(sub);
      continue;
    }
    out.push(...parseDocs(files.get(f) as string, f, false));
  }
  return out;
}

export interface BuildResult {
  objects: Manifest[];
  /** `sha256:<hex>` of the built YAML, as status.history records it. */
  digest: string;
}

export function build(
  files: ReadonlyMap<string, string>,
  path: string | undefined,
  opts: { targetNamespace?: string; clusterScopedKinds?: ReadonlySet<string> } = {},
): BuildResult {
  const dir = normalizePath(path);
  if (!pathExists(files, dir)) throw new PathNotFound(`kustomization path not found: ${dir || "."}`);
  const objects = files.has(dir) ? parseDocs(files.get(dir) as string, dir, true) : readDir(files, dir, 0);
  const clusterScoped = opts.clusterScopedKinds ?? CLUSTER_SCOPED;
  if (opts.targetNamespace) setNamespace(objects, opts.targetNamespace, clusterScoped);
  const seen = new Set<string>();
  for (const o of objects) {
    const id = `${o.apiVersion}/${o.kind}/${o.metadata.namespace ?? ""}/${o.metadata.name}`;
    if (seen.has(id))
      throw new BuildError(
        `kustomize build failed: may not add resource with an already registered id: ${id}`,
      );
    seen.add(id);
  }
  const text = objects.map((o) => stringify(o)).join("---\n");
  return { objects, digest: `sha256:${createHash("sha256").update(text).digest("hex")}` };
}

/**
 * kustomize's namespace transformer (a kustomization's `namespace`, and the targetNamespace
 * kustomize-controller writes into the one it generates): namespaced objects move to `ns`, a
 * Namespace object is renamed to it, other cluster-scoped objects are left alone.
 */
function setNamespace(objects: Manifest[], ns: string, clusterScoped: ReadonlySet<string>): void {
  for (const o of objects) {
    if (o.kind === "Namespace") o.metadata.name = ns;
    else if (!clusterScoped.has(o.kind)) o.metadata.namespace = ns;
  }
}

/** Kinds a targetNamespace leaves alone (the built-in cluster-scoped kinds we meet). */
export const CLUSTER_SCOPED: ReadonlySet<string> = new Set([
  "Namespace",
  "CustomResourceDefinition",
  "ClusterRole",
  "ClusterRoleBinding",
  "PersistentVolume",
  "StorageClass",
]);

export const OWNER_NAME_LABEL = "kustomize.toolkit.fluxcd.io/name";
export const OWNER_NAMESPACE_LABEL = "kustomize.toolkit.fluxcd.io/namespace";

/** Owner labels, as fluxcd/pkg ssa SetOwnerLabels puts them on every applied object. */
export function withOwnerLabels(o: Manifest, name: string, namespace: string): Manifest {
  return {
    ...o,
    metadata: {
      ...o.metadata,
      labels: { ...(o.metadata.labels ?? {}), [OWNER_NAME_LABEL]: name, [OWNER_NAMESPACE_LABEL]: namespace },
    },
  };
}
