/**
 * The catalog read from a YAML file of GitProvider, GitTarget, ScopeGrant and Secret objects (documents
 * separated by `---`, or `kind: List`), reloaded when the file changes. A file that fails to load
 * at start stops the gateway with one line; a bad edit later keeps the last good catalog.
 */
import { type FSWatcher, readFileSync, watch } from "node:fs";
import { basename, dirname, resolve } from "node:path";
import { parseAllDocuments } from "yaml";
import { ConfigError } from "../queue/config.js";
import {
  API_VERSION,
  GIT_PROVIDER_KIND,
  GIT_TARGET_KIND,
  type GitProvider,
  type GitTarget,
  gitProvider,
  gitTarget,
  SCOPE_GRANT_KIND,
  type ScopeGrant,
  scopeGrant,
} from "../queue/crds/index.js";
import { errorCode, errorMessage } from "../queue/errors.js";
import { isRecord } from "../queue/kube/readers.js";
import type { Logger } from "../queue/log.js";
import {
  buildSnapshot,
  type Catalog,
  type CatalogObjects,
  type CatalogSnapshot,
  type SecretData,
  secretValues,
} from "./catalog.js";

/** Parses the text of a catalog file. Throws an Error whose message names the bad document. Pure. */
export function parseCatalogText(text: string): CatalogObjects {
  const out: CatalogObjects = { providers: [], targets: [], secrets: [], grants: [] };
  const docs = parseAllDocuments(text);
  if (!Array.isArray(docs)) throw new Error("not a YAML document stream");
  const items: { obj: unknown; where: string }[] = [];
  docs.forEach((doc, i) => {
    if (doc.errors.length > 0) throw new Error(`document ${i + 1}: ${doc.errors[0]!.message.split("\n")[0]}`);
    const obj = doc.toJS() as unknown;
    if (obj === null || obj === undefined) return;
    if (isRecord(obj) && obj.kind === "List" && Array.isArray(obj.items)) {
      obj.items.forEach((item, j) => {
        items.push({ obj: item, where: `document ${i + 1} item ${j + 1}` });
      });
    } else items.push({ obj, where: `document ${i + 1}` });
  });
  for (const { obj, where } of items) {
    const o = isRecord(obj) ? obj : {};
    const meta = isRecord(o.metadata) ? o.metadata : {};
    const label = `${where} (${String(o.kind)} ${String(meta.name ?? "?")})`;
    if (o.kind === "Secret" && o.apiVersion === "v1") {
      if (typeof meta.name !== "string") throw new Error(`${label}: metadata.name is required`);
      out.secrets.push({
        namespace: typeof meta.namespace === "string" ? meta.namespace : "default",
        name: meta.name,
        data: secretValues(o as { data?: Record<string, string>; stringData?: Record<string, string> }),
      });
    } else if (o.kind === GIT_PROVIDER_KIND && o.apiVersion === API_VERSION) {
      out.providers.push(validate(gitProvider, obj, label) as GitProvider);
    } else if (o.kind === GIT_TARGET_KIND && o.apiVersion === API_VERSION) {
      out.targets.push(validate(gitTarget, obj, label) as GitTarget);
    } else if (o.kind === SCOPE_GRANT_KIND && o.apiVersion === API_VERSION) {
      out.grants!.push(validate(scopeGrant, obj, label) as ScopeGrant);
    }
    // Other kinds (claims, Flux or Argo objects) may share the file; the gateway does not need them.
  }
  return out;
}

function validate(
  schema: { safeParse(v: unknown): { success: boolean; data?: unknown; error?: any } },
  obj: unknown,
  label: string,
) {
  const r = schema.safeParse(obj);
  if (!r.success) {
    const issue = r.error.issues[0] as { path: (string | number)[]; message: string };
    throw new Error(`${label}: ${issue.path.join(".") || "(object)"}: ${issue.message}`);
  }
  return r.data;
}

export function loadCatalogFile(path: string): CatalogObjects {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (err) {
    throw new Error(`cannot read ${path}: ${errorCode(err) ?? errorMessage(err)}`);
  }
  return parseCatalogText(text);
}

export class FileCatalog implements Catalog {
  #snapshot: CatalogSnapshot;
  #watcher: FSWatcher | undefined;
  #timer: NodeJS.Timeout | undefined;
  #generation = 0;

  /** Loads the file now (throwing ConfigError when it is bad) and watches it. */
  constructor(
    readonly path: string,
    private readonly log?: Logger,
    debounceMs = 50,
  ) {
    const full = resolve(path);
    try {
      this.#snapshot = buildSnapshot(loadCatalogFile(full));
    } catch (err) {
      throw new ConfigError(`invalid setting --config: ${errorMessage(err).split("\n")[0]}`);
    }
    // Watch the folder: editors and Kubernetes ConfigMap mounts replace the file rather than write it.
    this.#watcher = watch(dirname(full), (_event, file) => {
      if (file !== null && file !== basename(full) && !String(file).startsWith("..")) return;
      clearTimeout(this.#timer);
      this.#timer = setTimeout(() => this.reload(), debounceMs);
    });
    this.#watcher.on("error", (err) => this.log?.warn({ err }, "catalog file watch failed"));
  }

  /** Rereads the file; keeps the current catalog when the new text is bad. */
  reload(): boolean {
    try {
      this.#snapshot = buildSnapshot(loadCatalogFile(resolve(this.path)));
      this.#generation++;
      this.log?.info({ path: this.path, generation: this.#generation }, "catalog reloaded");
      return true;
    } catch (err) {
      this.log?.error(
        { path: this.path, error: errorMessage(err) },
        "catalog file rejected; keeping the last good one",
      );
      return false;
    }
  }

  /** How many times the file was reloaded since start. */
  get generation(): number {
    return this.#generation;
  }

  snapshot(): CatalogSnapshot {
    return this.#snapshot;
  }
  loaded(): boolean {
    return true;
  }
  async close(): Promise<void> {
    clearTimeout(this.#timer);
    this.#watcher?.close();
  }
}

export type { SecretData };
