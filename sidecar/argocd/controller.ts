/**
 * The ArgoCDClaim lifecycle (the shell around switch.ts): check whose switch it is (version first,
 * by a server-side dry run of the switch), hold automated sync off by owning
 * spec.syncPolicy.automated.enabled: false, switch it off again when somebody switches it on, and
 * hand it back as it stood before.
 */
import { FIELD_MANAGER } from "../../queue/contract.js";
import type { ArgoCDPreviousSuspendState } from "../../queue/crds/index.js";
import { StatusReason } from "../../queue/crds/reasons.js";
import {
  apiFailure,
  applicationAutomatedOf,
  applicationSetSpecFields,
  fieldOf,
  type InformerHandle,
  type KObject,
  type Kube,
  KubeError,
  RESOURCES,
  readArgoCDClaim,
  retryOnConflict,
  statusWriter,
} from "../../queue/kube/index.js";
import { applierField, type Logger } from "../../queue/log.js";
import type * as Kind from "../applier-kind.js";
import type { ApplierSource } from "../claims/eligibility.js";
import {
  APPLICATION,
  APPLICATION_SET,
  type Automated,
  owningApplicationSet,
  releaseApply,
  sourceOf,
  switchApply,
  switchState,
} from "./application.js";
import { desiredAfterHandBack, judgeSwitch, planHandBack, planHold } from "./switch.js";

const CLAIM_API = "applygate.dev/v1alpha1";

const cond = (
  type: "InControl" | "Ready",
  status: "True" | "False" | "Unknown",
  reason: string,
  message: string,
) => ({
  type,
  status,
  reason,
  message,
});

const refOf = (claim: KObject) => {
  const r = readArgoCDClaim(claim);
  if (!r.ok) throw new Error(`the claim has no spec.applicationRef: ${r.error}`);
  return { namespace: r.value.spec.applicationRef.namespace, name: r.value.spec.applicationRef.name };
};

/** How automated sync stood before the claim first held it, as recorded on its status. */
const previousOf = (claim: KObject | undefined): ArgoCDPreviousSuspendState | undefined => {
  const r = claim ? readArgoCDClaim(claim) : undefined;
  return r?.ok ? r.value.status?.previousSuspendState : undefined;
};

export interface ArgoCDClaimControllerDeps {
  kube: Kube;
  log: Logger;
  /** Watch Applications to re-run their claims at once when somebody switches automated sync on. */
  watch?: boolean;
  /** The clock the switch probe's answers age on (default the wall clock). */
  now?: () => Date;
}

/** How long the switch probe's answer stands (an upgrade of Argo CD's CRD is caught within it). */
const PROBE_TTL_MS = 60_000;

export class ArgoCDClaimController implements Kind.ClaimController {
  private watcher: InformerHandle<KObject> | undefined;
  /** The switch probe's last answer, and when it was asked. */
  private probe: { at: number; answer: "ok" | "missing" } | undefined;

  constructor(private readonly d: ArgoCDClaimControllerDeps) {}

  /**
   * A pass reads the Application from the watch's cache when it runs (each event of it queues a
   * pass, so a cache behind the server is caught up by the pass its event brings); the API server
   * is read before anything is written.
   */
  private async observed(applier: { namespace: string; name: string }): Promise<KObject | undefined> {
    return this.cached(applier) ?? this.d.kube.get(APPLICATION, applier.namespace, applier.name);
  }

  /** The Application as the watch last delivered it; undefined while it does not run or hold it. */
  private cached(applier: { namespace: string; name: string }): KObject | undefined {
    return this.watcher?.informer.isSynced()
      ? this.watcher.informer.get(applier.name, applier.namespace)
      : undefined;
  }

  applierOf(claim: KObject) {
    return refOf(claim);
  }

  async source(
    _claim: KObject,
    applier: { namespace: string; name: string },
    _ctx?: Kind.ClaimContext,
  ): Promise<ApplierSource> {
    const app = await this.observed(applier);
    if (!app)
      return { state: "Unknown", message: `Application ${applier.namespace}/${applier.name} not found` };
    return sourceOf(app);
  }

  async checkExternal(
    _claim: KObject,
    applier: { namespace: string; name: string },
    _ctx?: Kind.ClaimContext,
  ): Promise<Kind.ExternalCheck> {
    const app = await this.observed(applier);
    if (!app) {
      return {
        configured: "Unknown",
        reason: StatusReason.ApplicationNotFound,
        message: `Application ${applier.namespace}/${applier.name} not found`,
      };
    }
    const probe = await this.probeSwitch(app);
    if (probe === "error") {
      return {
        configured: "Unknown",
        reason: StatusReason.VersionCheckFailed,
        message: "the dry run of the switch failed",
      };
    }
    const verdict = judgeSwitch(app, {
      enabledFieldMissing: probe === "missing",
      ...(await this.applicationSetSwitch(app)),
    });
    return verdict.configured ? { configured: true } : verdict;
  }

  async hold(
    claim: KObject,
    applier: { namespace: string; name: string },
    ctx: Kind.ClaimContext,
  ): Promise<Kind.HoldResult> {
    const recorded = previousOf(claim);
    const cached = this.cached(applier);
    // A write is decided on the API server's answer, not on the cache.
    const app =
      cached && !planHold(cached, recorded !== undefined).write
        ? cached
        : await this.d.kube.get(APPLICATION, applier.namespace, applier.name);
    const name = `${applier.namespace}/${applier.name}`;
    if (!app) {
      const msg = `Application ${name} not found`;
      return {
        conditions: [
          cond("InControl", "Unknown", StatusReason.ApplicationNotFound, msg),
          cond("Ready", "False", StatusReason.ApplicationNotFound, msg),
        ],
      };
    }
    const plan = planHold(app, recorded !== undefined);
    let previous = recorded;
    if (plan.write) {
      if (previous === undefined) {
        // Recorded before the first write: a restart after it must not read our own switch as the user's.
        previous = switchState(applicationAutomatedOf(app));
        await this.recordPrevious(claim, previous);
      }
      await this.d.kube.apply(APPLICATION, switchApply(app, false), {
        fieldManager: FIELD_MANAGER,
        force: true,
      });
      if (plan.event) {
        await ctx.events.emit({
          type: "Normal",
          reason: plan.event,
          action: "HoldAutomatedSyncOff",
          note:
            plan.event === StatusReason.Adopted
              ? `automated sync of Application ${name} held off (it was ${previous})`
              : `automated sync of Application ${name} was switched on; switched off again`,
          regarding: {
            apiVersion: CLAIM_API,
            kind: "ArgoCDClaim",
            namespace: claim.metadata.namespace ?? "",
            name: claim.metadata.name,
            ...(claim.metadata.uid ? { uid: claim.metadata.uid } : {}),
          },
          related: {
            apiVersion: "argoproj.io/v1alpha1",
            kind: "Application",
            namespace: applier.namespace,
            name: applier.name,
            ...(app.metadata.uid ? { uid: app.metadata.uid } : {}),
          },
        });
      }
      this.d.log.info(
        { applier: applierField({ kind: "argocd", ...applier }), event: plan.event, wasOn: plan.wasOn },
        "automated sync held off",
      );
    }
    const op = ctx.operation;
    const conditions = op
      ? [
          cond(
            "InControl",
            "True",
            StatusReason.Applying,
            // No phase here: each phase would be a status write, and each write a pass of its own.
            `operation ${op.token} for ${op.commit}`,
          ),
          cond("Ready", "True", StatusReason.Applying, `operation ${op.token} is in flight`),
        ]
      : [
          cond(
            "InControl",
            "True",
            StatusReason.AutomatedSyncOff,
            `automated sync of Application ${name} is held off`,
          ),
          cond(
            "Ready",
            "True",
            StatusReason.AutomatedSyncOff,
            `automated sync of Application ${name} is held off`,
          ),
        ];
    return { conditions, ...(previous ? { status: { previousSuspendState: previous } } : {}) };
  }

  async handBack(
    claim: KObject,
    applier: { namespace: string; name: string },
    ctx: Kind.ClaimContext,
  ): Promise<Kind.HandBackResult> {
    if (ctx.successor) {
      // Released, automated sync would start at once, unchecked, before the next claim holds it.
      return {
        done: true,
        conditions: [
          cond(
            "InControl",
            "False",
            StatusReason.HandedOver,
            `automated sync left off for claim ${ctx.successor}`,
          ),
        ],
        status: { previousSuspendState: null },
      };
    }
    const app = await this.d.kube.get(APPLICATION, applier.namespace, applier.name);
    if (!app) return { done: true, status: { previousSuspendState: null } };
    const previous = previousOf(claim);
    const appSet = await this.applicationSetSwitch(app);
    const desired = desiredAfterHandBack(
      previous,
      appSet.applicationSetAutomated,
      owningApplicationSet(app) !== undefined,
    );
    const released = await this.d.kube.apply(APPLICATION, releaseApply(app), {
      fieldManager: FIELD_MANAGER,
      dryRun: true,
    });
    const plan = planHandBack(app, desired, released);
    if (plan.action === "release") {
      await this.d.kube.apply(APPLICATION, releaseApply(app), { fieldManager: FIELD_MANAGER });
    } else if (plan.action === "set") {
      await this.d.kube.apply(APPLICATION, switchApply(app, plan.enabled), {
        fieldManager: FIELD_MANAGER,
        force: true,
      });
    }
    this.d.log.info(
      { applier: applierField({ kind: "argocd", ...applier }), plan: plan.action, previous },
      "automated sync handed back",
    );
    const message =
      plan.action === "set"
        ? `automated sync set ${plan.enabled ? "on" : "off"} as it stood before, left under field manager ${FIELD_MANAGER}`
        : "automated sync handed back";
    return {
      done: true,
      conditions: [cond("InControl", "False", StatusReason.Released, message)],
      status: { previousSuspendState: null },
    };
  }

  async start(hooks: { requeueApplier(namespace: string, name: string): void }): Promise<void> {
    if (this.d.watch === false) return;
    this.watcher = this.d.kube.informer(APPLICATION, {
      log: this.d.log,
      onChange: (_type, app) => {
        if (app.metadata.namespace) hooks.requeueApplier(app.metadata.namespace, app.metadata.name);
      },
    });
    await this.watcher.informer.start();
  }

  async stop(): Promise<void> {
    await this.watcher?.release();
  }

  /** Records how the switch stood, on the claim's status, before the first write to it. */
  private async recordPrevious(claim: KObject, previous: ArgoCDPreviousSuspendState): Promise<void> {
    const ns = claim.metadata.namespace ?? "";
    await retryOnConflict(
      () => this.d.kube.get<KObject>(RESOURCES.argoCDClaim, ns, claim.metadata.name),
      (current) => (current && !previousOf(current) ? previous : undefined),
      (current) =>
        statusWriter(this.d.kube, "claim", "claim-controller").patch(
          RESOURCES.argoCDClaim,
          ns,
          claim.metadata.name,
          { previousSuspendState: previous },
          current?.metadata.resourceVersion,
        ),
    );
  }

  /**
   * Argo CD before 3.1 has no `enabled`: a strict server-side dry run of the switch is refused for
   * an unknown field there, and accepted (writing nothing) from 3.1 on.
   */
  private async probeSwitch(app: KObject): Promise<"ok" | "missing" | "error"> {
    // The answer is the Application CRD's, not the Application's: asked once a minute, not on
    // every pass (each status write of Argo CD's brings one, and, the CRD having no status
    // subresource, moves the generation too).
    const now = (this.d.now?.() ?? new Date()).getTime();
    if (this.probe && now - this.probe.at < PROBE_TTL_MS) return this.probe.answer;
    const remember = (answer: "ok" | "missing") => {
      this.probe = { at: now, answer };
      return answer;
    };
    try {
      await this.d.kube.apply(APPLICATION, switchApply(app, false), {
        dryRun: true,
        fieldValidation: "Strict",
      });
      return remember("ok");
    } catch (err) {
      // The API's own answer, without the name of the call kube.apply puts around it.
      const f = err instanceof KubeError ? err.failure : apiFailure(err);
      if (f.code === 400 && /enabled/.test(f.message) && /unknown field|not declared/.test(f.message))
        return remember("missing");
      this.d.log.warn({ err: f.message }, "dry run of the switch failed");
      return "error";
    }
  }

  /** The generating ApplicationSet's template switch, when there is one and it can be read. */
  private async applicationSetSwitch(app: KObject): Promise<{ applicationSetAutomated?: Automated | null }> {
    const owner = owningApplicationSet(app);
    if (!owner) return {};
    try {
      const set = await this.d.kube.get(APPLICATION_SET, app.metadata.namespace ?? "", owner);
      const template = fieldOf(applicationSetSpecFields, set?.spec, "template");
      if (!template) return {};
      return { applicationSetAutomated: applicationAutomatedOf(template) ?? null };
    } catch {
      return {};
    }
  }
}
