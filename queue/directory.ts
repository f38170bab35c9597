/**
 * Where a branch worker learns what a branch key means: the repository to fetch and push (with
 * credentials), the branch, and the GitTargets writing folders on it. Implementations read
 * GitProviders, GitTargets and Secrets from a YAML file (running without a cluster) or from the
 * Kubernetes API; the branch worker itself never talks to Kubernetes.
 */
import { readFile } from "node:fs/promises";
import { parseAllDocuments } from "yaml";
import { branchKey } from "./contract.js";
import {
  DEFAULT_COMMIT_WINDOW,
  type GitProvider,
  type GitTarget,
  gitProvider,
  gitTarget,
  SCOPE_GRANT_KIND,
  type ScopeGrant,
  scopeGrant,
} from "./crds/index.js";
import { credentialsIn } from "./git/credentials.js";
import type { Remote } from "./git/smart-http.js";
import { type Scope, scopeOf } from "./scope.js";
import { judgeHolding, providerFacts, targetFacts } from "./tenancy.js";

/** A GitTarget's commit window: idle for `idleMs`, or open `maxMs` at the longest. */
export interface WindowSettings {
  idleMs: number;
  maxMs: number;
}

export interface TargetSpec {
  namespace: string;
  name: string;
  uid?: string;
  path: string;
  window: WindowSettings;
  /** `spec.suspend`: the folder is frozen, its writes are kept and not published. */
  suspended?: boolean;
  /** What its writes may hold; the worker refuses the rest even when the gateway let it through. */
  scope: Scope;
  /** `spec.baseBranch`: where the branch starts when it does not exist yet. */
  baseBranch?: string;
}

/** A GitTarget naming this branch that the worker refuses: it takes no writes and holds no applier. */
export interface RefusedTarget {
  namespace: string;
  name: string;
  uid?: string;
  reason: string;
  message: string;
}

/** The GitProvider a branch belongs to: whose credentials it uses, where its commit-status API is. */
export interface ProviderSpec {
  namespace: string;
  name: string;
  url: string;
  commitStatus?: { apiURL?: string; repository?: string };
}

export interface BranchSpec {
  key: string;
  /** The GitProvider's clone URL and its current credentials (sent only to that URL's origin). */
  remote: Remote;
  provider?: ProviderSpec;
  branch: string;
  targets: TargetSpec[];
  /**
   * Where the branch starts when it does not exist yet: the first `spec.baseBranch` its GitTargets
   * name (by namespace/name), else the GitProvider's. Unset: the repository's default branch.
   */
  baseBranch?: string;
  /** GitTargets naming the branch that may not use its GitProvider (another namespace, not admitted). */
  refused?: RefusedTarget[];
}

export interface Directory {
  branch(key: string): Promise<BranchSpec | undefined>;
}

/** A directory whose remotes all carry `timeoutMs` as the deadline of every Git call. */
export function withGitTimeout(directory: Directory, timeoutMs: number): Directory {
  return {
    async branch(key) {
      const spec = await directory.branch(key);
      return spec && { ...spec, remote: { ...spec.remote, timeoutMs } };
    },
  };
}

interface SecretLike {
  kind: "Secret";
  metadata: { name: string; namespace?: string };
  data?: Record<string, string>;
  stringData?: Record<string, string>;
}

export function secretValue(secret: SecretLike | undefined, key: string): string | undefined {
  if (!secret) return undefined;
  if (secret.stringData?.[key] !== undefined) return secret.stringData[key];
  const b64 = secret.data?.[key];
  return b64 === undefined ? undefined : Buffer.from(b64, "base64").toString("utf8");
}

/** A Secret's values, decoded (`stringData` wins, as the API server does). */
function secretData(secret: SecretLike | undefined): Record<string, string> | undefined {
  if (!secret) return undefined;
  const out: Record<string, string> = {};
  for (const k of new Set([...Object.keys(secret.data ?? {}), ...Object.keys(secret.stringData ?? {})])) {
    const v = secretValue(secret, k);
    if (v !== undefined) out[k] = v;
  }
  return out;
}

/** What the operator allows: `allowHttpCredentials` lets credentials go over plain http. */
export interface DirectoryOptions {
  allowHttpCredentials?: boolean;
}

/**
 * Whether a GitProvider's credentials would go over plain http, which only the operator allows:
 * such a provider is used without them (its GitTargets say why, CredentialsAvailable=False).
 */
export function insecureCredentials(provider: GitProvider, o: DirectoryOptions = {}): boolean {
  return !o.allowHttpCredentials && /^http:/i.test(provider.spec.url.trim());
}

/** The remote of a GitProvider: its own URL, and its credentials when the operator's rules let them go. */
export function remoteOf(
  provider: GitProvider,
  secret: SecretLike | undefined,
  o: DirectoryOptions = {},
): Remote {
  const remote: Remote = { url: provider.spec.url };
  if (o.allowHttpCredentials) remote.allowHttpCredentials = true;
  const auth = provider.spec.credentialsSecretRef ? credentialsIn(secretData(secret)) : undefined;
  if (auth && !insecureCredentials(provider, o)) remote.auth = auth;
  return remote;
}

/** What a branch needs to know of its GitProvider besides its remote. */
export function providerSpecOf(provider: GitProvider): ProviderSpec {
  const cs = provider.spec.commitStatus;
  return {
    namespace: provider.metadata.namespace ?? "default",
    name: provider.metadata.name,
    url: provider.spec.url,
    ...(cs && (cs.apiURL || cs.repository)
      ? {
          commitStatus: {
            ...(cs.apiURL ? { apiURL: cs.apiURL } : {}),
            ...(cs.repository ? { repository: cs.repository } : {}),
          },
        }
      : {}),
  };
}

export function targetWindow(target: GitTarget): WindowSettings {
  const w = target.spec.commitWindow;
  return {
    idleMs: (w?.idleSeconds ?? DEFAULT_COMMIT_WINDOW.idleSeconds) * 1000,
    maxMs: (w?.maxSeconds ?? DEFAULT_COMMIT_WINDOW.maxSeconds) * 1000,
  };
}

/** Builds branch specs from the objects themselves (the same shapes the API server holds). */
export function directoryFromObjects(
  providers: GitProvider[],
  targets: GitTarget[],
  secrets: SecretLike[] = [],
  grants: ScopeGrant[] = [],
  options: DirectoryOptions = {},
): Directory & { keys(): string[] } {
  const byKey = new Map<string, BranchSpec>();
  const secretOf = (ns: string, name: string) =>
    secrets.find((s) => s.metadata.name === name && (s.metadata.namespace ?? "default") === ns);
  const providerBase = new Map<string, string | undefined>();
  // The same rules as the gateway's door: a GitProvider admits other namespaces it lists, one
  // GitProvider holds each repository, one namespace's GitTargets each folder (queue/tenancy.ts).
  const holding = judgeHolding(providers.map(providerFacts), targets.map(targetFacts));
  for (const t of targets) {
    const ns = t.metadata.namespace ?? "default";
    const pns = t.spec.providerRef.namespace ?? ns;
    const provider = providers.find(
      (p) => p.metadata.name === t.spec.providerRef.name && (p.metadata.namespace ?? "default") === pns,
    );
    if (!provider) continue;
    const key = branchKey({ namespace: pns, name: provider.metadata.name }, provider.spec.url, t.spec.branch);
    let spec = byKey.get(key);
    if (!spec) {
      const ref = provider.spec.credentialsSecretRef;
      // A GitProvider refused its repository is used for nothing: not even its own credentials.
      const held = holding.provider(pns, provider.metadata.name) !== undefined;
      const remote = remoteOf(provider, ref && !held ? secretOf(pns, ref.name) : undefined, options);
      spec = { key, remote, provider: providerSpecOf(provider), branch: t.spec.branch, targets: [] };
      byKey.set(key, spec);
      providerBase.set(key, provider.spec.baseBranch);
    }
    const uid = t.metadata.uid ? { uid: t.metadata.uid as string } : {};
    const refused = holding.target({
      namespace: ns,
      name: t.metadata.name,
      providerNamespace: pns,
      providerName: provider.metadata.name,
    });
    if (refused) {
      spec.refused = [...(spec.refused ?? []), { namespace: ns, name: t.metadata.name, ...uid, ...refused }];
      continue;
    }
    spec.targets.push({
      namespace: ns,
      name: t.metadata.name,
      ...uid,
      path: t.spec.path,
      window: targetWindow(t),
      ...(t.spec.suspend === true ? { suspended: true } : {}),
      ...(t.spec.baseBranch ? { baseBranch: t.spec.baseBranch } : {}),
      scope: scopeOf({ namespace: ns, name: t.metadata.name, allowedKinds: t.spec.allowedKinds }, grants),
    });
  }
  for (const spec of byKey.values()) {
    const named = [...spec.targets]
      .sort((a, b) => (`${a.namespace}/${a.name}` < `${b.namespace}/${b.name}` ? -1 : 1))
      .find((t) => t.baseBranch)?.baseBranch;
    const base = named ?? providerBase.get(spec.key);
    if (base) spec.baseBranch = base;
  }
  return {
    branch: async (key) => byKey.get(key),
    keys: () => [...byKey.keys()],
  };
}

/** Reads GitProviders, GitTargets, ScopeGrants and Secrets from a multi-document YAML file. */
export async function loadDirectoryFile(
  path: string,
  options: DirectoryOptions = {},
): Promise<Directory & { keys(): string[] }> {
  const docs = parseAllDocuments(await readFile(path, "utf8")).map(
    (d) => d.toJSON() as Record<string, unknown>,
  );
  const providers: GitProvider[] = [];
  const targets: GitTarget[] = [];
  const secrets: SecretLike[] = [];
  const grants: ScopeGrant[] = [];
  docs.forEach((doc, i) => {
    if (!doc) return;
    const where = `${path} document ${i + 1}`;
    if (doc.kind === "GitProvider") {
      const r = gitProvider.safeParse(doc);
      if (!r.success)
        throw new Error(`${where}: ${r.error.issues[0]?.path.join(".")}: ${r.error.issues[0]?.message}`);
      providers.push(r.data);
    } else if (doc.kind === "GitTarget") {
      const r = gitTarget.safeParse(doc);
      if (!r.success)
        throw new Error(`${where}: ${r.error.issues[0]?.path.join(".")}: ${r.error.issues[0]?.message}`);
      targets.push(r.data);
    } else if (doc.kind === SCOPE_GRANT_KIND) {
      const r = scopeGrant.safeParse(doc);
      if (!r.success)
        throw new Error(`${where}: ${r.error.issues[0]?.path.join(".")}: ${r.error.issues[0]?.message}`);
      grants.push(r.data);
    } else if (doc.kind === "Secret") {
      secrets.push(doc as unknown as SecretLike);
    }
  });
  return directoryFromObjects(providers, targets, secrets, grants, options);
}
