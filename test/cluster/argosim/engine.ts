/**
 * What a sync does to the cluster, and what a refresh compares: the manifests at a commit, made
 * the Application's (destination namespace, tracking annotation), applied as Argo CD applies them.
 * Client-side apply (the default) and server-side apply both write as field manager
 * argocd-controller; Replace=true creates or replaces with no field manager, so the API server
 * records the user agent's first word, argocd-application-controller.
 */
import type { SyncStatus } from "./automation.js";
import type { GitSource } from "./gitsource.js";
import { APPLY, errorMessage, isNotFound, MERGE, type ObjectClient, readOrUndefined } from "./kube.js";
import {
  appInstance,
  groupOf,
  hasSyncOption,
  hookDeletePolicies,
  hookType,
  isSubset,
  LAST_APPLIED_ANNOTATION,
  TRACKING_ANNOTATION,
  threeWayPatch,
  trackingId,
} from "./objects.js";
import type { Application, KObj, ResourceResult, SyncOptionsSource } from "./types.js";

export const ARGOCD_FIELD_MANAGER = "argocd-controller";

export interface Rendered {
  sha: string;
  resources: KObj[];
  hooks: KObj[];
}

export interface EngineDeps {
  api: ObjectClient;
  git: GitSource;
  controlNamespace: string;
  sleep: (ms: number) => Promise<void>;
  perObjectApplyMs: () => number;
}

type Mode = "client-side" | "server-side" | "replace";

export class SyncEngine {
  /** Kinds ever applied per Application instance, where prune and compare look for its objects. */
  private readonly kinds = new Map<string, Map<string, { apiVersion: string; kind: string }>>();

  constructor(private readonly d: EngineDeps) {}

  /** The source's objects at the revision, resolved to a commit, hooks apart. */
  async render(app: Application, source: SyncOptionsSource, revision: string | undefined): Promise<Rendered> {
    const sha = await this.d.git.resolve(source.repoURL, revision || source.targetRevision);
    const objs = await this.d.git.manifests(
      source.repoURL,
      sha,
      source.path ?? ".",
      source.directory?.recurse,
    );
    const instance = appInstance(app, this.d.controlNamespace);
    const destNs = app.spec.destination?.namespace ?? "";
    const resources: KObj[] = [];
    const hooks: KObj[] = [];
    for (const raw of objs) {
      const o = structuredClone(raw);
      const namespaced = await this.d.api.namespaced(o.apiVersion, o.kind);
      if (namespaced) o.metadata.namespace ||= destNs;
      else delete o.metadata.namespace;
      o.metadata.annotations = {
        ...o.metadata.annotations,
        [TRACKING_ANNOTATION]: trackingId(instance, o, o.metadata.namespace ?? destNs),
      };
      const hook = hookType(o);
      if (hook === "Skip") continue;
      (hook ? hooks : resources).push(o);
    }
    return { sha, resources, hooks };
  }

  private remember(instance: string, objs: KObj[]): void {
    let m = this.kinds.get(instance);
    if (!m) this.kinds.set(instance, (m = new Map()));
    for (const o of objs) m.set(`${o.apiVersion}/${o.kind}`, { apiVersion: o.apiVersion, kind: o.kind });
  }

  /** Live objects carrying this Application's tracking annotation that Git no longer holds. */
  private async extra(app: Application, desired: KObj[]): Promise<KObj[]> {
    const instance = appInstance(app, this.d.controlNamespace);
    this.remember(instance, desired);
    const want = new Set(desired.map((o) => o.metadata.annotations?.[TRACKING_ANNOTATION]));
    const out: KObj[] = [];
    for (const { apiVersion, kind } of this.kinds.get(instance)?.values() ?? []) {
      const list = await this.d.api.list(apiVersion, kind);
      for (const item of list.items as unknown as KObj[]) {
        const id = item.metadata.annotations?.[TRACKING_ANNOTATION];
        if (id?.startsWith(`${instance}:`) && !want.has(id) && !hookType(item))
          out.push({ ...item, apiVersion, kind });
      }
    }
    return out;
  }

  /** Every kind some Application has applied or compared: the kinds whose changes refresh it. */
  managedKinds(): { apiVersion: string; kind: string }[] {
    const all = new Map<string, { apiVersion: string; kind: string }>();
    for (const m of this.kinds.values()) for (const [k, v] of m) all.set(k, v);
    return [...all.values()];
  }

  /**
   * A refresh: the spec's source at its target revision (or at the revision given, as
   * CompareWithRecent does with the revision compared last) against the live objects.
   */
  async compare(app: Application, revision?: string): Promise<SyncStatus> {
    const source = app.spec.source;
    if (!source) throw new Error("application has no source");
    const r = await this.render(app, source, revision || source.targetRevision);
    const outOfSync: SyncStatus["outOfSync"] = [];
    for (const o of r.resources) {
      const live = await readOrUndefined(this.d.api, o);
      if (!live || !isSubset(o, live)) outOfSync.push(ref(o, false));
    }
    for (const o of await this.extra(app, r.resources)) outOfSync.push(ref(o, true));
    return {
      status: outOfSync.length ? "OutOfSync" : "Synced",
      revision: r.sha,
      outOfSync,
      desiredCount: r.resources.length,
    };
  }

  /**
   * One sync attempt's writes: PreSync hooks, the resources (and prune), Sync hooks, PostSync
   * hooks. A hook with BeforeHookCreation (the default) is deleted first and created anew.
   */
  async sync(
    app: Application,
    r: Rendered,
    opts: { syncOptions?: string[]; prune: boolean; only?: { group?: string; kind: string; name: string }[] },
  ): Promise<{ results: ResourceResult[]; failed?: string }> {
    const results: ResourceResult[] = [];
    const hooksOf = (t: string) => r.hooks.filter((h) => hookType(h) === t);
    const instance = appInstance(app, this.d.controlNamespace);
    this.remember(instance, [...r.resources, ...r.hooks]);
    let failed: string | undefined;

    const runHooks = async (phase: "PreSync" | "Sync" | "PostSync") => {
      for (const h of hooksOf(phase)) {
        if (failed) return;
        const policies = hookDeletePolicies(h);
        try {
          if (policies.includes("BeforeHookCreation")) await this.deleteAndWait(h);
          await this.write(h, this.mode(opts.syncOptions, h));
          results.push(
            result(h, "Synced", `${h.kind.toLowerCase()}/${h.metadata.name} created`, phase, phase),
          );
          if (policies.includes("HookSucceeded")) await this.deleteAndWait(h);
        } catch (e) {
          failed = errorMessage(e);
          results.push(result(h, "SyncFailed", failed, phase, phase));
        }
      }
    };

    await runHooks("PreSync");
    if (!failed) {
      const selected = opts.only?.length
        ? r.resources.filter((o) =>
            opts.only?.some(
              (s) =>
                s.kind === o.kind && s.name === o.metadata.name && (s.group ?? "") === groupOf(o.apiVersion),
            ),
          )
        : r.resources;
      for (const o of selected) {
        try {
          const msg = await this.write(o, this.mode(opts.syncOptions, o));
          results.push(result(o, "Synced", msg, "Sync"));
        } catch (e) {
          failed ??= errorMessage(e);
          results.push(result(o, "SyncFailed", errorMessage(e), "Sync"));
        }
      }
      if (!opts.only?.length)
        for (const o of await this.extra(app, r.resources)) {
          if (!opts.prune) {
            results.push(result(o, "PruneSkipped", "ignored (requires pruning)", "Sync"));
            continue;
          }
          await this.d.api.delete(o).catch((e) => {
            if (!isNotFound(e)) throw e;
          });
          results.push(result(o, "Pruned", "pruned", "Sync"));
        }
    }
    if (!failed) await runHooks("Sync");
    if (!failed) await runHooks("PostSync");
    return { results, failed };
  }

  private mode(syncOptions: string[] | undefined, o: KObj): Mode {
    if (hasSyncOption(syncOptions, o, "Replace=true")) return "replace";
    if (hasSyncOption(syncOptions, o, "ServerSideApply=true")) return "server-side";
    return "client-side";
  }

  private async write(o: KObj, mode: Mode): Promise<string> {
    const wait = this.d.perObjectApplyMs();
    if (wait > 0) await this.d.sleep(wait);
    const what = `${o.kind.toLowerCase()}/${o.metadata.name}`;
    if (mode === "server-side") {
      await this.d.api.patch(o, undefined, undefined, ARGOCD_FIELD_MANAGER, true, APPLY);
      return `${what} serverside-applied`;
    }
    const live = await readOrUndefined<KObj>(this.d.api, o);
    if (mode === "replace") {
      if (!live) {
        await this.d.api.create(o);
        return `${what} created`;
      }
      const body = structuredClone(o);
      body.metadata.resourceVersion = (live.metadata as { resourceVersion?: string }).resourceVersion;
      await this.d.api.replace(body);
      return `${what} replaced`;
    }
    // kubectl apply: the configuration it applied is kept in an annotation for the next three-way patch.
    const withLast = structuredClone(o);
    withLast.metadata.annotations = {
      ...o.metadata.annotations,
      [LAST_APPLIED_ANNOTATION]: JSON.stringify(o),
    };
    if (!live) {
      await this.d.api.create(withLast, undefined, undefined, ARGOCD_FIELD_MANAGER);
      return `${what} created`;
    }
    let last: unknown = {};
    try {
      last = JSON.parse(live.metadata.annotations?.[LAST_APPLIED_ANNOTATION] ?? "{}");
    } catch {}
    const patch = threeWayPatch(last, withLast, live);
    if (Object.keys(patch).length === 0) return `${what} unchanged`;
    await this.d.api.patch(
      {
        ...patch,
        apiVersion: o.apiVersion,
        kind: o.kind,
        metadata: { ...(patch.metadata as object), name: o.metadata.name, namespace: o.metadata.namespace },
      } as KObj,
      undefined,
      undefined,
      ARGOCD_FIELD_MANAGER,
      undefined,
      MERGE,
    );
    return `${what} configured`;
  }

  private async deleteAndWait(o: KObj): Promise<void> {
    try {
      await this.d.api.delete(o);
    } catch (e) {
      if (isNotFound(e)) return;
      throw e;
    }
    for (let i = 0; i < 500 && (await readOrUndefined(this.d.api, o)); i++) await this.d.sleep(10);
  }
}

function ref(o: KObj, requiresPruning: boolean) {
  return {
    group: groupOf(o.apiVersion),
    kind: o.kind,
    name: o.metadata.name,
    namespace: o.metadata.namespace ?? "",
    requiresPruning,
  };
}

function result(
  o: KObj,
  status: ResourceResult["status"],
  message: string,
  syncPhase: ResourceResult["syncPhase"],
  hook?: string,
): ResourceResult {
  const [group, version] = o.apiVersion.includes("/") ? o.apiVersion.split("/") : ["", o.apiVersion];
  return {
    group: group ?? "",
    version: version ?? "",
    kind: o.kind,
    namespace: o.metadata.namespace ?? "",
    name: o.metadata.name,
    status,
    message,
    syncPhase,
    ...(hook ? { hookType: hook, hookPhase: status === "Synced" ? "Succeeded" : "Failed" } : {}),
  };
}
