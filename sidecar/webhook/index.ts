/**
 * The webhook applier kind: what `applygate sidecar --applier webhook` loads. It runs as its own
 * Deployment (docs/design/webhook-applier.md): it calls the endpoints WebhookClaims name, records
 * each operation on its claim, and reads the tool's reports the gateway queues in Redis.
 */
import type { ApplierDeps, ApplierKindModule } from "../applier-kind.js";
import type { WatchedKind } from "../watch-kinds.js";
import { type CallbackStore, redisCallbacks } from "./callbacks.js";
import { WebhookClaimController } from "./controller.js";
import { WebhookExecutor, type WebhookExecutorOptions } from "./executor.js";
import { HmacKeys } from "./keys.js";
import { WebhookWindowObserver } from "./observer.js";

export { WebhookClaimController } from "./controller.js";
export { WebhookExecutor } from "./executor.js";

/** The webhook kind's settings. */
export interface WebhookKindOptions extends WebhookExecutorOptions {
  /** Where reports are read from; from deps.redis and deps.redisPrefix when omitted. */
  callbacks?: CallbackStore;
  /** Kinds whose writes by the claims' field managers the window observer watches. */
  watchKinds?: WatchedKind[];
  /** How long after an operation ends its window still reports the tool's writes (default 10 s). */
  windowGraceMs?: number;
}

export function createApplierKind(deps: ApplierDeps<WebhookKindOptions>) {
  const o = deps.options ?? {};
  const log = deps.log.child({ applier: "webhook" });
  let callbacks = o.callbacks;
  if (!callbacks) {
    if (!deps.redis || deps.redisPrefix === undefined)
      throw new Error("the webhook applier needs Redis for the tool's reports");
    callbacks = redisCallbacks(deps.redis, deps.redisPrefix);
  }
  const keys = new HmacKeys(deps.kube);
  const { callbacks: _c, watchKinds, windowGraceMs, ...options } = o;
  const windowObserver = new WebhookWindowObserver({
    kube: deps.kube,
    reporter: deps.reporter,
    log,
    now: deps.now,
    ...(Array.isArray(watchKinds) ? { kinds: watchKinds } : {}),
    ...(typeof windowGraceMs === "number" ? { graceMs: windowGraceMs } : {}),
  });
  const executor = new WebhookExecutor({
    kube: deps.kube,
    log,
    events: deps.events,
    now: deps.now,
    checks: deps.checks,
    keys,
    callbacks,
    options,
    windows: windowObserver,
  });
  return { executor, controller: new WebhookClaimController(keys), windowObserver };
}

/** Checked here so a change to the kind contract fails the build in this module. */
export const module: ApplierKindModule<WebhookKindOptions> = { createApplierKind };
