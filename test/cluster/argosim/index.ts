/**
 * argosim: the Argo CD application controller (3.5 semantics) and ApplicationSet controller (list
 * generator), run in-process against the simulated API server through @kubernetes/client-node,
 * syncing from the real Git server. See docs/testing-argosim.md for the facts it reproduces.
 */
import { fileURLToPath } from "node:url";
import type { KubeConfig } from "@kubernetes/client-node";
import pino, { type Logger } from "pino";
import { type Clock, realClock, sleep } from "../clock.js";
import { AppSetController } from "./appset.js";
import { AppController, type ArgoKnobs, DEFAULT_KNOBS, type SyncRecord } from "./controller.js";
import { SyncEngine } from "./engine.js";
import { GitSource } from "./gitsource.js";
import { APPSET_USER_AGENT, CONTROLLER_USER_AGENT, objectClient } from "./kube.js";
import type { AppRef } from "./types.js";

export type { Clock } from "../clock.js";
export { isAutomatedSyncEnabled } from "./automation.js";
export { type ArgoKnobs, DEFAULT_KNOBS, OPERATION_TOKEN_INFO, type SyncRecord } from "./controller.js";
export { ARGOCD_FIELD_MANAGER } from "./engine.js";
export { CONTROLLER_USER_AGENT } from "./kube.js";
export { REFRESH_ANNOTATION, TRACKING_ANNOTATION } from "./objects.js";
export type { Application, AppRef, Operation, OperationState } from "./types.js";

export type ArgoVersion = "3.5" | "pre-3.1";

export interface ArgoSimOptions {
  kubeConfig: KubeConfig;
  clock?: Clock;
  knobs?: Partial<ArgoKnobs>;
  log?: Logger;
  /** Argo CD's own namespace: AppProjects live there, and Applications there track as `<name>`. */
  namespace?: string;
  /**
   * "pre-3.1": automated sync has no enabled switch, so a present automated block is on (install
   * argocdApplicationCrd("pre-3.1") to match). Default "3.5".
   */
  version?: ArgoVersion;
  /** Run the ApplicationSet controller too (default true). */
  applicationSets?: boolean;
}

export interface ArgoSim {
  /** Live knobs: changes apply from the next use. */
  knobs: ArgoKnobs;
  /** The next sync attempt of the Application ends in this phase (default Failed) before any write. */
  failNextSync(app: AppRef, phase?: "Failed" | "Error"): void;
  /** The next sync attempt of the Application stays Running, writing nothing, until released. */
  holdSync(app: AppRef): { release(): void };
  /** Every sync attempt that reached the cluster, oldest first. */
  syncs(app: AppRef): SyncRecord[];
  /** Resolves once no controller pass is running or queued (timers not counted). */
  idle(): Promise<void>;
  stop(): Promise<void>;
}

/** The Application CRD file for a version: 3.1 and later declare syncPolicy.automated.enabled. */
export function argocdApplicationCrd(version: ArgoVersion = "3.5"): string {
  const file = version === "pre-3.1" ? "argocd-application-pre-3.1.yaml" : "argocd-application.yaml";
  return fileURLToPath(new URL(`../crds/${file}`, import.meta.url));
}

export async function startArgoSim(opts: ArgoSimOptions): Promise<ArgoSim> {
  const clock = opts.clock ?? realClock;
  const knobs: ArgoKnobs = { ...DEFAULT_KNOBS, ...opts.knobs };
  const log = (opts.log ?? pino({ level: "silent" })).child({ component: "argosim" });
  const git = new GitSource();
  const api = objectClient(opts.kubeConfig, CONTROLLER_USER_AGENT);
  const engine = new SyncEngine({
    api,
    git,
    controlNamespace: opts.namespace ?? "argocd",
    sleep: (ms) => sleep(clock, ms),
    perObjectApplyMs: () => knobs.perObjectApplyMs,
  });
  const apps = new AppController({
    kc: opts.kubeConfig,
    api,
    engine,
    clock,
    knobs,
    log,
    controlNamespace: opts.namespace ?? "argocd",
    hasEnabledField: (opts.version ?? "3.5") !== "pre-3.1",
  });
  const appsets =
    opts.applicationSets === false
      ? undefined
      : new AppSetController({
          kc: opts.kubeConfig,
          api: objectClient(opts.kubeConfig, APPSET_USER_AGENT),
          clock,
          log,
        });
  apps.start();
  appsets?.start();
  let stopped = false;
  return {
    knobs,
    failNextSync: (app, phase) => apps.failNextSync(app, phase),
    holdSync: (app) => apps.holdSync(app),
    syncs: (app) => apps.syncs(app),
    idle: async () => {
      for (;;) {
        await Promise.all([apps.queue.idle(), appsets?.idle()]);
        await new Promise((r) => setImmediate(r));
        if (apps.queue.isIdle) return;
      }
    },
    stop: async () => {
      if (stopped) return;
      stopped = true;
      await Promise.all([apps.stop(), appsets?.stop()]);
      await git.close();
    },
  };
}
