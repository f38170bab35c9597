/**
 * source-controller's GitRepository reconcile (source-controller v1.9.x): on its interval and on a
 * new generation or requestedAt, check out spec.ref.branch from the Git server and store a new
 * artifact when the revision moved. Whatever the return, the requestedAt token is copied to
 * status.lastHandledReconcileAt, a suspended object included.
 */
import { join } from "node:path";
import * as k8s from "@kubernetes/client-node";
import type { Logger } from "pino";
import { errorMessage } from "../../../queue/errors.js";
import { type Clock, sleep, wireTime } from "../clock.js";
import { parseDuration } from "../duration.js";
import { type ArtifactStore, ArtifactStore as Store } from "./artifacts.js";
import { type Condition, READY, RECONCILING, removeCondition, setCondition } from "./conditions.js";
import { fetchTree, remoteTip } from "./gitfetch.js";
import { FINALIZER, type Kind, type Kube } from "./kube.js";
import { artifactRevision, REQUESTED_AT } from "./predicates.js";
import { type Obj, OwnWrites, type Watcher } from "./watcher.js";
import type { Outcome } from "./workqueue.js";

export const GIT_REPOSITORY: Kind = {
  group: "source.toolkit.fluxcd.io",
  version: "v1",
  plural: "gitrepositories",
};
export const SOURCE_STATUS_MANAGER = "gotk-source-controller";

export interface SourceDeps {
  kube: Kube;
  kc: k8s.KubeConfig;
  cache: () => Watcher;
  store: ArtifactStore;
  clock: Clock;
  log: Logger;
  scratchRoot: string;
  fetchLatencyMs: () => number;
  scaled: (ms: number) => number;
  counted: (key: string) => void;
}

export class GitRepositoryController {
  readonly #objects = new OwnWrites(() => this.d.cache());
  constructor(private readonly d: SourceDeps) {}

  forget(key: string): void {
    this.#objects.forget(key);
  }

  async reconcile(key: string): Promise<Outcome> {
    const [namespace = "", name = ""] = key.split("/");
    const obj = this.#objects.current(namespace, name);
    if (!obj) {
      this.d.store.dropSource(key);
      return {};
    }
    const before = JSON.stringify(obj.status ?? {});
    const status: Record<string, any> = structuredClone(obj.status ?? {});
    const generation = obj.metadata?.generation ?? 0;
    let outcome: Outcome = {};
    let writeBack = true;
    try {
      if (obj.metadata?.deletionTimestamp) {
        this.d.store.dropSource(key);
        const rest = (obj.metadata.finalizers ?? []).filter((f) => f !== FINALIZER);
        if (rest.length !== (obj.metadata.finalizers ?? []).length)
          await this.d.kube.setFinalizers(GIT_REPOSITORY, obj, rest, SOURCE_STATUS_MANAGER);
        writeBack = false;
        return {};
      }
      if (!(obj.metadata?.finalizers ?? []).includes(FINALIZER)) {
        const updated = await this.d.kube.setFinalizers(
          GIT_REPOSITORY,
          obj,
          [...(obj.metadata?.finalizers ?? []), FINALIZER],
          SOURCE_STATUS_MANAGER,
        );
        this.#objects.wrote(key, updated);
        outcome = { requeue: true };
        return outcome;
      }
      if (obj.spec?.suspend) {
        this.d.log.info({ gitrepository: key }, "reconciliation is suspended for this object");
        return outcome;
      }
      this.d.counted(key);
      outcome = await this.#fetch(key, obj, status, generation);
      return outcome;
    } finally {
      if (writeBack) {
        const token = obj.metadata?.annotations?.[REQUESTED_AT];
        if (token !== undefined) status.lastHandledReconcileAt = token;
        if (JSON.stringify(status) !== before) {
          const written = await this.d.kube.patchStatus(GIT_REPOSITORY, obj, status, SOURCE_STATUS_MANAGER);
          this.#objects.wrote(key, written);
        }
      }
    }
  }

  async #fetch(key: string, obj: Obj, status: Record<string, any>, generation: number): Promise<Outcome> {
    const interval = this.d.scaled(parseDuration(obj.spec?.interval) ?? 60_000);
    const branch: string = obj.spec?.ref?.branch ?? "master";
    const now = () => this.d.clock.now();
    let conditions: Condition[] = status.conditions ?? [];
    try {
      await sleep(this.d.clock, this.d.fetchLatencyMs());
      const url = await this.#authUrl(obj);
      const tip = await remoteTip(url, branch);
      const revision = `${branch}@sha1:${tip}`;
      if (revision !== artifactRevision(obj) || !this.d.store.get(status.artifact)) {
        const { sha, files } = await fetchTree(join(this.d.scratchRoot, key), url, branch);
        const fetched = `${branch}@sha1:${sha}`;
        const { digest, size } = Store.digestOf(files);
        const path = `gitrepository/${key}/${sha}.tar.gz`;
        const artifact = {
          digest,
          path,
          url: `http://source-controller.flux-system.svc.cluster.local./${path}`,
          revision: fetched,
          lastUpdateTime: wireTime(now()),
          size,
        };
        this.d.store.put(key, artifact, files);
        status.artifact = artifact;
        this.d.log.info({ gitrepository: key, revision: fetched }, "stored artifact");
      }
      const message = `stored artifact for revision '${status.artifact.revision}'`;
      conditions = removeCondition(removeCondition(conditions, RECONCILING), "FetchFailed");
      conditions = setCondition(
        conditions,
        {
          type: "ArtifactInStorage",
          status: "True",
          reason: "Succeeded",
          message,
          observedGeneration: generation,
        },
        now(),
      );
      conditions = setCondition(
        conditions,
        { type: READY, status: "True", reason: "Succeeded", message, observedGeneration: generation },
        now(),
      );
      status.conditions = conditions;
      status.observedGeneration = generation;
      return { requeueAfterMs: interval };
    } catch (err) {
      const message = `failed to checkout and determine revision: ${errorMessage(err)}`;
      conditions = setCondition(
        conditions,
        {
          type: "FetchFailed",
          status: "True",
          reason: "GitOperationFailed",
          message,
          observedGeneration: generation,
        },
        now(),
      );
      conditions = setCondition(
        conditions,
        {
          type: READY,
          status: "False",
          reason: "GitOperationFailed",
          message,
          observedGeneration: generation,
        },
        now(),
      );
      status.conditions = conditions;
      this.d.log.warn({ gitrepository: key, err: errorMessage(err) }, "fetch failed");
      // Upstream returns the error, so the retry is controller-runtime's backoff.
      throw Object.assign(new Error(message), { fetchFailed: true });
    }
  }

  /** Basic auth from spec.secretRef (keys username and password), put in the URL for the git CLI. */
  async #authUrl(obj: Obj): Promise<string> {
    const url: string = obj.spec?.url;
    const secretName = obj.spec?.secretRef?.name;
    if (!secretName) return url;
    const core = this.d.kc.makeApiClient(k8s.CoreV1Api);
    const secret = await core.readNamespacedSecret({
      namespace: obj.metadata?.namespace as string,
      name: secretName,
    });
    const dec = (k: string) => Buffer.from(secret.data?.[k] ?? "", "base64").toString();
    const u = new URL(url);
    u.username = encodeURIComponent(dec("username"));
    u.password = encodeURIComponent(dec("password"));
    return u.toString();
  }
}
