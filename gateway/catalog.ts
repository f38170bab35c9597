/**
 * The catalog: what the gateway knows about GitProviders, GitTargets and the Secrets they name.
 * Two sources feed it (a YAML file, or the cluster); both keep the raw objects and rebuild an
 * immutable snapshot with `buildSnapshot` whenever one changes, so a rotated Secret takes effect
 * on the next request without a restart.
 */
import { branchKey, normalizeRepoUrl } from "../queue/contract.js";
import {
  type GitProvider,
  type GitProviderType,
  type GitTarget,
  INTAKE_HMAC_KEY,
  INTAKE_TOKEN_KEY,
  type ScopeGrant,
  type SignatureStyle,
  WEBHOOK_SECRET_TOKEN_KEY,
  type WebhookClaim,
} from "../queue/crds/index.js";
import { enforcedLevel, type PodSecurityLevel } from "../queue/pod-security.js";
import { type Scope, scopeOf } from "../queue/scope.js";
import { judgeHolding, providerFacts, targetFacts } from "../queue/tenancy.js";
import { hookPath } from "./verify.js";

/** A Secret as both sources hold it: decoded string values. */
export interface SecretData {
  namespace: string;
  name: string;
  data: Record<string, string>;
}

export interface CatalogObjects {
  providers: GitProvider[];
  targets: GitTarget[];
  secrets: SecretData[];
  /** ScopeGrants: what GitTargets may hold beyond their own namespace. */
  grants?: ScopeGrant[];
  /** WebhookClaims: the key a tool's report on one of their operations is checked with. */
  webhookClaims?: WebhookClaim[];
  /** Namespaces, for the Pod Security level their labels enforce. */
  namespaces?: NamespaceLabels[];
}

/** A Namespace as the catalog keeps it: its name and labels. */
export interface NamespaceLabels {
  name: string;
  labels?: Record<string, string>;
}

/** What a tool's report on a WebhookClaim's operation is checked with. */
export interface WebhookClaimEntry {
  namespace: string;
  name: string;
  signature: SignatureStyle;
  /** The HMAC key; undefined while the Secret or its key is missing. */
  key?: string;
}

export interface ProviderEntry {
  namespace: string;
  name: string;
  type: GitProviderType;
  url: string;
  /** normalizeRepoUrl(url): what a push's repository URLs must contain. */
  repository: string;
  allowSha1: boolean;
  /** The webhook token; undefined while the Secret or its key is missing (not ready). */
  secret?: string;
  /** `/hook/<hex>`; undefined while not ready. */
  hookPath?: string;
  accessFrom: readonly string[];
  /** Why it may not be used: another GitProvider holds its repository (queue/tenancy.ts). */
  refused?: { reason: string; message: string };
}

export interface TargetEntry {
  namespace: string;
  name: string;
  uid?: string;
  branch: string;
  path: string;
  providerNamespace: string;
  providerName: string;
  /** Present when the provider exists and grants this target's namespace. */
  branchKey?: string;
  /** Why the target cannot take writes now (provider missing, not granted). */
  problem?: string;
  intakeToken?: string;
  intakeHmacKey?: string;
  /** What its writes may hold (queue/scope.ts). */
  scope: Scope;
}

export interface CatalogSnapshot {
  providerByHookPath(path: string): ProviderEntry | undefined;
  target(namespace: string, name: string): TargetEntry | undefined;
  /** GitTargets that write `branch` of the provider's repository. */
  targetsWriting(provider: ProviderEntry, branch: string): TargetEntry[];
  readonly providers: readonly ProviderEntry[];
  readonly targets: readonly TargetEntry[];
  webhookClaim(namespace: string, name: string): WebhookClaimEntry | undefined;
  /**
   * The Pod Security level a namespace enforces (`pod-security.kubernetes.io/enforce`); a
   * namespace not known or not labelled holds the default (queue/pod-security.ts).
   */
  podSecurityLevel(namespace: string): PodSecurityLevel;
}

/** Where the gateway's catalog comes from; a file or the cluster, interchangeable. */
export interface Catalog {
  /** The current snapshot (empty until loaded). */
  snapshot(): CatalogSnapshot;
  /** True once the first full load finished. */
  loaded(): boolean;
  close(): Promise<void>;
}

const DEFAULT_NAMESPACE = "default";
const nn = (namespace: string, name: string) => `${namespace}/${name}`;

/** Builds the lookup tables from raw objects. Pure. */
export function buildSnapshot(objects: CatalogObjects): CatalogSnapshot {
  const secrets = new Map(objects.secrets.map((s) => [nn(s.namespace, s.name), s.data]));
  const providers: ProviderEntry[] = [];
  const byPath = new Map<string, ProviderEntry>();
  const byName = new Map<string, ProviderEntry>();
  for (const p of objects.providers) {
    const namespace = p.metadata.namespace ?? DEFAULT_NAMESPACE;
    const name = p.metadata.name;
    let repository: string;
    try {
      repository = normalizeRepoUrl(p.spec.url);
    } catch {
      continue;
    }
    const token = secrets.get(nn(namespace, p.spec.webhookSecretRef.name))?.[WEBHOOK_SECRET_TOKEN_KEY];
    const entry: ProviderEntry = {
      namespace,
      name,
      type: p.spec.type,
      url: p.spec.url,
      repository,
      allowSha1: p.spec.allowSha1Signature === true,
      accessFrom: p.spec.accessFrom?.namespaces ?? [],
    };
    if (token) {
      entry.secret = token;
      entry.hookPath = hookPath(token, name, namespace);
      byPath.set(entry.hookPath, entry);
    }
    providers.push(entry);
    byName.set(nn(namespace, name), entry);
  }

  // One GitProvider holds each repository, one namespace each folder; the worker judges alike.
  const holding = judgeHolding(objects.providers.map(providerFacts), objects.targets.map(targetFacts));
  for (const entry of providers) {
    const refused = holding.provider(entry.namespace, entry.name);
    if (refused) entry.refused = refused;
  }

  const targets: TargetEntry[] = [];
  const byTarget = new Map<string, TargetEntry>();
  const writing = new Map<string, TargetEntry[]>();
  for (const t of objects.targets) {
    const namespace = t.metadata.namespace ?? DEFAULT_NAMESPACE;
    const providerNamespace = t.spec.providerRef.namespace ?? namespace;
    const entry: TargetEntry = {
      namespace,
      name: t.metadata.name,
      branch: t.spec.branch,
      path: t.spec.path,
      providerNamespace,
      providerName: t.spec.providerRef.name,
      scope: scopeOf(
        { namespace, name: t.metadata.name, allowedKinds: t.spec.allowedKinds },
        objects.grants ?? [],
      ),
    };
    if (t.metadata.uid) entry.uid = t.metadata.uid;
    const provider = byName.get(nn(providerNamespace, t.spec.providerRef.name));
    // The worker refuses the same GitTargets by the same rules (queue/worker/directory.ts).
    const refused =
      provider &&
      holding.target({
        namespace,
        name: t.metadata.name,
        providerNamespace,
        providerName: provider.name,
      });
    if (!provider) entry.problem = `GitProvider ${nn(providerNamespace, t.spec.providerRef.name)} not found`;
    else if (refused) entry.problem = `${refused.reason}: ${refused.message}`;
    else {
      entry.branchKey = branchKey(provider, provider.url, t.spec.branch);
      const k = `${nn(provider.namespace, provider.name)}@${t.spec.branch}`;
      writing.set(k, [...(writing.get(k) ?? []), entry]);
    }
    const ref = t.spec.intakeSecretRef?.name;
    const intake = ref ? secrets.get(nn(namespace, ref)) : undefined;
    if (intake?.[INTAKE_TOKEN_KEY]) entry.intakeToken = intake[INTAKE_TOKEN_KEY];
    if (intake?.[INTAKE_HMAC_KEY]) entry.intakeHmacKey = intake[INTAKE_HMAC_KEY];
    targets.push(entry);
    byTarget.set(nn(namespace, entry.name), entry);
  }

  const claims = new Map<string, WebhookClaimEntry>();
  for (const c of objects.webhookClaims ?? []) {
    const namespace = c.metadata.namespace ?? DEFAULT_NAMESPACE;
    const key = secrets.get(nn(namespace, c.spec.secretRef.name))?.[c.spec.secretRef.key];
    claims.set(nn(namespace, c.metadata.name), {
      namespace,
      name: c.metadata.name,
      signature: c.spec.signature,
      ...(key ? { key } : {}),
    });
  }

  const levels = new Map((objects.namespaces ?? []).map((n) => [n.name, enforcedLevel(n.labels)]));

  return {
    providers,
    targets,
    webhookClaim: (namespace, name) => claims.get(nn(namespace, name)),
    podSecurityLevel: (namespace) => levels.get(namespace) ?? enforcedLevel(undefined),
    providerByHookPath: (path) => byPath.get(path),
    target: (namespace, name) => byTarget.get(nn(namespace, name)),
    targetsWriting: (provider, branch) =>
      writing.get(`${nn(provider.namespace, provider.name)}@${branch}`) ?? [],
  };
}

export const EMPTY_SNAPSHOT = buildSnapshot({ providers: [], targets: [], secrets: [] });

/** Decodes a Secret's `data` (base64) and `stringData` (plain; wins, as the API server does). */
export function secretValues(secret: {
  data?: Record<string, string> | null;
  stringData?: Record<string, string> | null;
}): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(secret.data ?? {})) {
    if (typeof v === "string") out[k] = Buffer.from(v, "base64").toString("utf8");
  }
  for (const [k, v] of Object.entries(secret.stringData ?? {})) {
    if (typeof v === "string") out[k] = v;
  }
  return out;
}

/** A catalog whose objects are set by hand: for tests and the playground. */
export class StaticCatalog implements Catalog {
  #snapshot: CatalogSnapshot;
  constructor(objects: CatalogObjects) {
    this.#snapshot = buildSnapshot(objects);
  }
  set(objects: CatalogObjects): void {
    this.#snapshot = buildSnapshot(objects);
  }
  snapshot(): CatalogSnapshot {
    return this.#snapshot;
  }
  loaded(): boolean {
    return true;
  }
  async close(): Promise<void> {}
}
