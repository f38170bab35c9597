/**
 * The catalog read from the cluster, through the cluster-access layer (queue/kube/): GitProviders,
 * GitTargets and WebhookClaims from the layer's shared informers (all namespaces, or one), and
 * ScopeGrants, being cluster-scoped, from a cluster-wide one; one informer per kind, started and
 * listed once, each object parsed by the layer's typed readers. The layer re-watches a watch that
 * ends, lists again on 410 Gone and retries any other failure with backoff, so the catalog has no
 * restart loop of its own. Secrets are never listed or watched: the gateway may only `get` a
 * Secret by name, in namespaces that opted in (docs/security.md), so the catalog reads exactly the
 * Secrets those objects name, at once when a name appears and again every `secretRefreshMs` so a
 * rotation takes effect without a restart.
 */
import type { KubeConfig } from "@kubernetes/client-node";
import { backoffMs } from "../queue/backoff.js";
import {
  type GitProvider,
  type GitTarget,
  type ScopeGrant,
  scopeGrant,
  type WebhookClaim,
  webhookClaim,
} from "../queue/crds/index.js";
import { errorMessage } from "../queue/errors.js";
import {
  apiFailure,
  type InformerHandle,
  isServerBusy,
  type KObject,
  Kube,
  RESOURCES,
  type ReadResult,
  type ResourceType,
  readGitProvider,
  readGitTarget,
  readObject,
  type StatusWriter,
  statusWriter,
  TypedCache,
} from "../queue/kube/index.js";
import { type Logger, silentLogger } from "../queue/log.js";
import {
  buildSnapshot,
  type Catalog,
  type CatalogSnapshot,
  EMPTY_SNAPSHOT,
  type SecretData,
  secretValues,
} from "./catalog.js";
import { providerStatus, statusDiffers } from "./provider-status.js";
import {
  DEFAULT_SECRET_REFRESH_MS,
  dropsValue,
  namedSecrets,
  outcomeChanged,
  type ReadOutcome,
  type SecretRef,
  secretKey,
} from "./secret-refs.js";

/** Runs `tick` every `ms` until the returned function is called. Injected so tests refresh on demand. */
export interface RefreshTimer {
  every(ms: number, tick: () => Promise<void>): () => void;
}

export const intervalTimer: RefreshTimer = {
  every(ms, tick) {
    const t = setInterval(() => void tick(), ms);
    t.unref();
    return () => clearInterval(t);
  },
};

export interface ClusterCatalogOptions {
  kubeConfig: KubeConfig;
  /** Watch only this namespace; all when unset. */
  namespace?: string | undefined;
  log?: Logger;
  /** First restart delay after an informer error; doubles up to `maxBackoffMs`. */
  backoffMs?: number;
  maxBackoffMs?: number;
  /** How often every named Secret is read again (rotation, a Secret created late, access granted). */
  secretRefreshMs?: number;
  timer?: RefreshTimer;
  /** Write each GitProvider's status (Ready, webhookPath); default true. */
  writeStatus?: boolean;
  now?: () => Date;
}

interface CachedSecret {
  outcome?: ReadOutcome;
  data?: Record<string, string>;
}

/** One kind the catalog watches: the layer's shared informer and its objects parsed. */
interface Watched<T> {
  handle: InformerHandle<KObject>;
  cache: TypedCache<T>;
}

const DEFAULT_BACKOFF_MS = 500;
const DEFAULT_MAX_BACKOFF_MS = 30_000;

export class ClusterCatalog implements Catalog {
  #snapshot: CatalogSnapshot = EMPTY_SNAPSHOT;
  #loaded = false;
  #stopping = false;
  #rebuildPending = false;
  #stopRefresh: (() => void) | undefined;
  /** The cluster-access client the catalog reads through; its informers are the catalog's, one per kind. */
  readonly kube: Kube;
  readonly #providers: Watched<GitProvider>;
  readonly #targets: Watched<GitTarget>;
  readonly #grants: Watched<ScopeGrant>;
  readonly #webhookClaims: Watched<WebhookClaim>;
  /** Namespaces, for their Pod Security labels. */
  readonly #namespaces: InformerHandle<KObject>;
  readonly #status: StatusWriter<"gitProvider", "gateway">;
  /** The status writer's pass under way, and whether another must follow it. */
  #statusPass: Promise<void> | undefined;
  #statusAgain = false;
  /** Status write failures already logged, by provider and code, so each is logged once. */
  readonly #statusFailures = new Set<string>();
  /** The Secrets currently named, and what the last read of each gave. */
  #refs = new Map<string, SecretRef>();
  readonly #secrets = new Map<string, CachedSecret>();
  readonly #reading = new Map<string, Promise<void>>();
  readonly #log: Logger;

  private constructor(private readonly opts: ClusterCatalogOptions) {
    this.#log = opts.log ?? silentLogger();
    const base = opts.backoffMs ?? DEFAULT_BACKOFF_MS;
    const max = opts.maxBackoffMs ?? DEFAULT_MAX_BACKOFF_MS;
    this.kube = new Kube(opts.kubeConfig, {
      log: this.#log,
      backoffMs: (failures) => backoffMs({ initialMs: base, maxMs: max }, failures),
    });
    this.#status = statusWriter(this.kube, "gitProvider", "gateway");
    const ns = opts.namespace;
    const watch = <T>(
      t: ResourceType,
      read: (o: unknown) => ReadResult<T>,
      namespace: string | undefined,
    ): Watched<T> => {
      const handle = this.kube.informer(t, {
        ...(namespace ? { namespace } : {}),
        onChange: () => this.#scheduleRebuild(),
      });
      return { handle, cache: new TypedCache(handle.informer, read, this.#log) };
    };
    this.#providers = watch(RESOURCES.gitProvider, readGitProvider, ns);
    this.#targets = watch(RESOURCES.gitTarget, readGitTarget, ns);
    this.#webhookClaims = watch(RESOURCES.webhookClaim, (o) => readObject(webhookClaim, o), ns);
    // ScopeGrants are cluster-scoped: watched cluster-wide even with a namespace set.
    this.#grants = watch(RESOURCES.scopeGrant, (o) => readObject(scopeGrant, o), undefined);
    this.#namespaces = this.kube.namespaceInformer(() => this.#scheduleRebuild());
  }

  /**
   * Starts watching and resolves once GitProviders and GitTargets were listed and every named
   * Secret read once; rejects (and stops) when the first list of either fails.
   */
  static async start(opts: ClusterCatalogOptions): Promise<ClusterCatalog> {
    const c = new ClusterCatalog(opts);
    try {
      await c.#startAll();
    } catch (err) {
      await c.close();
      throw err;
    }
    return c;
  }

  async #startAll(): Promise<void> {
    // Without the ScopeGrant kind installed nobody holds a grant (without the WebhookClaim kind,
    // no report is expected): start without, the layer keeps trying.
    await Promise.all([
      firstList(this.#providers.handle),
      firstList(this.#targets.handle),
      this.#grants.handle.informer.start(),
      this.#webhookClaims.handle.informer.start(),
      // Unread, a namespace holds the default level (baseline), never a weaker one.
      this.#namespaces.informer.start(),
    ]);
    this.#rebuild();
    await Promise.all(this.#reading.values());
    this.#rebuild();
    this.#loaded = true;
    this.#scheduleStatus();
    const timer = this.opts.timer ?? intervalTimer;
    this.#stopRefresh = timer.every(this.opts.secretRefreshMs ?? DEFAULT_SECRET_REFRESH_MS, () =>
      this.refreshSecrets(),
    );
  }

  /** Reads every named Secret again; resolves when all reads ended. Called by the refresh timer. */
  async refreshSecrets(): Promise<void> {
    await Promise.all([...this.#refs.keys()].map((key) => this.#read(key)));
  }

  /** One read per Secret at a time: a read already under way answers for a second caller. */
  #read(key: string): Promise<void> {
    const running = this.#reading.get(key);
    if (running) return running;
    const p = this.#readOnce(key).finally(() => this.#reading.delete(key));
    this.#reading.set(key, p);
    return p;
  }

  async #readOnce(key: string): Promise<void> {
    const ref = this.#refs.get(key);
    if (!ref || this.#stopping) return;
    // A namespace being deleted loses its RoleBindings and Secrets in no set order: a read there
    // meets a 403 or 404 that says nothing. The last value read stays until what names it goes.
    if (this.#namespaces.informer.get(ref.namespace)?.metadata.deletionTimestamp) return;
    let outcome: ReadOutcome;
    let data: Record<string, string> | undefined;
    try {
      const s = await this.kube.request(() =>
        this.kube.core.readNamespacedSecret({ name: ref.name, namespace: ref.namespace }),
      );
      outcome = { ok: true, resourceVersion: s.metadata?.resourceVersion ?? "" };
      data = secretValues({ data: s.data ?? null, stringData: s.stringData ?? null });
    } catch (err) {
      outcome = { ok: false, status: apiFailure(err).code ?? 0 };
    }
    // Dropped while the read was under way (no longer named, or stopping): forget it.
    const current = this.#refs.get(key);
    if (!current || this.#stopping) return;
    const cached = this.#secrets.get(key) ?? {};
    const before = cached.outcome;
    if (outcomeChanged(before, outcome)) this.#logOutcome(current, outcome);
    cached.outcome = outcome;
    let changed = false;
    if (outcome.ok) {
      changed = !(before?.ok && before.resourceVersion === outcome.resourceVersion);
      cached.data = data;
    } else if (dropsValue(outcome.status) && cached.data) {
      cached.data = undefined;
      changed = true;
    }
    this.#secrets.set(key, cached);
    if (changed) this.#scheduleRebuild();
    else if (this.#loaded && outcomeChanged(before, outcome)) this.#scheduleStatus();
  }

  /** Names the Secret and the status, never a value. */
  #logOutcome(ref: SecretRef, outcome: ReadOutcome): void {
    const fields = { secret: `${ref.namespace}/${ref.name}`, usedBy: ref.usedBy };
    if (outcome.ok) this.#log.info(fields, "Secret read");
    else if (dropsValue(outcome.status))
      this.#log.warn(
        { ...fields, status: outcome.status },
        "Secret cannot be read; what names it stays not ready (retried on each refresh)",
      );
    else
      this.#log.warn(
        { ...fields, status: outcome.status },
        "Secret read failed; keeping the last value read (retried on each refresh)",
      );
  }

  #scheduleRebuild(): void {
    if (this.#rebuildPending) return;
    this.#rebuildPending = true;
    setImmediate(() => {
      this.#rebuildPending = false;
      if (!this.#stopping) this.#rebuild();
    });
  }

  /** Parses the watched objects, reads newly named Secrets at once, forgets unnamed ones, swaps the snapshot. */
  #rebuild(): void {
    const providers = this.#providers.cache.list();
    const targets = this.#targets.cache.list();
    const grants = this.#grants.cache.list();
    const webhookClaims = this.#webhookClaims.cache.list();
    const refs = namedSecrets(providers, targets, webhookClaims);
    const added = [...refs.keys()].filter((key) => !this.#refs.has(key));
    for (const key of this.#secrets.keys()) if (!refs.has(key)) this.#secrets.delete(key);
    this.#refs = refs;
    for (const key of added) void this.#read(key);

    const secrets: SecretData[] = [];
    for (const [key, cached] of this.#secrets) {
      const ref = refs.get(key);
      if (ref && cached.data) secrets.push({ namespace: ref.namespace, name: ref.name, data: cached.data });
    }
    const namespaces = this.#namespaces.informer.list().map((n) => ({
      name: n.metadata.name,
      ...(n.metadata.labels ? { labels: n.metadata.labels } : {}),
    }));
    this.#snapshot = buildSnapshot({ providers, targets, secrets, grants, webhookClaims, namespaces });
    if (this.#loaded) this.#scheduleStatus();
  }

  /** Runs a status pass now, or once more after the one under way. */
  #scheduleStatus(): void {
    if (this.opts.writeStatus === false || this.#stopping) return;
    if (this.#statusPass) {
      this.#statusAgain = true;
      return;
    }
    this.#statusPass = this.#writeStatuses().finally(() => {
      this.#statusPass = undefined;
      if (this.#statusAgain) {
        this.#statusAgain = false;
        this.#scheduleStatus();
      }
    });
  }

  /** Writes the status of every GitProvider whose status differs from what the gateway knows. */
  async #writeStatuses(): Promise<void> {
    const now = (this.opts.now ?? (() => new Date()))();
    for (const raw of this.#providers.handle.informer.list()) {
      if (this.#stopping) return;
      const parsed = this.#providers.cache.of(raw);
      if (!parsed.ok) continue;
      const p = parsed.value;
      const namespace = p.metadata.namespace ?? "default";
      const name = p.metadata.name;
      const entry = this.#snapshot.providers.find((e) => e.namespace === namespace && e.name === name);
      const current = p.status;
      const generation = raw.metadata.generation;
      const secret = this.#secrets.get(secretKey(namespace, p.spec.webhookSecretRef.name))?.outcome;
      const next = providerStatus(
        {
          namespace,
          webhookSecretName: p.spec.webhookSecretRef.name,
          ...(generation !== undefined ? { generation } : {}),
          ...(entry?.hookPath ? { hookPath: entry.hookPath } : {}),
          ...(secret ? { secret } : {}),
          ...(entry?.refused ? { refused: entry.refused } : {}),
        },
        current?.conditions,
        now,
      );
      if (!statusDiffers(current, next)) continue;
      try {
        // Unguarded, as every field written is the gateway's own and computed from the cached
        // object: a change since makes the informer call for another pass.
        await this.#status.patch(RESOURCES.gitProvider, namespace, name, next, undefined);
      } catch (err) {
        const code = apiFailure(err).code ?? 0;
        if (code === 404) continue; // deleted meanwhile
        const key = `${namespace}/${name}:${code}`;
        if (this.#statusFailures.has(key)) continue;
        this.#statusFailures.add(key);
        this.#log.warn(
          { gitProvider: `${namespace}/${name}`, status: code, err: errorMessage(err) },
          "cannot write the GitProvider's status (retried on each change)",
        );
      }
    }
  }

  snapshot(): CatalogSnapshot {
    return this.#snapshot;
  }
  loaded(): boolean {
    return this.#loaded;
  }
  async close(): Promise<void> {
    this.#stopping = true;
    this.#stopRefresh?.();
    await this.kube.close();
    await this.#statusPass;
  }

  /** Resolves once no status write is under way (for tests). */
  async statusSettled(): Promise<void> {
    while (this.#statusPass) await this.#statusPass;
  }
}

/**
 * Starts a kind's informer and waits for its first list; throws that list's failure (no CRD, no
 * RBAC) instead of waiting for a retry. A busy server (429, 5xx: a kind's storage still
 * initializing just after its CRD was made answers 429) is waited out: the informer retries and
 * the list lands. The layer resolves `start()` after the first list, landed or failed, and only a
 * landed one resolves `whenSynced()`, before `start()` does.
 */
async function firstList(handle: InformerHandle<KObject>): Promise<void> {
  const { informer } = handle;
  const listed = await Promise.race([
    informer.whenSynced().then(() => true),
    informer.start().then(() => false),
  ]);
  if (listed) return;
  if (informer.lastError !== undefined && isServerBusy(informer.lastError)) return informer.whenSynced();
  throw informer.lastError ?? new Error(`first list of ${informer.path} failed`);
}
