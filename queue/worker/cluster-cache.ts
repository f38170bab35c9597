/**
 * The worker's view of the cluster: the shared informers of the cluster-access layer
 * (queue/kube/) for GitProviders, GitTargets, ScopeGrants, claims and ApplierGrants, started and
 * listed once per process, and one watch per credentials Secret a GitProvider names (a field
 * selector `metadata.name=`, never the Secrets of a whole namespace). Branch lookups and listings
 * read these caches, so an idle branch costs the API server nothing; a change of a GitTarget,
 * GitProvider, claim or Secret tells the branches it concerns at once.
 */
import type * as k8s from "@kubernetes/client-node";
import { branchKey } from "../contract.js";
import { type GitProvider, type GitTarget, type ScopeGrant, scopeGrant } from "../crds/index.js";
import {
  apiFailure,
  type InformerHandle,
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

const SCOPE_GRANT: ResourceType = RESOURCES.scopeGrant;

/** A credentials Secret as the cache knows it: its data, or why it cannot be read. */
export type SecretRead =
  | { ok: true; data: Record<string, string> }
  | { ok: false; code: number | undefined; message: string };

/** Told of a change: the branch keys it concerns, or "all" when any branch may be concerned. */
export type ChangeListener = (keys: Set<string> | "all") => void;

const nsOf = (o: { metadata: { namespace?: string } }) => o.metadata.namespace ?? "default";

export class ClusterCache {
  readonly kube: Kube;
  readonly providers: TypedCache<GitProvider>;
  readonly targets: TypedCache<GitTarget>;
  readonly grantsCache: TypedCache<ScopeGrant>;
  /** Paths of the kinds the cluster does not serve. */
  private readonly absent = new Set<string>();
  private readonly handles: InformerHandle<KObject>[] = [];
  private readonly secrets = new Map<string, Promise<InformerHandle<KObject>>>();
  private readonly listeners = new Set<ChangeListener>();
  private started: Promise<void> | undefined;

  constructor(kc: k8s.KubeConfig | Kube, log?: Logger) {
    this.kube = kc instanceof Kube ? kc : new Kube(kc, log ? { log } : {});
    const providers = this.acquire(RESOURCES.gitProvider, (o, prev) => this.providerChanged(o, prev));
    const targets = this.acquire(RESOURCES.gitTarget, (o, prev) => this.tell(this.keysOfTargets([o, prev])));
    this.providers = new TypedCache(providers.informer, readGitProvider, log);
    this.targets = new TypedCache(targets.informer, readGitTarget, log);
    for (const t of [RESOURCES.fluxClaim, RESOURCES.argoCDClaim])
      this.acquire(t, (o, prev) => this.tell(this.keysOfClaim(t.kind, o, prev)));
    this.acquire(RESOURCES.applierGrant, () => this.tell("all"));
    const grants = this.acquire(SCOPE_GRANT, () => this.tell("all"));
    this.grantsCache = new TypedCache(grants.informer, (o) => readObject(scopeGrant, o), log);
  }

  private acquire(t: ResourceType, changed: (o: KObject, prev: KObject | undefined) => void) {
    const h = this.kube.informer(t, { onChange: (_type, o, prev) => changed(o, prev) });
    this.handles.push(h);
    return h;
  }

  /**
   * Lists every collection once. A kind the cluster does not serve (no ScopeGrant CRD, no Argo CD
   * claims) holds nothing: its informer is stopped, as the old lookups read a 404 as empty.
   */
  start(): Promise<void> {
    this.started ??= (async () => {
      await Promise.all(
        this.handles.map(async (h) => {
          await h.informer.start();
          if (!h.informer.isSynced() && isNotFound(h.informer.lastError)) {
            this.absent.add(h.informer.path);
            await h.release();
            return;
          }
          await h.synced();
        }),
      );
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
      const h = this.kube.informers.acquire<KObject>(
        {
          path: `/api/v1/namespaces/${namespace}/secrets`,
          fieldSelector: `metadata.name=${name}`,
          list: async () => {
            const out = await this.kube.core.listNamespacedSecret({
              namespace,
              fieldSelector: `metadata.name=${name}`,
            });
            const items = out.items.map((s) => ({ ...s, kind: "Secret" }) as unknown as KObject);
            return { items, resourceVersion: out.metadata?.resourceVersion ?? "" };
          },
        },
        (_type, s) => this.secretChanged(s),
      );
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
    const ns = nsOf(s);
    const providers = this.providers
      .list(ns)
      .filter((p) => p.spec.credentialsSecretRef?.name === s.metadata.name)
      .map((p) => p.metadata.name);
    this.tell(
      this.targetsOf(
        (t) =>
          providers.includes(t.spec.providerRef.name) && (t.spec.providerRef.namespace ?? nsOf(t)) === ns,
      ),
    );
  }

  private keysOfClaim(kind: string, o: KObject, _prev: KObject | undefined): Set<string> {
    const ns = nsOf(o);
    return this.targetsOf((t) => {
      const ref = t.spec.claimRef;
      return !!ref && ref.kind === kind && ref.name === o.metadata.name && (ref.namespace ?? nsOf(t)) === ns;
    });
  }

  async close(): Promise<void> {
    this.listeners.clear();
    await this.kube.close();
  }
}
