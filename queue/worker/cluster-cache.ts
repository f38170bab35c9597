/**
 * The worker's view of the cluster: the shared informers of the cluster-access layer
 * (queue/kube/) for GitProviders, GitTargets, ScopeGrants, claims, Approvals and ApplierGrants, started and
 * listed once per process, and one watch per Secret our objects name (a GitProvider's credentials,
 * a claim's keys for signature approval; a field selector `metadata.name=`, never the Secrets of a
 * whole namespace). Branch lookups and listings
 * read these caches, so an idle branch costs the API server nothing; a change of a GitTarget,
 * GitProvider, claim or Secret tells the branches it concerns at once.
 *
 * An applier kind the cluster does not serve (Argo CD not installed, no AppProject CRD) is known
 * absent: its reads answer "not found" from memory, and the kind is looked for again every 30 s
 * (one `list ?limit=1`), its informer started and the branches concerned told once it is found. One
 * the worker's role may get but not list (a role from before appliers were cached) is read from
 * the API server, each object's answer kept 30 s and shared by the readers meanwhile.
 */
import type * as k8s from "@kubernetes/client-node";
import { claimListingView } from "../apply/catalog.js";
import { branchKey } from "../contract.js";
import { type GitProvider, type GitTarget, type ScopeGrant, scopeGrant } from "../crds/index.js";
import { errorMessage } from "../errors.js";
import {
  addressOf,
  apiFailure,
  approvalSpecFields,
  collectionPath,
  fieldOf,
  type InformerHandle,
  isForbidden,
  isNotFound,
  isRecord,
  type KObject,
  Kube,
  RESOURCES,
  type ResourceType,
  readGitProvider,
  readGitTarget,
  readObject,
  secretFields,
  TypedCache,
} from "../kube/index.js";
import type { Logger } from "../log.js";
import { repositoryOf } from "../tenancy.js";
import { ClaimsByApplier } from "./claims-by-applier.js";
import { SharedBranchIndex } from "./shared-branches.js";

/**
 * The appliers a claim holds, and Argo CD's AppProjects. The decisions read only which source an
 * applier reads (a Kustomization's `spec.sourceRef`, an Application's `spec.source(s)`), an
 * Application's project and destination, and a project's sync windows, so that is all the cache
 * keeps of them: an Argo CD Application's status alone can be tens of kilobytes.
 */
export const APPLIER_TYPES = {
  Kustomization: RESOURCES.kustomization,
  Application: RESOURCES.application,
  /** Only `spec.syncWindows`: the windows Argo CD holds a sync in, shown on the claim. */
  AppProject: RESOURCES.appProject,
} as const;

/** What the cache keeps of an applier: its identity and the spec fields naming its source. Pure. */
export function applierView(o: KObject): KObject {
  const spec = isRecord(o.spec) ? o.spec : {};
  const kept: Record<string, unknown> = {};
  // An Application's project and destination say which sync windows of its AppProject are its own.
  for (const f of ["sourceRef", "source", "sources", "project", "destination", "syncWindows"])
    if (spec[f] !== undefined) kept[f] = spec[f];
  const { name, namespace, uid, resourceVersion, generation } = o.metadata;
  return {
    ...(o.apiVersion ? { apiVersion: o.apiVersion } : {}),
    ...(o.kind ? { kind: o.kind } : {}),
    metadata: {
      name,
      ...(namespace !== undefined ? { namespace } : {}),
      ...(uid !== undefined ? { uid } : {}),
      ...(resourceVersion !== undefined ? { resourceVersion } : {}),
      ...(generation !== undefined ? { generation } : {}),
    },
    spec: kept,
  };
}

const SCOPE_GRANT: ResourceType = RESOURCES.scopeGrant;

/**
 * How often an applier kind the cluster does not serve (no Argo CD, no AppProject CRD), or the
 * worker may not list, is looked for again: one `list ?limit=1` of its collection per period.
 */
export const REDISCOVER_MS = 30_000;
/** How long an object of a kind the worker may get but not list is kept once read (and coalesced). */
export const UNLISTABLE_READ_TTL_MS = 30_000;

export interface ClusterCacheOptions {
  /** Period of the look for applier kinds not cached (default REDISCOVER_MS). */
  rediscoverMs?: number;
  /** How long a read of a kind the worker may not list answers again (default UNLISTABLE_READ_TTL_MS). */
  readTtlMs?: number;
  now?: () => number;
}

/**
 * An applier kind as this process knows it: cached by its informer, absent (the cluster does not
 * serve it: its reads answer "not found" from memory), or unlistable (the role may not list or
 * watch it: each object is read from the API server, the answer kept a short while).
 */
interface ApplierKind {
  t: ResourceType;
  state: "cached" | "absent" | "unlistable";
  handle: InformerHandle<KObject> | undefined;
  /** Answers read from the API server for an unlistable kind, by `namespace/name`. */
  reads: Map<string, { at: number; answer: Promise<KObject | undefined> }>;
  warned: boolean;
  probing: boolean;
}

/** A credentials Secret as the cache knows it: its data, or why it cannot be read. */
export type SecretRead =
  | { ok: true; data: Record<string, string> }
  | { ok: false; code: number | undefined; message: string };

/** Told of a change: the branch keys it concerns, or "all" when any branch may be concerned. */
export type ChangeListener = (keys: Set<string> | "all") => void;

const nsOf = (o: { metadata: { namespace?: string } }) => o.metadata.namespace ?? "default";

/** The credentials Secret a GitProvider names, if any. */
function credentialsSecretOf(o: KObject | undefined): string | undefined {
  const p = o && readGitProvider(o);
  return p?.ok ? p.value.spec.credentialsSecretRef?.name : undefined;
}

/** The keys Secret a spec's `approval.signature` names, if any. */
function signatureSecretOf(spec: unknown): string | undefined {
  const name = (spec as { approval?: { signature?: { secretRef?: { name?: unknown } } } } | undefined)
    ?.approval?.signature?.secretRef?.name;
  return typeof name === "string" ? name : undefined;
}

/** Whether two versions of an object have the same identity and spec (a status write between them). */
const sameSpec = (a: KObject, b: KObject) =>
  a.metadata.uid === b.metadata.uid && JSON.stringify(a.spec) === JSON.stringify(b.spec);

export class ClusterCache {
  readonly kube: Kube;
  readonly providers: TypedCache<GitProvider>;
  readonly targets: TypedCache<GitTarget>;
  /** GitTargets by the repository branch they write. */
  private readonly shared: SharedBranchIndex;
  readonly grantsCache: TypedCache<ScopeGrant>;
  /** Paths of the kinds the cluster does not serve. */
  private readonly absent = new Set<string>();
  private readonly handles: InformerHandle<KObject>[] = [];
  private readonly appliers: ApplierKind[];
  private readonly log: Logger | undefined;
  private readonly rediscoverMs: number;
  private readonly readTtlMs: number;
  private readonly now: () => number;
  private rediscovery: NodeJS.Timeout | undefined;
  private readonly secrets = new Map<string, Promise<InformerHandle<KObject>>>();
  private sweepPending = false;
  private closed = false;
  private readonly listeners = new Set<ChangeListener>();
  private started: Promise<void> | undefined;
  /**
   * Bumped by every change of what a branch spec is built from (a GitProvider, a GitTarget's spec,
   * a ScopeGrant, a credentials Secret), never by a status write: lookups rebuild only then.
   */
  version = 0;
  /** FluxClaims and ArgoCDClaims by the applier they name. */
  private readonly claimsByApplier = new Map<string, ClaimsByApplier>();
  /** Every branch key GitTargets write, at the version it was built for. */
  private branchKeyList: { version: number; keys: string[] } | undefined;
  /** GitTargets by the claim they name, at the version they were indexed for. */
  private byClaim: { version: number; targets: Map<string, GitTarget[]> } | undefined;

  constructor(kc: k8s.KubeConfig | Kube, log?: Logger, opts: ClusterCacheOptions = {}) {
    this.kube = kc instanceof Kube ? kc : new Kube(kc, log ? { log } : {});
    this.log = log;
    this.rediscoverMs = opts.rediscoverMs ?? REDISCOVER_MS;
    this.readTtlMs = opts.readTtlMs ?? UNLISTABLE_READ_TTL_MS;
    this.now = opts.now ?? Date.now;
    const providers = this.acquire(RESOURCES.gitProvider, (o, prev, type) => {
      this.version++;
      this.shared.reset();
      this.providerChanged(o, prev);
      // The gateway's status writes keep the credentials named: only a delete or a new name sweeps.
      if (type === "delete" || credentialsSecretOf(prev) !== credentialsSecretOf(o)) this.sweepSecrets();
    });
    const targets = this.acquire(RESOURCES.gitTarget, (o, prev, type) => {
      // A status write (ours, at every publication) changes nothing a branch reads of it.
      if (type === "update" && prev && sameSpec(prev, o)) return;
      this.version++;
      const read = type === "delete" ? undefined : this.targets.of(o);
      this.shared.changed(`${nsOf(o)}/${o.metadata.name}`, read?.ok ? read.value : undefined);
      this.tell(this.keysOfSharedBranches([o, prev]));
      this.sweepSecrets();
    });
    this.providers = new TypedCache(providers.informer, readGitProvider, log);
    this.targets = new TypedCache(targets.informer, readGitTarget, log);
    this.shared = new SharedBranchIndex({
      targets: () => this.targets.list(),
      target: (ns, name) => this.targets.get(name, ns),
      provider: (t) => this.providers.get(t.spec.providerRef.name, t.spec.providerRef.namespace ?? nsOf(t)),
    });
    for (const t of [RESOURCES.fluxClaim, RESOURCES.argoCDClaim, RESOURCES.webhookClaim]) {
      const h = this.acquire(t, (o, prev, type) => {
        this.claimsByApplier.get(t.kind)?.changed(o, type === "delete");
        // Most status writes of an apply (conditions, history, the Retrying condition this worker
        // writes itself) change nothing a listing reads: its branch is not relisted for them.
        if (type === "update" && prev && claimListingView(prev) === claimListingView(o)) return;
        this.tell(this.keysOfClaim(t.kind, o));
        if (type === "delete" || signatureSecretOf(prev?.spec) !== signatureSecretOf(o.spec))
          this.sweepSecrets();
      });
      if (t !== RESOURCES.webhookClaim)
        this.claimsByApplier.set(t.kind, new ClaimsByApplier(t.kind, h.informer));
    }
    this.acquire(RESOURCES.applierGrant, () => this.tell("all"));
    // An approval or override given or withdrawn concerns the branches of the claim it names.
    this.acquire(RESOURCES.approval, (o, prev) => {
      const keys = new Set<string>();
      for (const a of [o, prev]) {
        const ref = fieldOf(approvalSpecFields, a?.spec, "claimRef");
        if (!a || !ref) continue;
        for (const k of this.keysOfClaim(ref.kind, { metadata: { namespace: nsOf(a), name: ref.name } }))
          keys.add(k);
      }
      this.tell(keys);
    });
    const grants = this.acquire(SCOPE_GRANT, () => {
      this.version++;
      this.tell("all");
    });
    this.grantsCache = new TypedCache(grants.informer, (o) => readObject(scopeGrant, o), log);
    this.appliers = Object.values(APPLIER_TYPES).map((t) => ({
      t,
      state: "cached" as const,
      handle: undefined,
      reads: new Map(),
      warned: false,
      probing: false,
    }));
  }

  /**
   * The informer of an applier kind. Its handler tells nothing until the kind is cached (a kind
   * found again tells once, when its first list has landed).
   */
  private acquireApplier(k: ApplierKind): InformerHandle<KObject> {
    const t = k.t;
    return this.kube.informers.acquire<KObject>(
      {
        path: collectionPath(t),
        view: "applier-source",
        transform: applierView,
        list: () => this.kube.list<KObject>(t),
      },
      // Appliers' status moves at every apply; only a change of the source they read matters.
      (_type, o, prev) => {
        if (k.state !== "cached") return;
        if (prev && JSON.stringify(prev.spec) === JSON.stringify(o.spec)) return;
        // A project's sync windows may concern any Application of it.
        if (t.kind === "AppProject") this.tell("all");
        else this.tell(this.keysOfApplier(t.kind, o));
      },
    );
  }

  /**
   * Starts an applier kind's informer and waits for its first list. A kind the cluster does not
   * serve (404) is absent, one the role may not list (403) unlistable: their informer is stopped
   * (it would keep the worker unready) and the kind is looked for again every `rediscoverMs`.
   */
  private async startApplier(k: ApplierKind): Promise<boolean> {
    const h = this.acquireApplier(k);
    await h.informer.start();
    const err = h.informer.lastError;
    if (!h.informer.isSynced() && (isNotFound(err) || isForbidden(err))) {
      await h.release();
      this.notCached(k, isNotFound(err) ? "absent" : "unlistable");
      return false;
    }
    await h.synced();
    k.handle = h;
    k.state = "cached";
    k.reads.clear();
    return true;
  }

  private notCached(k: ApplierKind, state: "absent" | "unlistable") {
    k.state = state;
    if (state === "unlistable" && !k.warned) {
      k.warned = true;
      this.log?.warn(
        {
          kind: k.t.kind,
          permission: `list, watch ${k.t.plural}.${k.t.group}`,
          readTtlMs: this.readTtlMs,
        },
        `the worker's role may not list and watch ${k.t.plural}.${k.t.group}: each is read from the API server, an answer kept ${this.readTtlMs / 1000} s; grant the verbs list and watch on ${k.t.plural} (manifests/base/rbac.yaml, ClusterRole applygate-worker)`,
      );
    }
    if (!this.rediscovery && this.rediscoverMs > 0) {
      this.rediscovery = setInterval(() => void this.rediscover(), this.rediscoverMs);
      this.rediscovery.unref?.();
    }
  }

  /** Looks again for the applier kinds not cached: one small list each; a kind found is cached. */
  private async rediscover(): Promise<void> {
    for (const k of this.appliers) {
      if (k.state === "cached" || k.probing) continue;
      k.probing = true;
      try {
        const state = await this.probe(k.t);
        if (state !== "found") {
          this.notCached(k, state);
          continue;
        }
        if (!(await this.startApplier(k))) continue;
        this.log?.info(
          { kind: k.t.kind },
          `${k.t.plural}.${k.t.group} can be listed now: cached from here on`,
        );
        // The branches whose listing read it as not found (or from the API server) list again.
        if (k.t.kind === "AppProject") this.tell("all");
        else {
          const keys = new Set<string>();
          for (const o of k.handle?.informer.list() ?? [])
            for (const key of this.keysOfApplier(k.t.kind, o)) keys.add(key);
          this.tell(keys);
        }
      } catch (err) {
        this.log?.debug({ kind: k.t.kind, err: errorMessage(err) }, "looking for an applier kind failed");
      } finally {
        k.probing = false;
      }
    }
    if (this.appliers.every((k) => k.state === "cached") && this.rediscovery) {
      clearInterval(this.rediscovery);
      this.rediscovery = undefined;
    }
  }

  /** Whether a kind is served and listable now: one `list ?limit=1` of its collection. */
  private async probe(t: ResourceType): Promise<"found" | "absent" | "unlistable"> {
    try {
      await this.kube.request(() => this.kube.custom.listClusterCustomObject({ ...addressOf(t), limit: 1 }));
      return "found";
    } catch (err) {
      if (isNotFound(err)) return "absent";
      if (isForbidden(err)) return "unlistable";
      throw err;
    }
  }

  /** An object of an unlistable kind, read from the API server; one read per object per TTL. */
  private readUnlistable(k: ApplierKind, name: string, ns: string): Promise<KObject | undefined> {
    const key = `${ns}/${name}`;
    const now = this.now();
    const kept = k.reads.get(key);
    if (kept && now - kept.at < this.readTtlMs) return kept.answer;
    for (const [key2, r] of k.reads) if (now - r.at >= this.readTtlMs) k.reads.delete(key2);
    const answer = this.kube.get<KObject>(k.t, ns, name).then((o) => o && applierView(o));
    // A failure is kept too: a role without get costs one request per TTL, not one per listing.
    answer.catch(() => {});
    k.reads.set(key, { at: now, answer });
    return answer;
  }

  private acquire(
    t: ResourceType,
    changed: (o: KObject, prev: KObject | undefined, type: "add" | "update" | "delete") => void,
  ) {
    const h = this.kube.informer(t, { onChange: (type, o, prev) => changed(o, prev, type) });
    this.handles.push(h);
    return h;
  }

  /**
   * Lists every collection once. A kind the cluster does not serve (no ScopeGrant CRD, no Argo CD
   * claims) holds nothing: its informer is stopped, as the old lookups read a 404 as empty. An
   * applier kind not served or not listable is looked for again every `rediscoverMs`.
   */
  start(): Promise<void> {
    this.started ??= (async () => {
      await Promise.all([
        ...this.handles.map(async (h) => {
          await h.informer.start();
          if (!h.informer.isSynced() && isNotFound(h.informer.lastError)) {
            this.absent.add(h.informer.path);
            await h.release();
            return;
          }
          await h.synced();
        }),
        ...this.appliers.map((k) => this.startApplier(k)),
      ]);
    })();
    return this.started;
  }

  /** Every informer (Secrets included) whose last list landed, for readiness. */
  unsynced(): string[] {
    return this.kube.unsyncedWatches();
  }

  grants(): ScopeGrant[] {
    return this.grantsCache.list();
  }

  /** The cached objects of one of the kinds the decisions read, or undefined for a kind not cached here. */
  objects(
    kind: string,
  ): { get(name: string, ns: string): KObject | undefined; list(ns: string): KObject[] } | undefined {
    const k = this.appliers.find((x) => x.t.kind === kind);
    if (k) {
      // Not served: known absent, answered from memory until the look finds the kind.
      if (k.state === "absent") return { get: () => undefined, list: () => [] };
      if (k.state === "unlistable") return undefined;
      const h = k.handle;
      if (!h) return undefined;
      return { get: (name, ns) => h.informer.get(name, ns), list: (ns) => h.informer.list(ns) };
    }
    const t = Object.values(RESOURCES).find((r) => r.kind === kind);
    const h = t && this.handleOf(t);
    if (!h) return undefined;
    if (this.absent.has(h.informer.path)) return { get: () => undefined, list: () => [] };
    return { get: (name, ns) => h.informer.get(name, ns), list: (ns) => h.informer.list(ns) };
  }

  /**
   * An object of an applier kind the role may get but not list, read from the API server: one
   * read per object per `readTtlMs`, readers at once sharing it. Undefined for every other kind.
   */
  readUncached(kind: string, namespace: string, name: string): Promise<KObject | undefined> | undefined {
    const k = this.appliers.find((x) => x.t.kind === kind);
    return k?.state === "unlistable" ? this.readUnlistable(k, name, namespace) : undefined;
  }

  /** A credentials Secret, watched by name from its first read on. */
  async secret(namespace: string, name: string): Promise<SecretRead> {
    const key = `${namespace}/${name}`;
    let p = this.secrets.get(key);
    if (!p) {
      const h = this.kube.secretInformer(namespace, name, (_type, s) => this.secretChanged(s));
      p = h.informer.start().then(() => h);
      this.secrets.set(key, p);
    }
    const h = await p;
    const s = h.informer.get(name, namespace);
    if (h.informer.isSynced())
      return s
        ? { ok: true, data: fieldOf(secretFields, s, "data") ?? {} }
        : { ok: false, code: 404, message: `Secret ${name} does not exist` };
    const f = apiFailure(h.informer.lastError ?? {});
    return { ok: false, code: f.code, message: f.message };
  }

  /**
   * Soon after a change, stops watching every Secret nothing names any more (a reference changed,
   * its namespace deleted): such a watch would otherwise run for the process's life, and once the
   * namespace's RoleBinding is gone its relists would be refused for ever.
   */
  private sweepSecrets(): void {
    if (this.sweepPending || this.secrets.size === 0) return;
    this.sweepPending = true;
    setImmediate(() => {
      this.sweepPending = false;
      if (this.closed) return;
      const named = this.namedSecrets();
      for (const [key, p] of this.secrets) {
        if (named.has(key)) continue;
        this.secrets.delete(key);
        void p.then((h) => h.release());
      }
    });
  }

  /** The Secrets our objects name, as namespace/name: providers' credentials, signature keys. */
  private namedSecrets(): Set<string> {
    const named = new Set<string>();
    for (const p of this.providers.list()) {
      const ref = p.spec.credentialsSecretRef;
      if (ref) named.add(`${nsOf(p)}/${ref.name}`);
    }
    const signed = [
      ...this.targets.list(),
      ...[RESOURCES.fluxClaim, RESOURCES.argoCDClaim].flatMap((t) => this.handleOf(t)?.informer.list() ?? []),
    ];
    for (const o of signed) {
      const name = signatureSecretOf(o.spec);
      if (name) named.add(`${nsOf(o)}/${name}`);
    }
    return named;
  }

  /** The informer of one of the kinds this cache lists, once acquired. */
  private handleOf(t: ResourceType): InformerHandle<KObject> | undefined {
    return this.handles.find((x) => x.informer.path === collectionPath(t));
  }

  /** Calls `listener` for every change; returns the function that stops it. */
  onChange(listener: ChangeListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  private tell(keys: Set<string> | "all") {
    if (keys !== "all" && keys.size === 0) return;
    for (const l of [...this.listeners]) l(keys);
  }

  /** The branch key of every GitTarget whose GitProvider is there: every branch a GitTarget writes. */
  branchKeys(): string[] {
    // Asked at every change told (a claim's status moves at every apply): built once per version.
    if (this.branchKeyList?.version !== this.version)
      this.branchKeyList = { version: this.version, keys: [...this.keysOf(this.targets.list())] };
    return this.branchKeyList.keys;
  }

  /** The branch keys of GitTargets the cache holds, read already. */
  private keysOf(targets: readonly GitTarget[]): Set<string> {
    const keys = new Set<string>();
    for (const t of targets) {
      const pns = t.spec.providerRef.namespace ?? nsOf(t);
      const p = this.providers.get(t.spec.providerRef.name, pns);
      if (p) keys.add(branchKey({ namespace: pns, name: p.metadata.name }, p.spec.url, t.spec.branch));
    }
    return keys;
  }

  /**
   * The branch keys of every GitTarget writing the same branch of the same repository as these
   * (through any GitProvider): which of them holds a folder may have moved (queue/tenancy.ts).
   */
  private keysOfSharedBranches(targets: Array<KObject | undefined>): Set<string> {
    const read: GitTarget[] = [];
    for (const o of targets) {
      const t = o && readGitTarget(o);
      if (t?.ok) read.push(t.value);
    }
    const keys = this.keysOf(read);
    const places = new Set<string>();
    for (const t of read) {
      const at = this.shared.placeOfTarget(t);
      if (at !== undefined) places.add(at);
    }
    for (const place of places) for (const k of this.keysOf(this.shared.at(place))) keys.add(k);
    return keys;
  }

  private targetsOf(match: (t: GitTarget) => boolean): Set<string> {
    return this.keysOf(this.targets.list().filter(match));
  }

  /**
   * A GitProvider changed: its own branches, and every branch of a GitProvider naming the same
   * repository (as it was and as it is), since which of them holds the repository may have moved.
   */
  private providerChanged(o: KObject, prev: KObject | undefined) {
    const repos = new Set<string>();
    for (const x of [o, prev]) {
      const p = x && readGitProvider(x);
      const repo = p?.ok ? repositoryOf(p.value.spec.url) : undefined;
      if (repo !== undefined) repos.add(repo);
    }
    const ns = nsOf(o);
    const name = o.metadata.name;
    const concerned = new Set(
      this.providers
        .list()
        .filter((p) => repos.has(this.shared.repositoryOf(p) ?? ""))
        .map((p) => `${nsOf(p)}/${p.metadata.name}`),
    );
    concerned.add(`${ns}/${name}`);
    const keys = this.targetsOf((t) =>
      concerned.has(`${t.spec.providerRef.namespace ?? nsOf(t)}/${t.spec.providerRef.name}`),
    );
    // A GitProvider gone or made again for another URL: the branches under its old URL too.
    const old = prev && readGitProvider(prev);
    if (old?.ok)
      for (const t of this.targets.list())
        if (t.spec.providerRef.name === name && (t.spec.providerRef.namespace ?? nsOf(t)) === ns)
          keys.add(branchKey({ namespace: ns, name }, old.value.spec.url, t.spec.branch));
    this.tell(keys);
  }

  private secretChanged(s: KObject) {
    this.version++;
    const ns = nsOf(s);
    const providers = this.providers
      .list(ns)
      .filter((p) => p.spec.credentialsSecretRef?.name === s.metadata.name)
      .map((p) => p.metadata.name);
    const keys = this.targetsOf(
      (t) =>
        (providers.includes(t.spec.providerRef.name) && (t.spec.providerRef.namespace ?? nsOf(t)) === ns) ||
        (nsOf(t) === ns && signatureSecretOf(t.spec) === s.metadata.name),
    );
    // A keys Secret of signature approval concerns the branches of the claims naming it.
    for (const t of [RESOURCES.fluxClaim, RESOURCES.argoCDClaim]) {
      for (const c of this.handleOf(t)?.informer.list(ns) ?? [])
        if (signatureSecretOf(c.spec) === s.metadata.name)
          for (const k of this.keysOfClaim(t.kind, c)) keys.add(k);
    }
    this.tell(keys);
  }

  /** The branch keys of the GitTargets naming this claim, from an index kept per version. */
  private keysOfClaim(kind: string, o: { metadata: { namespace?: string; name: string } }): Set<string> {
    if (this.byClaim?.version !== this.version) {
      const targets = new Map<string, GitTarget[]>();
      for (const t of this.targets.list()) {
        const ref = t.spec.claimRef;
        if (!ref) continue;
        const key = `${ref.kind}/${ref.namespace ?? nsOf(t)}/${ref.name}`;
        const list = targets.get(key) ?? [];
        list.push(t);
        targets.set(key, list);
      }
      this.byClaim = { version: this.version, targets };
    }
    return this.keysOf(this.byClaim.targets.get(`${kind}/${nsOf(o)}/${o.metadata.name}`) ?? []);
  }

  /** The branch keys of GitTargets whose claim holds this applier. */
  private keysOfApplier(kind: string, o: KObject): Set<string> {
    const claimType = kind === "Kustomization" ? RESOURCES.fluxClaim : RESOURCES.argoCDClaim;
    const keys = new Set<string>();
    for (const c of this.claimsByApplier.get(claimType.kind)?.naming(nsOf(o), o.metadata.name) ?? [])
      for (const k of this.keysOfClaim(claimType.kind, c)) keys.add(k);
    return keys;
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.rediscovery) clearInterval(this.rediscovery);
    this.rediscovery = undefined;
    this.listeners.clear();
    await this.kube.close();
  }
}
