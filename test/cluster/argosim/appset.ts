/**
 * The ApplicationSet controller, list generator only: each generated Application has the
 * ApplicationSet as its controller owner reference, and every reconcile puts the rendered template
 * back whole (spec, labels, annotations) with a merge patch, keeping only the annotations Argo CD
 * preserves (refresh among them). Applications no longer generated are deleted.
 */
import type { KubeConfig } from "@kubernetes/client-node";
import type { Logger } from "pino";
import type { Clock } from "../clock.js";
import { errorMessage, isNotFound, MERGE, type ObjectClient, readOrUndefined } from "./kube.js";
import { mergeDiff, REFRESH_ANNOTATION } from "./objects.js";
import { listGeneratorParams, renderTemplate } from "./template.js";
import { type Watcher, watchAll } from "./watch.js";
import { WorkQueue } from "./workqueue.js";

const APPSET = { apiVersion: "argoproj.io/v1alpha1", kind: "ApplicationSet" } as const;
const APP = { apiVersion: "argoproj.io/v1alpha1", kind: "Application" } as const;
const PRESERVED_ANNOTATIONS = [
  "notified.notifications.argoproj.io",
  REFRESH_ANNOTATION,
  "argocd.argoproj.io/hydrate",
];
const PRESERVED_FINALIZER = "resources-finalizer.argocd.argoproj.io";

interface Meta {
  name: string;
  namespace: string;
  uid?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  finalizers?: string[];
  ownerReferences?: OwnerRef[];
}
interface OwnerRef {
  apiVersion: string;
  kind: string;
  name: string;
  uid: string;
  controller?: boolean;
  blockOwnerDeletion?: boolean;
}
interface AppSet {
  metadata: Meta;
  spec: {
    goTemplate?: boolean;
    generators?: unknown[];
    template: { metadata?: Partial<Meta>; spec?: Record<string, unknown> };
    preservedFields?: { annotations?: string[]; labels?: string[] };
  };
}
interface AppObj {
  apiVersion: string;
  kind: string;
  metadata: Meta;
  spec: Record<string, unknown>;
}

export class AppSetController {
  private readonly queue: WorkQueue;
  private readonly watchers: Watcher[] = [];

  constructor(private readonly d: { kc: KubeConfig; api: ObjectClient; clock: Clock; log: Logger }) {
    this.queue = new WorkQueue(
      d.clock,
      (k) => this.reconcile(k),
      (k, e) => {
        d.log.warn({ applicationSet: k, err: errorMessage(e) }, "applicationset reconcile failed; retrying");
      },
    );
  }

  start(): void {
    const onError = (e: unknown) => this.d.log.debug({ err: errorMessage(e) }, "watch ended");
    this.watchers.push(
      watchAll(
        this.d.kc,
        "/apis/argoproj.io/v1alpha1/applicationsets",
        (_t, o) => {
          if (o.metadata?.name && o.metadata.namespace)
            this.queue.add(`${o.metadata.namespace}/${o.metadata.name}`);
        },
        () => this.list(APPSET),
        onError,
      ),
      // An edit to a generated Application wakes its owner, which puts the template back.
      watchAll(
        this.d.kc,
        "/apis/argoproj.io/v1alpha1/applications",
        (_t, o) => {
          const m = o.metadata as Meta | undefined;
          const owner = m?.ownerReferences?.find((r) => r.controller && r.kind === "ApplicationSet");
          if (owner && m) this.queue.add(`${m.namespace}/${owner.name}`);
        },
        () => this.list(APP),
        onError,
      ),
    );
  }

  private async list(t: { apiVersion: string; kind: string }) {
    const l = await this.d.api.list(t.apiVersion, t.kind);
    return { resourceVersion: l.metadata?.resourceVersion, items: l.items };
  }

  idle(): Promise<void> {
    return this.queue.idle();
  }

  async stop(): Promise<void> {
    for (const w of this.watchers) w.stop();
    await this.queue.stop();
  }

  private async reconcile(k: string): Promise<void> {
    const [namespace = "", name = ""] = k.split("/");
    const set = await readOrUndefined<AppSet>(this.d.api, { ...APPSET, metadata: { name, namespace } });
    if (!set?.metadata.uid) return;
    const owner: OwnerRef = {
      ...APPSET,
      name: set.metadata.name,
      uid: set.metadata.uid,
      controller: true,
      blockOwnerDeletion: true,
    };
    const goTemplate = set.spec.goTemplate === true;
    const generated = listGeneratorParams(set.spec.generators).map((params) => {
      const t = renderTemplate(set.spec.template, params, goTemplate);
      const spec = { ...(t.spec ?? {}) };
      spec.project ||= "default";
      return {
        ...APP,
        metadata: {
          name: t.metadata?.name ?? "",
          namespace: t.metadata?.namespace || set.metadata.namespace,
          ...(t.metadata?.labels ? { labels: t.metadata.labels } : {}),
          ...(t.metadata?.annotations ? { annotations: t.metadata.annotations } : {}),
        },
        spec,
      } as AppObj;
    });
    for (const app of generated) await this.createOrUpdate(set, owner, app);

    const names = new Set(generated.map((a) => `${a.metadata.namespace}/${a.metadata.name}`));
    const existing = await this.d.api.list(APP.apiVersion, APP.kind);
    for (const item of existing.items as unknown as AppObj[]) {
      const owned = item.metadata.ownerReferences?.some((r) => r.controller && r.uid === owner.uid);
      if (owned && !names.has(`${item.metadata.namespace}/${item.metadata.name}`))
        await this.d.api.delete({ ...APP, metadata: item.metadata }).catch((e) => {
          if (!isNotFound(e)) throw e;
        });
    }
  }

  private async createOrUpdate(set: AppSet, owner: OwnerRef, generated: AppObj): Promise<void> {
    const found = await readOrUndefined<AppObj>(this.d.api, generated);
    if (!found) {
      await this.d.api.create({
        ...generated,
        metadata: { ...generated.metadata, ownerReferences: [owner] },
      });
      return;
    }
    const annotations = { ...generated.metadata.annotations };
    for (const a of [...PRESERVED_ANNOTATIONS, ...(set.spec.preservedFields?.annotations ?? [])]) {
      const v = found.metadata.annotations?.[a];
      if (v !== undefined) annotations[a] = v;
    }
    const labels = { ...generated.metadata.labels };
    for (const l of set.spec.preservedFields?.labels ?? []) {
      const v = found.metadata.labels?.[l];
      if (v !== undefined) labels[l] = v;
    }
    const finalizers = (found.metadata.finalizers ?? []).filter((f) => f.startsWith(PRESERVED_FINALIZER));
    const owners = (found.metadata.ownerReferences ?? []).filter((r) => r.uid !== owner.uid && !r.controller);
    const live = {
      metadata: {
        annotations: found.metadata.annotations,
        labels: found.metadata.labels,
        finalizers: found.metadata.finalizers,
        ownerReferences: found.metadata.ownerReferences,
      },
      spec: found.spec,
    };
    const desired = {
      metadata: {
        ...(Object.keys(annotations).length ? { annotations } : {}),
        ...(Object.keys(labels).length ? { labels } : {}),
        ...(finalizers.length ? { finalizers } : {}),
        ownerReferences: [...owners, owner],
      },
      spec: generated.spec,
    };
    const patch = mergeDiff(strip(live), desired) as Record<string, unknown>;
    if (Object.keys(patch).length === 0) return;
    const meta = {
      ...((patch.metadata as object) ?? {}),
      name: found.metadata.name,
      namespace: found.metadata.namespace,
    };
    await this.d.api.patch(
      { ...patch, ...APP, metadata: meta } as never,
      undefined,
      undefined,
      undefined,
      undefined,
      MERGE,
    );
    this.d.log.info(
      { applier: `${found.metadata.namespace}/${found.metadata.name}` },
      "updated Application from template",
    );
  }
}

/** Drops undefined members so they compare as absent. */
function strip<T>(v: T): T {
  return JSON.parse(JSON.stringify(v)) as T;
}
