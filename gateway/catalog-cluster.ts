/**
 * The catalog watched from the cluster: informers on GitProviders, GitTargets and Secrets (all
 * namespaces, or one). An informer that stops on an error is started again with backoff (the
 * 1.4.0 client does not do it itself); `stop()` also fires an error, so a flag guards the restart.
 */
import {
  CoreV1Api,
  CustomObjectsApi,
  type Informer,
  KubeConfig,
  type KubernetesListObject,
  type KubernetesObject,
  makeInformer,
  type ObjectCache,
  type V1Secret,
} from "@kubernetes/client-node";
import {
  GIT_PROVIDER_PLURAL,
  GIT_TARGET_PLURAL,
  type GitProvider,
  type GitTarget,
  GROUP,
  gitProvider,
  gitTarget,
  VERSION,
} from "../queue/crds/index.js";
import { type Logger, silentLogger } from "../queue/log.js";
import {
  buildSnapshot,
  type Catalog,
  type CatalogSnapshot,
  EMPTY_SNAPSHOT,
  type SecretData,
  secretValues,
} from "./catalog.js";

type Watched<T extends KubernetesObject> = Informer<T> & ObjectCache<T>;

export interface ClusterCatalogOptions {
  kubeConfig: KubeConfig;
  /** Watch only this namespace; all when unset. */
  namespace?: string | undefined;
  log?: Logger;
  /** First restart delay after an informer error; doubles up to `maxBackoffMs`. */
  backoffMs?: number;
  maxBackoffMs?: number;
}

export class ClusterCatalog implements Catalog {
  #snapshot: CatalogSnapshot = EMPTY_SNAPSHOT;
  #loaded = false;
  #stopping = false;
  #rebuildPending = false;
  #timers = new Set<NodeJS.Timeout>();
  readonly #providers: Watched<KubernetesObject>;
  readonly #targets: Watched<KubernetesObject>;
  readonly #secrets: Watched<V1Secret>;
  readonly #log: Logger;

  /** Restarts seen per informer, for tests and logs. */
  readonly restarts = { providers: 0, targets: 0, secrets: 0 };

  private constructor(private readonly opts: ClusterCatalogOptions) {
    this.#log = opts.log ?? silentLogger();
    const kc = opts.kubeConfig;
    const ns = opts.namespace;
    const custom = kc.makeApiClient(CustomObjectsApi);
    const core = kc.makeApiClient(CoreV1Api);
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
    this.#secrets = makeInformer(kc, ns ? `/api/v1/namespaces/${ns}/secrets` : "/api/v1/secrets", () =>
      ns ? core.listNamespacedSecret({ namespace: ns }) : core.listSecretForAllNamespaces(),
    );
  }

  /** Starts watching and resolves once every kind was listed once. */
  static async start(opts: ClusterCatalogOptions): Promise<ClusterCatalog> {
    const c = new ClusterCatalog(opts);
    await c.#startAll();
    return c;
  }

  /** In-cluster service account, or the local kubeconfig. */
  static async fromDefaultConfig(opts: {
    log?: Logger;
    namespace?: string | undefined;
  }): Promise<ClusterCatalog> {
    const kubeConfig = new KubeConfig();
    kubeConfig.loadFromDefault();
    return ClusterCatalog.start({ kubeConfig, ...opts });
  }

  async #startAll(): Promise<void> {
    const entries = [
      ["providers", this.#providers],
      ["targets", this.#targets],
      ["secrets", this.#secrets],
    ] as const;
    for (const [name, informer] of entries) {
      for (const verb of ["add", "update", "delete"] as const)
        informer.on(verb, () => this.#scheduleRebuild());
      informer.on("error", (err) => this.#restart(name, informer, err));
    }
    await Promise.all(entries.map(([, informer]) => informer.start()));
    this.#rebuild();
    this.#loaded = true;
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

  #scheduleRebuild(): void {
    if (this.#rebuildPending) return;
    this.#rebuildPending = true;
    setImmediate(() => {
      this.#rebuildPending = false;
      this.#rebuild();
    });
  }

  #rebuild(): void {
    const providers: GitProvider[] = [];
    for (const o of this.#providers.list()) {
      const r = gitProvider.safeParse(o);
      if (r.success) providers.push(r.data);
      else
        this.#log.warn(
          { object: nameOf(o), issue: r.error.issues[0]?.message },
          "GitProvider ignored: invalid",
        );
    }
    const targets: GitTarget[] = [];
    for (const o of this.#targets.list()) {
      const r = gitTarget.safeParse(o);
      if (r.success) targets.push(r.data);
      else
        this.#log.warn(
          { object: nameOf(o), issue: r.error.issues[0]?.message },
          "GitTarget ignored: invalid",
        );
    }
    const secrets: SecretData[] = this.#secrets.list().map((s) => ({
      namespace: s.metadata?.namespace ?? "default",
      name: s.metadata?.name ?? "",
      data: secretValues({ data: s.data ?? null, stringData: s.stringData ?? null }),
    }));
    this.#snapshot = buildSnapshot({ providers, targets, secrets });
  }

  snapshot(): CatalogSnapshot {
    return this.#snapshot;
  }
  loaded(): boolean {
    return this.#loaded;
  }
  async close(): Promise<void> {
    this.#stopping = true;
    for (const t of this.#timers) clearTimeout(t);
    await Promise.all([this.#providers.stop(), this.#targets.stop(), this.#secrets.stop()]);
  }
}

function nameOf(o: KubernetesObject): string {
  return `${o.metadata?.namespace ?? ""}/${o.metadata?.name ?? ""}`;
}
