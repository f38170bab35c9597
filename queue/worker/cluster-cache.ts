/**
 * The worker's view of the cluster: the shared informers of the cluster-access layer
 * (queue/kube/) for GitProviders, GitTargets, ScopeGrants, claims and ApplierGrants, started and
 * listed once per process, and one watch per Secret our objects name (a GitProvider's credentials,
 * a claim's keys for signature approval; a field selector `metadata.name=`, never the Secrets of a
 * whole namespace). Branch lookups and listings
 * read these caches, so an idle branch costs the API server nothing; a change of a GitTarget,
 * GitProvider, claim or Secret tells the branches it concerns at once.
 */
import type * as k8s from "@kubernetes/client-node";
import { branchKey } from "../contract.js";
import { type GitProvider, type GitTarget, type ScopeGrant, scopeGrant } from "../crds/index.js";
import {
  apiFailure,
  collectionPath,
  type InformerHandle,
  isForbidden,
  isNotFound,
  type KObject,
  Kube,
  RESOURCES,
  type ResourceType,
  readGitProvider,
  readGitTarget,
  readObject,
  TypedCache,
} from "../kube/index.js";
import type { Logger } from "../log.js";

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
  const spec = (o.spec ?? {}) as Record<string, unknown>;
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

/** A credentials Secret as the cache knows it: its data, or why it cannot be read. */
export type SecretRead =
  | { ok: true; data: Record<string, string> }
  | { ok: false; code: number | undefined; message: string };

/** Told of a change: the branch keys it concerns, or "all" when any branch may be concerned. */
export type ChangeListener = (keys: Set<string> | "all") => void;

const nsOf = (o: { metadata: { namespace?: string } }) => o.metadata.namespace ?? "default";

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
  readonly grantsCache: TypedCache<ScopeGrant>;
  /** Paths of the kinds the cluster does not serve. */
  private readonly absent = new Set<string>();
  /** Paths of applier kinds not cached (not served, or not listable): read from the API server. */
  private readonly uncached = new Set<string>();
  private readonly handles: InformerHandle<KObject>[] = [];
  private readonly applierHandles: InformerHandle<KObject>[] = [];
  private readonly secrets = new Map<string, Promise<InformerHandle<KObject>>>();
  private readonly listeners = new Set<ChangeListener>();
  private started: Promise<void> | undefined;
  /**
   * Bumped by every change of what a branch spec is built from (a GitProvider, a GitTarget's spec,
   * a ScopeGrant, a credentials Secret), never by a status write: lookups rebuild only then.
   */
  version = 0;
  /** GitTargets by the claim they name, at the version they were indexed for. */
  private byClaim: { version: number; targets: Map<string, KObject[]> } | undefined;

  constructor(kc: k8s.KubeConfig | Kube, log?: Logger) {
    this.kube = kc instanceof Kube ? kc : new Kube(kc, log ? { log } : {});
    const providers = this.acquire(RESOURCES.gitProvider, (o, prev) => {
      this.version++;
      this.providerChanged(o, prev);
    });
    const targets = this.acquire(RESOURCES.gitTarget, (o, prev, type) => {
      // A status write (ours, at every publication) changes nothing a branch reads of it.
      if (type === "update" && prev && sameSpec(prev, o)) return;
      this.version++;
      this.tell(this.keysOfTargets([o, prev]));
    });
    this.providers = new TypedCache(providers.informer, readGitProvider, log);
    this.targets = new TypedCache(targets.informer, readGitTarget, log);
    for (const t of [RESOURCES.fluxClaim, RESOURCES.argoCDClaim, RESOURCES.webhookClaim])
      this.acquire(t, (o, prev) => this.tell(this.keysOfClaim(t.kind, o, prev)));
    this.acquire(RESOURCES.applierGrant, () => this.tell("all"));
    const grants = this.acquire(SCOPE_GRANT, () => {
      this.version++;
      this.tell("all");
    });
    this.grantsCache = new TypedCache(grants.informer, (o) => readObject(scopeGrant, o), log);
    for (const t of Object.values(APPLIER_TYPES)) {
      const h = this.kube.informers.acquire<KObject>(
        {
          path: collectionPath(t),
          view: "applier-source",
          transform: applierView,
          list: () => this.kube.list<KObject>(t),
        },
        // Appliers' status moves at every apply; only a change of the source they read matters.
        (_type, o, prev) => {
          if (prev && JSON.stringify(prev.spec) === JSON.stringify(o.spec)) return;
          // A project's sync windows may concern any Application of it.
          if (t.kind === "AppProject") this.tell("all");
          else this.tell(this.keysOfApplier(t.kind, o));
        },
      );
      this.applierHandles.push(h);
    }
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
   * claims) holds nothing: its informer is stopped, as the old lookups read a 404 as empty.
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
        // An applier kind the cluster does not serve, or the worker may not list (a role from
        // before appliers were cached), is read from the API server as before.
        ...this.applierHandles.map(async (h) => {
          await h.informer.start();
          if (
            !h.informer.isSynced() &&
            (isNotFound(h.informer.lastError) || isForbidden(h.informer.lastError))
          ) {
            this.uncached.add(h.informer.path);
            await h.release();
            return;
          }
          await h.synced();
        }),
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
    const applier = Object.values(APPLIER_TYPES).find((r) => r.kind === kind);
    if (applier) {
      const h = this.applierHandles.find((x) => x.informer.path === collectionPath(applier));
      if (!h || this.uncached.has(h.informer.path)) return undefined;
      return { get: (name, ns) => h.informer.get(name, ns), list: (ns) => h.informer.list(ns) };
    }
    const t = Object.values(RESOURCES).find((r) => r.kind === kind);
    const h = t && this.handles.find((x) => x.informer.path === `/apis/${t.group}/${t.version}/${t.plural}`);
    if (!h) return undefined;
    if (this.absent.has(h.informer.path)) return { get: () => undefined, list: () => [] };
    return { get: (name, ns) => h.informer.get(name, ns), list: (ns) => h.informer.list(ns) };
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
    const s = h.informer.get(name, namespace) as { data?: Record<string, string> } | undefined;
    if (h.informer.isSynced())
      return s
        ? { ok: true, data: s.data ?? {} }
        : { ok: false, code: 404, message: `Secret ${name} does not exist` };
    const f = apiFailure(h.informer.lastError ?? {});
    return { ok: false, code: f.code, message: f.message };
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

  /** The branch keys of GitTargets (as they were and as they are). */
  private keysOfTargets(targets: Array<KObject | undefined>): Set<string> {
    const keys = new Set<string>();
    for (const o of targets) {
      const t = o && readGitTarget(o);
      if (!t?.ok) continue;
      const pns = t.value.spec.providerRef.namespace ?? nsOf(t.value);
      const p = this.providers.get(t.value.spec.providerRef.name, pns);
      if (p) keys.add(branchKey(p.spec.url, t.value.spec.branch));
    }
    return keys;
  }

  private targetsOf(match: (t: GitTarget) => boolean): Set<string> {
    return this.keysOfTargets(this.targets.list().filter(match) as unknown as KObject[]);
  }

  private providerChanged(o: KObject, prev: KObject | undefined) {
    const at = (p: KObject) => ({ ns: nsOf(p), name: p.metadata.name });
    const { ns, name } = at(o);
    const keys = this.targetsOf(
      (t) => t.spec.providerRef.name === name && (t.spec.providerRef.namespace ?? nsOf(t)) === ns,
    );
    // A GitProvider's URL changed: the branches under its old URL are concerned as well.
    const old = prev && readGitProvider(prev);
    if (old?.ok)
      for (const t of this.targets.list())
        if (t.spec.providerRef.name === name && (t.spec.providerRef.namespace ?? nsOf(t)) === ns)
          keys.add(branchKey(old.value.spec.url, t.spec.branch));
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
      const h = this.handles.find((x) => x.informer.path === collectionPath(t));
      for (const c of h?.informer.list(ns) ?? [])
        if (signatureSecretOf(c.spec) === s.metadata.name)
          for (const k of this.keysOfClaim(t.kind, c, undefined)) keys.add(k);
    }
    this.tell(keys);
  }

  /** The branch keys of the GitTargets naming this claim, from an index kept per version. */
  private keysOfClaim(kind: string, o: KObject, _prev: KObject | undefined): Set<string> {
    if (this.byClaim?.version !== this.version) {
      const targets = new Map<string, KObject[]>();
      for (const raw of this.targets.list()) {
        const ref = raw.spec.claimRef;
        if (!ref) continue;
        const key = `${ref.kind}/${ref.namespace ?? nsOf(raw)}/${ref.name}`;
        const list = targets.get(key) ?? [];
        list.push(raw as unknown as KObject);
        targets.set(key, list);
      }
      this.byClaim = { version: this.version, targets };
    }
    return this.keysOfTargets(this.byClaim.targets.get(`${kind}/${nsOf(o)}/${o.metadata.name}`) ?? []);
  }

  /** The branch keys of GitTargets whose claim holds this applier. */
  private keysOfApplier(kind: string, o: KObject): Set<string> {
    const ns = nsOf(o);
    const claimType = kind === "Kustomization" ? RESOURCES.fluxClaim : RESOURCES.argoCDClaim;
    const field = kind === "Kustomization" ? "kustomizationRef" : "applicationRef";
    const h = this.handles.find((x) => x.informer.path === collectionPath(claimType));
    const keys = new Set<string>();
    for (const c of h?.informer.list() ?? []) {
      const ref = ((c.spec ?? {}) as Record<string, { name?: string; namespace?: string } | undefined>)[
        field
      ];
      if (ref?.name !== o.metadata.name || (ref.namespace ?? nsOf(c)) !== ns) continue;
      for (const k of this.keysOfClaim(claimType.kind, c, undefined)) keys.add(k);
    }
    return keys;
  }

  async close(): Promise<void> {
    this.listeners.clear();
    await this.kube.close();
  }
}
