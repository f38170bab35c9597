/**
 * Who owns the automated-sync switch, and what holding and handing it back write (pure). We own
 * spec.syncPolicy.automated.enabled: false by server-side apply and touch nothing else of
 * `automated`. A switch an ApplicationSet or another applying manager owns is never written, only
 * checked, and refused while it is on. A hand-back puts the switch back as it stood before.
 */

import type { ArgoCDPreviousSuspendState } from "../../queue/crds/index.js";
import { StatusReason } from "../../queue/crds/reasons.js";
import { applicationAutomatedOf, type KObject } from "../../queue/kube/index.js";
import {
  type Automated,
  isAutomatedSyncEnabled,
  otherSwitchAppliers,
  owningApplicationSet,
  sourceOf,
  stateIsOn,
  weHoldSwitch,
} from "./application.js";

export type SwitchVerdict =
  | { configured: true }
  | {
      configured: false;
      reason:
        | typeof StatusReason.UnsupportedSource
        | typeof StatusReason.OwnedByApplicationSet
        | typeof StatusReason.AutomatedSyncOwnedElsewhere
        | typeof StatusReason.ArgoCDVersionNotSupported;
      message: string;
    };

export interface SwitchInputs {
  /** The server-side dry run of the switch was refused for an undeclared field (Argo CD before 3.1). */
  enabledFieldMissing: boolean;
  /** The generating ApplicationSet's template switch, when it could be read. */
  applicationSetAutomated?: Automated | null;
}

/** Whether the claim may hold the Application's switch. */
export function judgeSwitch(app: KObject, inputs: SwitchInputs): SwitchVerdict {
  if (inputs.enabledFieldMissing) {
    return {
      configured: false,
      reason: StatusReason.ArgoCDVersionNotSupported,
      message:
        "the Application schema has no spec.syncPolicy.automated.enabled (Argo CD before 3.1); automated sync cannot be held off",
    };
  }
  const source = sourceOf(app);
  if (source.state === "Unsupported")
    return { configured: false, reason: source.reason, message: source.message };
  const on = isAutomatedSyncEnabled(applicationAutomatedOf(app));
  const appSet = owningApplicationSet(app);
  if (appSet !== undefined) {
    const templateOn =
      inputs.applicationSetAutomated !== undefined && isAutomatedSyncEnabled(inputs.applicationSetAutomated);
    if (on || templateOn) {
      return {
        configured: false,
        reason: StatusReason.OwnedByApplicationSet,
        message: `ApplicationSet ${appSet} generates this Application with automated sync on; set syncPolicy.automated.enabled: false in its template`,
      };
    }
  }
  const others = otherSwitchAppliers(app);
  if (others.length > 0 && on) {
    return {
      configured: false,
      reason: StatusReason.AutomatedSyncOwnedElsewhere,
      message: `field manager ${others.join(", ")} applies spec.syncPolicy.automated.enabled and keeps automated sync on; remove the field from what it applies`,
    };
  }
  return { configured: true };
}

export type HoldPlan =
  | { write: false }
  | {
      write: true;
      event?: typeof StatusReason.Adopted | typeof StatusReason.ClaimedResourceReconciled;
      wasOn: boolean;
    };

/**
 * Whether to apply the switch off. `adopted`: the claim already recorded how the switch stood
 * before (status.previousSuspendState), so a switch found on now was switched on by somebody.
 */
export function planHold(app: KObject, adopted: boolean): HoldPlan {
  const automated = applicationAutomatedOf(app);
  const on = isAutomatedSyncEnabled(automated);
  if (!on && automated?.enabled === false && weHoldSwitch(app)) return { write: false };
  if (!adopted) return { write: true, event: StatusReason.Adopted, wasOn: on };
  return on
    ? { write: true, event: StatusReason.ClaimedResourceReconciled, wasOn: true }
    : { write: true, wasOn: false };
}

/** How the switch should stand once handed back: the ApplicationSet's template, else as before. */
export function desiredAfterHandBack(
  previous: ArgoCDPreviousSuspendState | undefined,
  applicationSetAutomated: Automated | null | undefined,
  controlledByApplicationSet: boolean,
): boolean | undefined {
  if (controlledByApplicationSet && applicationSetAutomated !== undefined) {
    return isAutomatedSyncEnabled(applicationSetAutomated);
  }
  return previous === undefined ? undefined : stateIsOn(previous);
}

export type HandBackPlan =
  /** Nothing of ours is on the Application. */
  | { action: "none" }
  /** Giving the field up leaves the switch as it should be. */
  | { action: "release" }
  /** Giving it up would leave it otherwise: set the value and keep it, for its owner to change. */
  | { action: "set"; enabled: boolean };

/**
 * `released` is the Application as a dry run of giving the field up returns it. With no record of
 * how it stood, the field is given up as it is.
 */
export function planHandBack(app: KObject, desiredOn: boolean | undefined, released: KObject): HandBackPlan {
  if (!weHoldSwitch(app)) return { action: "none" };
  if (desiredOn === undefined) return { action: "release" };
  const after = isAutomatedSyncEnabled(applicationAutomatedOf(released));
  if (after === desiredOn) return { action: "release" };
  return { action: "set", enabled: desiredOn };
}
