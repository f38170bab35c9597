/**
 * The client every process talks to the API server through (typed helpers over
 * @kubernetes/client-node 1.4): uncached reads, server-side apply, merge patches guarded by a
 * resourceVersion, and the shared informers (`informer`, `objectInformer`). Conflicts are retried
 * by the callers through `retryOnConflict` (retry.ts), which knows what to re-read.
 */
import * as k8s from "@kubernetes/client-node";
import { FIELD_MANAGER } from "../contract.js";
import { findKubeConfig } from "../startup-check.js";
import { shareAgents } from "./agent.js";
import { apiFailure, isNotFound, KubeError } from "./errors.js";
import { eventBody, type NewEvent } from "./events.js";
import { type InformerHandle, type InformerHandler, type InformerOptions, Informers } from "./informer.js";
import { isRecord } from "./readers.js";
import { RequestTurns } from "./request-turns.js";
import { addressOf, collectionPath, type KObject, RESOURCES, type ResourceType } from "./resources.js";
import { SeenVersions } from "./seen-versions.js";

const MERGE = k8s.setHeaderOptions("Content-Type", k8s.PatchStrategy.MergePatch);
const APPLY = k8s.setHeaderOptions("Content-Type", k8s.PatchStrategy.ServerSideApply);

export interface ApplyOptions {
  fieldManager?: string;
  /** Take fields other managers own (default true: we apply only fields we are meant to own). */
  force?: boolean;
  dryRun?: boolean;
  /** "Strict": a field the schema does not declare is refused (400) instead of dropped. */
  fieldValidation?: "Strict";
}

export interface PatchOptions {
  /** Write through the status subresource. */
  status?: boolean;
  /** Sent as metadata.resourceVersion: a mismatch is a 409. */
  resourceVersion?: string;
  fieldManager?: string;
}

/**
 * The kubeconfig of a process started with `--kubeconfig`: that file, else as kubectl finds it
 * (startup-check.ts). A file that cannot be read is a bad setting, named as such.
 */
export function loadKubeConfig(file: string): k8s.KubeConfig {
  return findKubeConfig(file);
}

const ref = (t: ResourceType, namespace: string, name: string) =>
  `${t.plural}.${t.group} ${namespace}/${name}`;

export class Kube {
  readonly custom: k8s.CustomObjectsApi;
  readonly objects: k8s.KubernetesObjectApi;
  readonly events: k8s.EventsV1Api;
  readonly core: k8s.CoreV1Api;

  /** The informers of this process, one per collection, shared by every user of this client. */
  readonly informers: Informers;
  private readonly turns = new RequestTurns();
  /** The newest version of each object read or written here (`isCurrent`). */
  private readonly seen = new SeenVersions();

  constructor(
    readonly kubeConfig: k8s.KubeConfig,
    opts: InformerOptions = {},
  ) {
    // Every request and watch of this client shares one keep-alive pool (agent.ts).
    shareAgents(kubeConfig);
    this.custom = kubeConfig.makeApiClient(k8s.CustomObjectsApi);
    this.objects = k8s.KubernetesObjectApi.makeApiClient(kubeConfig);
    this.events = kubeConfig.makeApiClient(k8s.EventsV1Api);
    this.core = kubeConfig.makeApiClient(k8s.CoreV1Api);
    this.informers = new Informers(kubeConfig, opts);
  }

  /**
   * Runs one request to the API server in its turn (request-turns.ts: at most 64 in flight). Every
   * request of this class goes through it; a caller using the generated APIs directly wraps its
   * call too.
   */
  request<T>(call: () => Promise<T>): Promise<T> {
    return this.turns.run(call);
  }

  /** Requests in flight and waiting for their turn (for tests and metrics). */
  get requests(): { held: number; waiting: number } {
    return this.turns.usage;
  }

  /**
   * Whether a watch cache's copy is the newest version of the object this client has read or
   * written: it then shows every write made through this client whose answer came back.
   */
  isCurrent(t: ResourceType, cached: KObject | undefined): boolean {
    return this.seen.current(t, cached);
  }

  /** The object, or undefined when it does not exist. Always uncached. */
  async get<T = KObject>(t: ResourceType, namespace: string, name: string): Promise<T | undefined> {
    try {
      const got = (await this.request(() =>
        this.custom.getNamespacedCustomObject({
          ...addressOf(t),
          namespace,
          name,
        }),
      )) as KObject;
      this.seen.saw(t, namespace, name, got);
      return got as T;
    } catch (err) {
      if (isNotFound(err)) {
        this.seen.saw(t, namespace, name, undefined);
        return undefined;
      }
      throw new KubeError(`get ${ref(t, namespace, name)}`, apiFailure(err));
    }
  }

  /** Every object of a type, in one namespace or (namespace undefined) in all. */
  async list<T = KObject>(
    t: ResourceType,
    namespace?: string,
    labelSelector?: string,
  ): Promise<{ items: T[]; resourceVersion: string }> {
    try {
      const base = { ...addressOf(t), labelSelector };
      const res = (
        namespace === undefined
          ? await this.request(() => this.custom.listClusterCustomObject(base))
          : await this.request(() => this.custom.listNamespacedCustomObject({ ...base, namespace }))
      ) as { items: T[]; metadata?: { resourceVersion?: string } };
      return { items: res.items ?? [], resourceVersion: res.metadata?.resourceVersion ?? "" };
    } catch (err) {
      throw new KubeError(`list ${t.plural}.${t.group}`, apiFailure(err));
    }
  }

  /**
   * Server-side apply of `obj` (apiVersion, kind, metadata.name/namespace and only the fields we
   * own). Put metadata.uid / metadata.resourceVersion in it for preconditions.
   */
  async apply<T = KObject>(t: ResourceType, obj: KObject, opts: ApplyOptions = {}): Promise<T> {
    const namespace = obj.metadata.namespace ?? "";
    try {
      const applied = (await this.request(() =>
        this.custom.patchNamespacedCustomObject(
          {
            ...addressOf(t),
            namespace,
            name: obj.metadata.name,
            body: obj,
            fieldManager: opts.fieldManager ?? FIELD_MANAGER,
            force: opts.force ?? true,
            ...(opts.dryRun ? { dryRun: "All" } : {}),
            ...(opts.fieldValidation ? { fieldValidation: opts.fieldValidation } : {}),
          },
          APPLY,
        ),
      )) as KObject;
      if (!opts.dryRun) this.seen.saw(t, namespace, obj.metadata.name, applied);
      return applied as T;
    } catch (err) {
      throw new KubeError(`apply ${ref(t, namespace, obj.metadata.name)}`, apiFailure(err));
    }
  }

  /** JSON merge patch of the object or (opts.status) its status, optionally guarded by resourceVersion. */
  async mergePatch<T = KObject>(
    t: ResourceType,
    namespace: string,
    name: string,
    patch: Record<string, unknown>,
    opts: PatchOptions = {},
  ): Promise<T> {
    const body = opts.resourceVersion
      ? {
          ...patch,
          metadata: {
            ...(isRecord(patch.metadata) ? patch.metadata : {}),
            resourceVersion: opts.resourceVersion,
          },
        }
      : patch;
    const req = {
      ...addressOf(t),
      namespace,
      name,
      body,
      fieldManager: opts.fieldManager ?? FIELD_MANAGER,
    };
    try {
      const patched = (
        opts.status
          ? await this.request(() => this.custom.patchNamespacedCustomObjectStatus(req, MERGE))
          : await this.request(() => this.custom.patchNamespacedCustomObject(req, MERGE))
      ) as KObject;
      this.seen.saw(t, namespace, name, patched);
      return patched as T;
    } catch (err) {
      throw new KubeError(
        `patch ${opts.status ? "status of " : ""}${ref(t, namespace, name)}`,
        apiFailure(err),
      );
    }
  }

  /** Merge patch of `status` through the status subresource, guarded by the resourceVersion read. */
  patchStatus<T = KObject>(
    t: ResourceType,
    namespace: string,
    name: string,
    status: Record<string, unknown>,
    resourceVersion: string | undefined,
  ): Promise<T> {
    return this.mergePatch<T>(t, namespace, name, { status }, { status: true, resourceVersion });
  }

  /** Replaces the whole object (an update guarded by the resourceVersion it carries). */
  async replace<T = KObject>(t: ResourceType, obj: KObject): Promise<T> {
    const namespace = obj.metadata.namespace ?? "";
    try {
      const replaced = (await this.request(() =>
        this.custom.replaceNamespacedCustomObject({
          ...addressOf(t),
          namespace,
          name: obj.metadata.name,
          body: obj,
          fieldManager: FIELD_MANAGER,
        }),
      )) as KObject;
      this.seen.saw(t, namespace, obj.metadata.name, replaced);
      return replaced as T;
    } catch (err) {
      throw new KubeError(`update ${ref(t, namespace, obj.metadata.name)}`, apiFailure(err));
    }
  }

  /** Deletes; a missing object is not an error. */
  async delete(t: ResourceType, namespace: string, name: string): Promise<void> {
    try {
      await this.request(() =>
        this.custom.deleteNamespacedCustomObject({
          ...addressOf(t),
          namespace,
          name,
        }),
      );
    } catch (err) {
      if (isNotFound(err)) return;
      throw new KubeError(`delete ${ref(t, namespace, name)}`, apiFailure(err));
    }
  }

  /**
   * Creates an Event in the namespace of the object it is about. Events name no field manager (as
   * client-go's recorders make them): the server records the client's own.
   */
  async createEvent(e: NewEvent): Promise<KObject> {
    const body = eventBody(e);
    try {
      return (await this.request(() =>
        this.custom.createNamespacedCustomObject({
          ...addressOf(RESOURCES.event),
          namespace: body.metadata.namespace,
          body,
        }),
      )) as KObject;
    } catch (err) {
      throw new KubeError(`create ${ref(RESOURCES.event, body.metadata.namespace, e.name)}`, apiFailure(err));
    }
  }

  /**
   * JSON merge patch of an Event (a repeat's `series`), under no field manager as `createEvent`;
   * undefined when the Event is gone (expired).
   */
  async patchEvent(
    namespace: string,
    name: string,
    patch: Record<string, unknown>,
  ): Promise<KObject | undefined> {
    try {
      return (await this.request(() =>
        this.custom.patchNamespacedCustomObject(
          { ...addressOf(RESOURCES.event), namespace, name, body: patch },
          MERGE,
        ),
      )) as KObject;
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw new KubeError(`patch ${ref(RESOURCES.event, namespace, name)}`, apiFailure(err));
    }
  }

  /** Adds (or removes) a finalizer, guarded by the resourceVersion of the object passed in. */
  async setFinalizer<T = KObject>(
    t: ResourceType,
    obj: KObject,
    finalizer: string,
    present: boolean,
  ): Promise<T> {
    const current = obj.metadata.finalizers ?? [];
    const next = present
      ? current.includes(finalizer)
        ? current
        : [...current, finalizer]
      : current.filter((f) => f !== finalizer);
    return this.mergePatch<T>(
      t,
      obj.metadata.namespace ?? "",
      obj.metadata.name,
      { metadata: { finalizers: next } },
      { resourceVersion: obj.metadata.resourceVersion },
    );
  }

  /**
   * The shared informer of one of our kinds (or any grouped resource), cluster-wide or in one
   * namespace; `onChange` is called for every event until the handle is released.
   */
  informer<T extends KObject = KObject>(
    t: ResourceType,
    opts: {
      namespace?: string;
      labelSelector?: string;
      onChange?: InformerHandler<T>;
    } & InformerOptions = {},
  ): InformerHandle<T> {
    const { namespace, labelSelector, onChange, ...informerOpts } = opts;
    return this.informers.acquire<T>(
      {
        path: collectionPath(t, namespace),
        ...(labelSelector ? { labelSelector } : {}),
        list: () => this.list<T>(t, namespace, labelSelector),
      },
      onChange,
      informerOpts,
    );
  }

  /**
   * The shared informer of one Secret, watched by name (field selector `metadata.name=<name>`, so
   * none of its namespace's other Secrets is read); `onChange` as for `informer`.
   */
  secretInformer(
    namespace: string,
    name: string,
    onChange?: InformerHandler<KObject>,
  ): InformerHandle<KObject> {
    return this.informers.acquire<KObject>(
      {
        path: `/api/v1/namespaces/${namespace}/secrets`,
        fieldSelector: `metadata.name=${name}`,
        list: async () => {
          const out = await this.request(() =>
            this.core.listNamespacedSecret({
              namespace,
              fieldSelector: `metadata.name=${name}`,
            }),
          );
          const items = out.items.map((s) => ({ ...s, kind: "Secret" }) as unknown as KObject);
          return { items, resourceVersion: out.metadata?.resourceVersion ?? "" };
        },
      },
      onChange,
    );
  }

  /**
   * The shared informer of the cluster's Namespaces (their labels say the Pod Security level each
   * enforces); `onChange` as for `informer`.
   */
  namespaceInformer(onChange?: InformerHandler<KObject>): InformerHandle<KObject> {
    return this.informers.acquire<KObject>(
      {
        path: "/api/v1/namespaces",
        list: async () => {
          const out = await this.request(() => this.core.listNamespace());
          const items = out.items.map((n) => ({ ...n, kind: "Namespace" }) as unknown as KObject);
          return { items, resourceVersion: out.metadata?.resourceVersion ?? "" };
        },
      },
      onChange,
    );
  }

  /**
   * The shared informer of any kind by apiVersion and kind (found through discovery), e.g. the
   * objects an applier applies; undefined when the cluster does not serve the kind.
   */
  async objectInformer<T extends KObject = KObject>(
    apiVersion: string,
    kind: string,
    namespace: string | undefined,
    onChange?: InformerHandler<T>,
  ): Promise<InformerHandle<T> | undefined> {
    const objects = this.objects as unknown as {
      resource(apiVersion: string, kind: string): Promise<k8s.V1APIResource | undefined>;
    };
    const res = await this.request(() => objects.resource(apiVersion, kind));
    if (!res) return undefined;
    const [group, version] = apiVersion.includes("/") ? apiVersion.split("/") : ["", apiVersion];
    const ns = res.namespaced ? namespace : undefined;
    const t: ResourceType = { group: group!, version: version!, plural: res.name, kind };
    return this.informers.acquire<T>(
      {
        path: collectionPath(t, ns),
        list: async () => {
          const out = (await this.request(() => this.objects.list(apiVersion, kind, ns))) as {
            items?: T[];
            metadata?: { resourceVersion?: string };
          };
          // Items of a built-in list come without apiVersion and kind: put them back.
          const items = (out.items ?? []).map((i) => Object.assign(i, { apiVersion, kind }));
          return { items, resourceVersion: out.metadata?.resourceVersion ?? "" };
        },
      },
      onChange,
    );
  }

  /** Paths of the running informers whose last list did not land (not yet, or failing since). */
  unsyncedWatches(): string[] {
    return this.informers.unsynced();
  }

  /** Stops every informer of this client. */
  async close(): Promise<void> {
    await this.informers.stopAll();
  }
}
