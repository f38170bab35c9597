/**
 * The FluxClaim lifecycle: adopt (spec.suspend: true by server-side apply with a token, recording
 * how it stood), hold (suspend again whatever somebody else resumed, every time), make an
 * unfollowed operation safe, and hand back (suspend an apply in flight, then release the field,
 * or leave it suspended for a successor or because it was suspended before).
 */

import { StatusReason } from "../../queue/crds/reasons.js";
import { errorMessage } from "../../queue/errors.js";
import {
  artifactRevisionOf,
  ConflictRetriesExhausted,
  fluxSpecField,
  fluxSuspended,
  gitRepositoryRefOf,
  isConflict,
  type KObject,
  KubeError,
  kustomizationSourceOf,
  RESOURCES,
  readFluxClaim,
} from "../../queue/kube/index.js";
import { applierField, type Logger } from "../../queue/log.js";
import type {
  ClaimContext,
  ClaimController,
  ExternalCheck,
  HandBackResult,
  HoldResult,
} from "../applier-kind.js";
import type { ConditionInput } from "../claims/conditions.js";
import type { ApplierSource } from "../claims/eligibility.js";
import {
  type ClaimLocator,
  completeOperation,
  isInFlight,
  type Operation,
  RecordRefused,
  readOperation,
  recordOperation,
  updateOperation,
} from "../operation-record.js";
import { type FluxClient, newToken } from "./client.js";
import { commitOfRevision, tokenHandled } from "./outcome.js";
import { keyOf, type ObjectKey, requestedAtOf } from "./resources.js";
import { appliesSuspend, checkSuspendOwnership, suspendAppliers } from "./suspend-owner.js";

export interface FluxControllerDeps {
  client: FluxClient;
  log: Logger;
  /** Re-run the claim this soon while a token is out (default 1 s). */
  shortRequeueMs?: number;
  /** How often a held claim reads its Kustomization, bounding an unseen external resume (default 1 minute). */
  resyncMs?: number;
}

const CLAIM_API = "applygate.dev/v1alpha1";

/** The claim's own status fields (none when it does not fit its schema). */
const statusOf = (claim: KObject) => {
  const r = readFluxClaim(claim);
  return (r.ok && r.value.status) || {};
};
const locator = (claim: KObject): ClaimLocator => ({
  type: RESOURCES.fluxClaim,
  namespace: claim.metadata.namespace ?? "",
  name: claim.metadata.name,
});
const regarding = (claim: KObject) => ({
  apiVersion: CLAIM_API,
  kind: "FluxClaim",
  namespace: claim.metadata.namespace ?? "",
  name: claim.metadata.name,
  ...(claim.metadata.uid ? { uid: claim.metadata.uid } : {}),
});

const inControl = (status: ConditionInput["status"], reason: string, message: string): ConditionInput => ({
  type: "InControl",
  status,
  reason,
  message,
});
const ready = (status: ConditionInput["status"], reason: string, message: string): ConditionInput => ({
  type: "Ready",
  status,
  reason,
  message,
});

/** Held by us and settled: suspended under our field manager, its token handled. */
function heldSettled(ks: KObject): boolean {
  return fluxSuspended(ks) && appliesSuspend(ks) && suspendSettled(ks);
}

/** The suspend on the Kustomization is handled: it is suspended and its current token was seen. */
function suspendSettled(ks: KObject): boolean {
  if (!fluxSuspended(ks)) return false;
  const token = requestedAtOf(ks);
  return token === undefined || tokenHandled(ks, token);
}

export class FluxClaimController implements ClaimController {
  private readonly short: number;
  private readonly resync: number;

  constructor(private readonly d: FluxControllerDeps) {
    this.short = d.shortRequeueMs ?? 1_000;
    this.resync = d.resyncMs ?? 60_000;
  }

  applierOf(claim: KObject): ObjectKey {
    const r = readFluxClaim(claim);
    const ref = r.ok ? r.value.spec.kustomizationRef : undefined;
    return { namespace: ref?.namespace ?? claim.metadata.namespace ?? "", name: ref?.name ?? "" };
  }

  // A pass reads the Kustomization and its GitRepository from the watch's cache (every event of
  // either queues a pass, so a cache behind the server is caught up by the pass its event brings);
  // the API server is read before anything is written (hold), and the executor rechecks before a
  // resume.

  async source(_claim: KObject, applier: ObjectKey, _ctx?: ClaimContext): Promise<ApplierSource> {
    const ks = await this.d.client.observedKustomization(applier);
    if (!ks) return { state: "Unknown", message: `Kustomization ${keyOf(applier)} was not found` };
    const ref = kustomizationSourceOf(ks, "none");
    if (ref?.kind !== "GitRepository") {
      return {
        state: "Unsupported",
        reason: StatusReason.UnsupportedSource,
        message: `Kustomization ${keyOf(applier)} reads a ${ref?.kind ?? "missing"} source; only a GitRepository is supported`,
      };
    }
    const src = await this.d.client.observedSource(ref);
    if (!src) return { state: "Unknown", message: `GitRepository ${keyOf(ref)} was not found` };
    const { branch, ...pins } = gitRepositoryRefOf(src);
    const pinned = Object.keys(pins).length > 0;
    if (!branch || pinned) {
      return {
        state: "Unsupported",
        reason: StatusReason.SourceNotABranch,
        message: `GitRepository ${keyOf(ref)} does not follow a branch (spec.ref.branch alone)`,
      };
    }
    return { state: "Known", url: fluxSpecField(src, "url") ?? "", branch };
  }

  async checkExternal(_claim: KObject, applier: ObjectKey, _ctx?: ClaimContext): Promise<ExternalCheck> {
    const ks = await this.d.client.observedKustomization(applier);
    if (!ks) {
      return {
        configured: "Unknown",
        reason: StatusReason.KustomizationNotFound,
        message: `Kustomization ${keyOf(applier)} was not found`,
      };
    }
    const owner = checkSuspendOwnership(ks);
    if (!owner.ok) return { configured: false, reason: owner.reason, message: owner.message };
    return { configured: true };
  }

  async hold(claim: KObject, applier: ObjectKey, ctx: ClaimContext): Promise<HoldResult> {
    // Held and settled, or an operation in flight, as the cache shows it: nothing to write.
    const cached = this.d.client.cachedKustomization(applier);
    if (cached && isInFlight(ctx.operation)) return this.applying(claim, applier, ctx.operation, ctx);
    if (cached && statusOf(claim).previousSuspendState !== undefined && heldSettled(cached))
      return this.held(applier);
    // Anything else may write: decided on the API server's answer.
    const ks = await this.d.client.kustomization(applier);
    if (!ks) {
      const msg = `Kustomization ${keyOf(applier)} was not found`;
      return {
        conditions: [
          inControl("Unknown", StatusReason.KustomizationNotFound, msg),
          ready("False", StatusReason.KustomizationNotFound, msg),
        ],
        requeueAfterMs: this.resync,
      };
    }
    if (isInFlight(ctx.operation)) return this.applying(claim, applier, ctx.operation, ctx);

    const status = statusOf(claim);
    if (status.previousSuspendState === undefined) return this.adopt(claim, applier, ks, ctx);

    if (!fluxSuspended(ks)) {
      // Read the operation again after the Kustomization: one recorded meanwhile is no external resume.
      const op = await readOperation(ctx.kube, locator(claim));
      if (isInFlight(op)) return this.applying(claim, applier, op, ctx);
      return this.resuspendExternal(claim, applier, ks, ctx);
    }
    if (!appliesSuspend(ks)) {
      // Suspended, but the field is not ours any more (a flux suspend took it): take it back.
      await this.writeSuspend(applier, ks, newToken(ctx.now()), ctx.log);
      return this.suspending("taking spec.suspend back");
    }
    if (!suspendSettled(ks)) return this.suspending("waiting for the suspend's token to be handled");
    return this.held(applier);
  }

  private held(applier: ObjectKey): HoldResult {
    return {
      conditions: [
        inControl(
          "True",
          StatusReason.Suspended,
          `Kustomization ${keyOf(applier)} is held suspended; each apply resumes it once`,
        ),
        ready("True", StatusReason.Suspended, `Kustomization ${keyOf(applier)} is held suspended`),
      ],
      requeueAfterMs: this.resync,
    };
  }

  async handBack(claim: KObject, applier: ObjectKey, ctx: ClaimContext): Promise<HandBackResult> {
    const ks = await this.d.client.kustomization(applier);
    if (!ks) return { done: true, status: { previousSuspendState: null } };
    const releasing = (message: string): HandBackResult => ({
      done: false,
      conditions: [
        inControl("False", StatusReason.Releasing, message),
        ready("Unknown", StatusReason.Releasing, message),
      ],
      requeueAfterMs: this.short,
      leftAs: `${fluxSuspended(ks) ? "suspended under applygate" : "resumed"} (Kustomization ${keyOf(applier)}: ${message})`,
    });
    // An apply in flight is suspended first, and its token handled.
    if (!fluxSuspended(ks)) {
      await this.writeSuspend(applier, ks, newToken(ctx.now()), ctx.log);
      return releasing("suspending the apply in flight before handing back");
    }
    if (!suspendSettled(ks)) return releasing("waiting for the suspend's token to be handled");
    const op = ctx.operation;
    if (isInFlight(op)) {
      if (ctx.following.isFollowed(op.token))
        return releasing(`waiting for operation ${op.token} to complete`);
      await completeOperation(ctx.kube, locator(claim), op.token, {
        phase: "Failed",
        outcome: StatusReason.ClaimReleased,
        message: "the claim let go of its Kustomization while the operation was not followed",
      }).catch(() => undefined);
    }
    const status = statusOf(claim);
    if (ctx.successor) return this.released(applier, ctx, `left suspended for claim ${ctx.successor}`);
    if (status.previousSuspendState === "Suspended")
      return this.released(applier, ctx, "left suspended, as it was before the claim held it");
    try {
      await this.d.client.release(applier);
    } catch (err) {
      if (isConflict(err)) return releasing("the Kustomization changed; releasing again");
      return releasing(`the release failed: ${errorMessage(err)}`);
    }
    const after = await this.d.client.kustomization(applier);
    const others = suspendAppliers(after);
    return this.released(
      applier,
      ctx,
      others.length
        ? `released; spec.suspend stays with ${others.join(", ")}`
        : "released; Flux applies it on its own again",
    );
  }

  async settleUnfollowed(
    claim: KObject,
    applier: ObjectKey,
    operation: Operation,
    ctx: ClaimContext,
  ): Promise<boolean> {
    const ks = await this.d.client.kustomization(applier);
    if (!ks) return true;
    if (suspendSettled(ks) && requestedAtOf(ks) !== undefined) return true;
    if (fluxSuspended(ks) && requestedAtOf(ks) === operation.suspendToken) return false;
    const token = newToken(ctx.now());
    await updateOperation(ctx.kube, locator(claim), operation.token, { suspendToken: token }).catch(
      () => undefined,
    );
    await this.writeSuspend(applier, ks, token, ctx.log);
    await ctx.events.emit({
      type: "Warning",
      reason: StatusReason.OperationUnfollowed,
      action: "Suspend",
      note: `operation ${operation.token} was followed by nobody for over a minute; Kustomization ${keyOf(applier)} is suspended and the operation fails`,
      regarding: regarding(claim),
    });
    return false;
  }

  async start(hooks: { requeueApplier(namespace: string, name: string): void }): Promise<void> {
    await this.d.client.start((ks) => hooks.requeueApplier(ks.metadata.namespace ?? "", ks.metadata.name));
  }

  async stop(): Promise<void> {
    await this.d.client.stop();
  }

  // -------------------------------------------------------------------------------------------

  private applying(claim: KObject, applier: ObjectKey, op: Operation, ctx: ClaimContext): HoldResult {
    if (!op.resumeToken && !ctx.following.isFollowed(op.token)) {
      // Our own record of an external resume: followed whenever it is listed, until its suspend is handled.
      ctx.follow({ claim: locator(claim), applier, operation: op, branchKey: ctx.branchKey ?? "" });
    }
    const unresolved = op.phase === "Unresolved";
    return {
      conditions: [
        // No phase here: each phase would be a status write, and each write a pass of its own.
        inControl("True", StatusReason.Applying, `operation ${op.token} for ${op.commit}`),
        unresolved
          ? ready(
              "False",
              StatusReason.OperationUnresolved,
              `operation ${op.token} did not complete in time; still followed`,
            )
          : ready("True", StatusReason.Applying, `operation ${op.token} is in flight`),
      ],
      requeueAfterMs: this.short,
    };
  }

  private suspending(message: string): HoldResult {
    return {
      conditions: [
        inControl("Unknown", StatusReason.Suspending, message),
        ready("Unknown", StatusReason.Suspending, message),
      ],
      requeueAfterMs: this.short,
    };
  }

  private async adopt(
    claim: KObject,
    applier: ObjectKey,
    ks: KObject,
    ctx: ClaimContext,
  ): Promise<HoldResult> {
    const previous = fluxSuspended(ks) && !appliesSuspend(ks) ? "Suspended" : "Resumed";
    const token = newToken(ctx.now());
    await this.writeSuspend(applier, ks, token, ctx.log);
    await ctx.events.emit({
      type: "Normal",
      reason: StatusReason.Adopted,
      action: "Suspend",
      note: `holding Kustomization ${keyOf(applier)} suspended (it was ${previous.toLowerCase()}); every apply is now started by applygate`,
      regarding: regarding(claim),
    });
    return {
      ...this.suspending("adopting: waiting for the suspend's token to be handled"),
      status: { previousSuspendState: previous },
    };
  }

  private async resuspendExternal(
    claim: KObject,
    applier: ObjectKey,
    ks: KObject,
    ctx: ClaimContext,
  ): Promise<HoldResult> {
    const suspendToken = newToken(ctx.now());
    const ref = kustomizationSourceOf(ks, "none");
    const source = ref ? await this.d.client.source(ref) : undefined;
    const commit =
      commitOfRevision(artifactRevisionOf(source)) ?? statusOf(claim).lastAppliedCommit ?? "unknown";
    const token = `external-${newToken(ctx.now())}`;
    let op: Operation;
    try {
      ({ operation: op } = await recordOperation(
        ctx.kube,
        locator(claim),
        {
          token,
          commit,
          targets: [],
          phase: "Unresolved",
          suspendToken,
          message: "resumed by somebody else; suspended again",
        },
        { now: ctx.now },
      ));
    } catch (err) {
      if (err instanceof RecordRefused) return this.suspending(`not suspended yet: ${err.message}`);
      throw err;
    }
    await this.writeSuspend(applier, ks, suspendToken, ctx.log);
    ctx.log.info(
      { applier: applierField({ kind: "flux", ...applier }), token },
      "resumed by somebody else; suspended again",
    );
    await ctx.events.emit({
      type: "Normal",
      reason: StatusReason.ClaimedResourceReconciled,
      action: "Suspend",
      note: `Kustomization ${keyOf(applier)} was resumed outside applygate and may have applied ${commit}; suspended again`,
      regarding: regarding(claim),
    });
    return this.applying(claim, applier, op, ctx);
  }

  /**
   * Suspend with a token, guarded by a fresh read (a conflict reads again, as the retry policy says);
   * one still conflicting, or a Kustomization gone meanwhile, is left to the next pass.
   */
  private async writeSuspend(applier: ObjectKey, _read: KObject, token: string, log: Logger) {
    try {
      await this.d.client.suspend(applier, token);
    } catch (err) {
      if (err instanceof ConflictRetriesExhausted || (err instanceof KubeError && err.code === 404)) {
        log.info({ err: err.message }, "the Kustomization kept changing under the suspend; next pass");
        return;
      }
      throw err;
    }
  }

  /** Handed back (or over): the reconciler records the Event, its note this condition's message. */
  private released(applier: ObjectKey, ctx: ClaimContext, how: string): HandBackResult {
    ctx.log.info({ applier: applierField({ kind: "flux", ...applier }) }, how);
    const message = `Kustomization ${keyOf(applier)} handed back: ${how}`;
    return {
      done: true,
      conditions: [
        inControl("False", ctx.successor ? StatusReason.HandedOver : StatusReason.Released, message),
      ],
      status: { previousSuspendState: null },
    };
  }
}
