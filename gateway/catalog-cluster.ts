/**
 * The catalog read from the cluster. GitProviders and GitTargets come from informers (all
 * namespaces, or one); ScopeGrants, being cluster-scoped, from a cluster-wide informer. Secrets are never listed or watched: the gateway may only `get` a Secret
 * by name, in namespaces that opted in (docs/security.md), so the catalog reads exactly the
 * Secrets those objects name, at once when a name appears and again every `secretRefreshMs` so a
 * rotation takes effect without a restart.
 *
 * An informer that stops on an error is started again with backoff (the 1.4.0 client does not do
 * it itself); `stop()` also fires an error, so a flag guards the restart.
 */
import {
  ApiException,
  CoreV1Api,
  CustomObjectsApi,
  type Informer,
  KubeConfig,
  type KubernetesListObject,
  type KubernetesObject,
  makeInformer,
  type ObjectCache,
  PatchStrategy,
  setHeaderOptions,
} from "@kubernetes/client-node";
import type { ZodType, ZodTypeDef } from "zod";
import {
  GIT_PROVIDER_PLURAL,
  GIT_TARGET_PLURAL,
  GROUP,
  gitProvider,
  gitTarget,
  SCOPE_GRANT_PLURAL,
  scopeGrant,
  VERSION,
  WEBHOOK_CLAIM_PLURAL,
  webhookClaim,
} from "../queue/crds/index.js";
import { addressOf, ownedStatus, RESOURCES, statusFieldManager } from "../queue/kube/index.js";
import { type Logger, silentLogger } from "../queue/log.js";
import {
  buildSnapshot,
  type Catalog,
  type CatalogSnapshot,
  EMPTY_SNAPSHOT,
  type SecretData,
  secretValues,
} from "./catalog.js";
import { type ProviderCondition, providerStatus, statusDiffers } from "./provider-status.js";
import {
  DEFAULT_SECRET_REFRESH_MS,
  dropsValue,
  namedSecrets,
  outcomeChanged,
  type ReadOutcome,
  type SecretRef,
  secretKey,
} from "./secret-refs.js";

type Watched<T extends KubernetesObject> = Informer<T> & ObjectCache<T>;

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

const MERGE = setHeaderOptions("Content-Type", PatchStrategy.MergePatch);

interface CachedSecret {
  outcome?: ReadOutcome;
  data?: Record<string, string>;
}

export class ClusterCatalog implements Catalog {
  #snapshot: CatalogSnapshot = EMPTY_SNAPSHOT;
  #loaded = false;
  #stopping = false;
  #rebuildPending = false;
  #timers = new Set<NodeJS.Timeout>();
  #stopRefresh: (() => void) | undefined;
  readonly #providers: Watched<KubernetesObject>;
  readonly #targets: Watched<KubernetesObject>;
  readonly #grants: Watched<KubernetesObject>;
  readonly #webhookClaims: Watched<KubernetesObject>;
  readonly #core: CoreV1Api;
  readonly #custom: CustomObjectsApi;
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

  /** Restarts seen per informer, for tests and logs. */
  readonly restarts = { providers: 0, targets: 0, grants: 0, webhookClaims: 0 };

  private constructor(private readonly opts: ClusterCatalogOptions) {
    this.#log = opts.log ?? silentLogger();
    const kc = opts.kubeConfig;
    const ns = opts.namespace;
    const custom = kc.makeApiClient(CustomObjectsApi);
    this.#custom = custom;
    this.#core = kc.makeApiClient(CoreV1Api);
    const customPath = (plural: string) =>
      ns ? `/apis/${GROUP}/${VERSION}/namespaces/${ns}/${plural}` : `/apis/${GROUP}/${VERSION}/${plural}`;
    const listCustom = (plural: string) => () =>
      (ns
        ? custom.listNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: ns, plural })
        : custom.listClusterCustomObject({ group: GROUP, version: VERSION, plural })) as Promise<
        KubernetesListObject<KubernetesObject>
      >;
    this.#providers = makeInformer(kc, customPath(GIT_PROVIDER_PLURAL), listCustom(GIT_PROVIDER_PLURAL));
    this.#targets = makeInformer(kc, customPath(GIT_TARGET_PLURAL), listCustom(GIT_TARGET_PLURAL));
    this.#webhookClaims = makeInformer(
      kc,
      customPath(WEBHOOK_CLAIM_PLURAL),
      listCustom(WEBHOOK_CLAIM_PLURAL),
    );
    this.#grants = makeInformer(
      kc,
      `/apis/${GROUP}/${VERSION}/${SCOPE_GRANT_PLURAL}`,
      () =>
        custom.listClusterCustomObject(addressOf(RESOURCES.scopeGrant)) as Promise<
          KubernetesListObject<KubernetesObject>
        >,
    );
  }

  /** Starts watching and resolves once both kinds were listed and every named Secret read once. */
  static async start(opts: ClusterCatalogOptions): Promise<ClusterCatalog> {
    const c = new ClusterCatalog(opts);
    await c.#startAll();
    return c;
  }

  /** In-cluster service account, or the local kubeconfig. */
  static async fromDefaultConfig(opts: {
    log?: Logger;
    namespace?: string | undefined;
    secretRefreshMs?: number;
  }): Promise<ClusterCatalog> {
    const kubeConfig = new KubeConfig();
    kubeConfig.loadFromDefault();
    return ClusterCatalog.start({ kubeConfig, ...opts });
  }

  async #startAll(): Promise<void> {
    const entries = [
      ["providers", this.#providers],
      ["targets", this.#targets],
      ["grants", this.#grants],
      ["webhookClaims", this.#webhookClaims],
    ] as const;
    for (const [name, informer] of entries) {
      for (const verb of ["add", "update", "delete"] as const)
        informer.on(verb, () => this.#scheduleRebuild());
      informer.on("error", (err) => this.#restart(name, informer, err));
    }
    // Without the ScopeGrant kind installed nobody holds a grant (without the WebhookClaim kind,
    // no report is expected): start without, keep trying.
    await Promise.all(
      entries.map(([name, informer]) =>
        name === "grants" || name === "webhookClaims"
          ? informer.start().catch((err) => this.#restart(name, informer, err))
          : informer.start(),
      ),
    );
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

  #restart(name: keyof ClusterCatalog["restarts"], informer: Watched<any>, err: unknown, attempt = 0): void {
    if (this.#stopping) return;
    const base = this.opts.backoffMs ?? 500;
    const delay = Math.min(base * 2 ** attempt, this.opts.maxBackoffMs ?? 30_000);
    this.#log.warn({ kind: name, err: (err as Error)?.message, delayMs: delay }, "watch failed; restarting");
    const timer = setTimeout(() => {
      this.#timers.delete(timer);
      if (this.#stopping) return;
      this.restarts[name]++;
      informer.start().then(
        () => this.#scheduleRebuild(),
        (e: unknown) => this.#restart(name, informer, e, attempt + 1),
      );
    }, delay);
    this.#timers.add(timer);
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
    let outcome: ReadOutcome;
    let data: Record<string, string> | undefined;
    try {
      const s = await this.#core.readNamespacedSecret({ name: ref.name, namespace: ref.namespace });
      outcome = { ok: true, resourceVersion: s.metadata?.resourceVersion ?? "" };
      data = secretValues({ data: s.data ?? null, stringData: s.stringData ?? null });
    } catch (err) {
      outcome = { ok: false, status: err instanceof ApiException ? err.code : 0 };
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
    const providers = this.#valid(this.#providers, gitProvider, "GitProvider");
    const targets = this.#valid(this.#targets, gitTarget, "GitTarget");
    const grants = this.#valid(this.#grants, scopeGrant, "ScopeGrant");
    const webhookClaims = this.#valid(this.#webhookClaims, webhookClaim, "WebhookClaim");
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
    this.#snapshot = buildSnapshot({ providers, targets, secrets, grants, webhookClaims });
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
    for (const raw of this.#providers.list()) {
      if (this.#stopping) return;
      const parsed = gitProvider.safeParse(raw);
      if (!parsed.success) continue;
      const p = parsed.data;
      const namespace = p.metadata.namespace ?? "default";
      const name = p.metadata.name;
      const entry = this.#snapshot.providers.find((e) => e.namespace === namespace && e.name === name);
      const current = (raw as { status?: Record<string, unknown> }).status;
      const generation = raw.metadata?.generation;
      const secret = this.#secrets.get(secretKey(namespace, p.spec.webhookSecretRef.name))?.outcome;
      const next = providerStatus(
        {
          namespace,
          webhookSecretName: p.spec.webhookSecretRef.name,
          ...(generation !== undefined ? { generation } : {}),
          ...(entry?.hookPath ? { hookPath: entry.hookPath } : {}),
          ...(secret ? { secret } : {}),
        },
        current?.conditions as ProviderCondition[] | undefined,
        now,
      );
      if (!statusDiffers(current, next)) continue;
      const ref = { ...addressOf(RESOURCES.gitProvider), namespace, name };
      try {
        await this.#custom.patchNamespacedCustomObjectStatus(
          {
            ...ref,
            body: { status: ownedStatus("gitProvider", "gateway", next) },
            fieldManager: statusFieldManager("gateway"),
          },
          MERGE,
        );
      } catch (err) {
        const code = err instanceof ApiException ? err.code : 0;
        if (code === 404) continue; // deleted meanwhile
        const key = `${namespace}/${name}:${code}`;
        if (this.#statusFailures.has(key)) continue;
        this.#statusFailures.add(key);
        this.#log.warn(
          { gitProvider: `${namespace}/${name}`, status: code, err: (err as Error).message },
          "cannot write the GitProvider's status (retried on each change)",
        );
      }
    }
  }

  /** The watched objects the schema accepts; each one it refuses is logged and left out. */
  #valid<T>(informer: Watched<KubernetesObject>, schema: ZodType<T, ZodTypeDef, unknown>, kind: string): T[] {
    const valid: T[] = [];
    for (const o of informer.list()) {
      const r = schema.safeParse(o);
      if (r.success) valid.push(r.data);
      else
        this.#log.warn({ object: nameOf(o), issue: r.error.issues[0]?.message }, `${kind} ignored: invalid`);
    }
    return valid;
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
    for (const t of this.#timers) clearTimeout(t);
    await Promise.all([
      this.#providers.stop(),
      this.#targets.stop(),
      this.#grants.stop(),
      this.#webhookClaims.stop(),
    ]);
    await this.#statusPass;
  }

  /** Resolves once no status write is under way (for tests). */
  async statusSettled(): Promise<void> {
    while (this.#statusPass) await this.#statusPass;
  }
}

function nameOf(o: KubernetesObject): string {
  return `${o.metadata?.namespace ?? ""}/${o.metadata?.name ?? ""}`;
}
