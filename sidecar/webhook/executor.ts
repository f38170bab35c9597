/**
 * Carries out one apply through a WebhookClaim's endpoint (the imperative shell around
 * request.ts, send.ts and outcome.ts): record the operation on the claim, the last checks, open
 * the token for reports, send the signed request once, and follow the operation to its observed
 * end: the answer (mode response) or the tool's reports (mode callback). Never sends twice: a
 * lost answer is Unresolved, and every retry is the branch worker's decision.
 */

import { randomUUID } from "node:crypto";
import type { LookupAddress } from "node:dns";
import { backoffMs } from "../../queue/backoff.js";
import type { Attempt } from "../../queue/contract.js";
import { type WebhookClaim, type WebhookClaimSpec, webhookClaim } from "../../queue/crds/index.js";
import { StatusReason } from "../../queue/crds/reasons.js";
import { errorMessage } from "../../queue/errors.js";
import { type KObject, type Kube, RESOURCES, readObject } from "../../queue/kube/index.js";
import type { Logger } from "../../queue/log.js";
import type * as Kind from "../applier-kind.js";
import { notStarted } from "../applier-kind.js";
import type { EventRecorder } from "../events.js";
import {
  type ClaimLocator,
  type OperationChange,
  RecordRefused,
  recordOperation,
  withdrawOperation,
} from "../operation-record.js";
import * as steps from "../operation-steps.js";
import { sleepUnlessAborted } from "../sleep.js";
import type { CallbackStore } from "./callbacks.js";
import type { HmacKeys } from "./keys.js";
import type { WebhookWindow } from "./observer.js";
import { judgeReport, judgeSend, type SendResult } from "./outcome.js";
import { requestBody, signedRequest } from "./request.js";
import { type SendOptions, sendRequest } from "./send.js";

export interface WebhookExecutorOptions {
  /** Loopback, link-local and metadata addresses allowed (the playground); refused by default. */
  allowInternal?: boolean;
  /** Private ranges refused too; allowed by default (in-cluster tools live there). */
  refusePrivate?: boolean;
  /** Between reads of the callback reports (default 250 ms). */
  pollMs?: number;
  /** The read interval of an Unresolved operation doubles up to this (default 30 s). */
  maxPollMs?: number;
  /** Extra CA for https endpoints (tests). */
  ca?: string | Buffer;
  /** Name resolution (tests). */
  resolve?: (host: string) => Promise<LookupAddress[]>;
  /** Replaces the HTTP send (tests of a lost answer). */
  send?: (o: SendOptions) => Promise<SendResult>;
}

export interface WebhookExecutorDeps {
  kube: Kube;
  log: Logger;
  events: EventRecorder;
  now: () => Date;
  checks: Kind.SafetyChecks;
  keys: HmacKeys;
  callbacks: CallbackStore;
  options?: WebhookExecutorOptions;
  /** The apply window: opened just before the request, closed when the operation ends. */
  windows?: Kind.WindowHooks<WebhookWindow>;
}

interface Ctx {
  token: string;
  branchKey: string;
  commit: string;
  claim: ClaimLocator;
  spec: WebhookClaimSpec;
  report: Kind.ReportFn;
  signal: AbortSignal;
  log: Logger;
}

/** How the operation is followed after the request. */
interface Follow {
  /** Unresolved already (a lost answer, or the budget passed). */
  unresolved: boolean;
  /** When the budget ends (ms since the epoch). */
  budgetEndsAt: number;
  /** A lost answer in mode response: without a report by the budget's end, Failed (AnswerLost). */
  failAtBudget: boolean;
}

export class WebhookExecutor implements Kind.OperationExecutor {
  private readonly pollMs: number;
  private readonly maxPollMs: number;

  constructor(private readonly d: WebhookExecutorDeps) {
    this.pollMs = d.options?.pollMs ?? 250;
    this.maxPollMs = d.options?.maxPollMs ?? 30_000;
  }

  private locator(ns: string, name: string): ClaimLocator {
    return { type: RESOURCES.webhookClaim, namespace: ns, name };
  }

  private async readClaim(claim: ClaimLocator): Promise<WebhookClaim | undefined> {
    const o = await this.d.kube.get<KObject>(RESOURCES.webhookClaim, claim.namespace, claim.name);
    if (!o) return undefined;
    const r = readObject(webhookClaim, o);
    if (!r.ok)
      throw new Error(`WebhookClaim ${claim.namespace}/${claim.name} does not fit its schema: ${r.error}`);
    return r.value;
  }

  async execute(attempt: Attempt, report: Kind.ReportFn, signal: AbortSignal): Promise<void> {
    const claim = this.locator(attempt.claim.namespace, attempt.claim.name);
    const log = this.d.log.child({
      applier: "webhook",
      claim: `${claim.namespace}/${claim.name}`,
      token: attempt.token,
      commit: attempt.commit,
      branch: attempt.branchKey,
    });
    const typed = await this.readClaim(claim);
    if (!typed)
      return report("Dropped", {
        reason: StatusReason.ClaimNotFound,
        message: "the WebhookClaim does not exist",
      });
    const spec = typed.spec;
    const c: Ctx = {
      token: attempt.token,
      branchKey: attempt.branchKey,
      commit: attempt.commit,
      claim,
      spec,
      report,
      signal,
      log,
    };
    const key = await this.d.keys.read(claim.namespace, spec.secretRef.name, spec.secretRef.key);
    if (!key.ok) return report("RequestFailed", { reason: key.reason, message: key.message });

    let recorded: { previous?: Awaited<ReturnType<typeof recordOperation>>["previous"] };
    try {
      const r = await recordOperation(
        this.d.kube,
        claim,
        {
          token: c.token,
          commit: c.commit,
          targets: attempt.targets.map((t) => ({ uid: t.uid, reason: t.reason })),
        },
        { now: this.d.now },
      );
      recorded = r.previous ? { previous: r.previous } : {};
    } catch (err) {
      if (!(err instanceof RecordRefused)) throw err;
      return report(err.reason === StatusReason.OperationInFlight ? "RequestFailed" : "Dropped", {
        reason: err.reason,
        message: err.message,
      });
    }
    // The request was not sent: nothing to follow, and no record stays on the claim.
    const end = (r: Kind.NotStarted) =>
      steps.endNotStarted(r, {
        report,
        log,
        closeWindow: () => this.d.windows?.close(c.token),
        withdraw: async () => {
          await this.d.callbacks.close(c.token).catch(() => {});
          await withdrawOperation(this.d.kube, claim, c.token, recorded.previous);
        },
      });

    // Until the request is sent, a failure (Redis or the API server away) is known to have sent
    // nothing: the record is withdrawn and the attempt ends RequestFailed. Left to the generic
    // RequestFailed, the record stayed Requested, restart recovery took it for a request whose
    // answer was lost, and it was followed as Unresolved for good while every later attempt was
    // refused OperationInFlight (soak --mirror seed 51029, Redis down during the attempt).
    try {
      // The last checks, beside the Requested report, just before the request that starts the apply.
      const refused = await steps.lastChecks(attempt, this.d.checks, report("Requested"));
      if (refused) return end(refused);
      if (signal.aborted)
        return end(
          notStarted("RequestFailed", StatusReason.SidecarStopping, "the sidecar stopped before the request"),
        );

      // Open for reports before sending: a tool may report before it answers.
      await this.d.callbacks.open(c.token, {
        claim: { namespace: claim.namespace, name: claim.name },
        signature: spec.signature,
      });
    } catch (err) {
      return end(
        notStarted("RequestFailed", StatusReason.NotSent, `the request was not sent: ${errorMessage(err)}`),
      );
    }
    // The window opens before the request: the tool may apply before its answer is read.
    await this.openWindow(c);
    const deliveryId = randomUUID();
    const { bytes, headers } = signedRequest(requestBody(attempt), {
      key: key.key,
      style: spec.signature,
      deliveryId,
    });
    const sentAt = this.d.now();
    const send = this.d.options?.send ?? sendRequest;
    const result = await send({
      url: spec.url,
      bytes,
      headers,
      timeoutMs: spec.timeoutSeconds * 1000,
      insecure: spec.insecure === true,
      allowInternal: this.d.options?.allowInternal === true,
      refusePrivate: this.d.options?.refusePrivate === true,
      signal,
      ...(this.d.options?.ca ? { ca: this.d.options.ca } : {}),
      ...(this.d.options?.resolve ? { resolve: this.d.options.resolve } : {}),
    });
    const verdict = judgeSend(spec.completion.mode, result, spec.timeoutSeconds);
    log.info({ delivery: deliveryId, result: result.kind, phase: verdict.phase }, "request sent");
    const budgetEndsAt = sentAt.getTime() + spec.completion.budgetSeconds * 1000;
    switch (verdict.phase) {
      case "RequestFailed":
        return end(notStarted("RequestFailed", verdict.reason, verdict.message));
      case "Succeeded":
        return this.complete(c, "Succeeded", undefined, verdict.message);
      case "Failed":
        return this.complete(c, "Failed", verdict.outcome, verdict.message);
      case "Running":
        if (
          !(await this.move(c, {
            phase: "Running",
            startedAt: sentAt.toISOString(),
            message: verdict.message,
          }))
        )
          return;
        await report("Running", { message: verdict.message });
        return this.follow(c, { unresolved: false, budgetEndsAt, failAtBudget: false });
      case "Unresolved":
        await this.markUnresolved(c, verdict.outcome, verdict.message);
        return this.follow(c, {
          unresolved: true,
          budgetEndsAt,
          failAtBudget: spec.completion.mode === "response",
        });
    }
  }

  /**
   * An operation recorded before a restart. Requested: this process may have sent the request
   * (and lost its answer with it), so it is Unresolved and never sent again. Running and
   * Unresolved are followed on from their reports.
   */
  async recover(r: Kind.RecoveredOperation, report: Kind.ReportFn, signal: AbortSignal): Promise<void> {
    const log = this.d.log.child({
      applier: "webhook",
      claim: `${r.claim.namespace}/${r.claim.name}`,
      token: r.operation.token,
      commit: r.operation.commit,
      branch: r.branchKey,
      recovered: true,
    });
    const typed = await this.readClaim(r.claim);
    if (!typed)
      return report("Failed", { reason: StatusReason.ClaimGone, message: "the WebhookClaim was deleted" });
    const spec = typed.spec;
    const c: Ctx = {
      token: r.operation.token,
      branchKey: r.branchKey,
      commit: r.operation.commit,
      claim: r.claim,
      spec,
      report,
      signal,
      log,
    };
    const startedAt = r.operation.startedAt ?? r.operation.requestedAt;
    // Opened again by this process: the tool's writes since the start, made while nobody watched, too.
    await this.openWindow(c, startedAt);
    await this.d.callbacks.open(c.token, {
      claim: { namespace: r.claim.namespace, name: r.claim.name },
      signature: spec.signature,
    });
    const from = Date.parse(startedAt);
    const budgetEndsAt =
      (Number.isFinite(from) ? from : this.d.now().getTime()) + spec.completion.budgetSeconds * 1000;
    const mode = spec.completion.mode;
    log.info({ phase: r.operation.phase }, "following a recovered operation");
    if (r.operation.phase === "Requested") {
      await this.markUnresolved(
        c,
        StatusReason.AnswerLost,
        "the sidecar restarted while the request was under way; not known whether the endpoint has it, and it is not sent again",
      );
      return this.follow(c, { unresolved: true, budgetEndsAt, failAtBudget: mode === "response" });
    }
    const unresolved = r.operation.phase === "Unresolved";
    return this.follow(c, { unresolved, budgetEndsAt, failAtBudget: unresolved && mode === "response" });
  }

  /** Reads the tool's reports until one ends the operation; the budget only marks it Unresolved. */
  private async follow(c: Ctx, f: Follow): Promise<void> {
    let unresolved = f.unresolved;
    let interval = this.pollMs;
    // Unresolved, each wait doubles the interval (the n-th wait is the n-th step of the backoff).
    let waits = 1;
    for (;;) {
      if (c.signal.aborted) return;
      let read: Awaited<ReturnType<CallbackStore["read"]>> = { reports: [], entries: 0 };
      try {
        read = await this.d.callbacks.read(c.token);
      } catch (err) {
        c.log.warn({ err: errorMessage(err) }, "cannot read the reports; following on");
      }
      for (const r of read.reports) {
        const v = judgeReport(r);
        if (v.end)
          return this.complete(
            c,
            v.phase,
            v.phase === "Failed" ? StatusReason.ToolReportedFailed : undefined,
            v.message ?? `the tool reported ${v.phase}`,
          );
        if (!(await this.move(c, { phase: "Running", ...(v.message ? { message: v.message } : {}) }))) return;
        unresolved = false;
        interval = this.pollMs;
        waits = 1;
        await c.report("Running", v.message ? { message: v.message } : {});
      }
      // Dropped once their effect is on the claim; read again after a failed drop, a Running
      // report only moves the record to where it is.
      await this.d.callbacks
        .drop(c.token, read.entries)
        .catch((err) => c.log.warn({ err: errorMessage(err) }, "cannot drop the reports read; following on"));
      const now = this.d.now().getTime();
      if (now >= f.budgetEndsAt) {
        if (f.failAtBudget && unresolved)
          return this.complete(
            c,
            "Failed",
            StatusReason.AnswerLost,
            `the request's answer was lost and the tool reported nothing within ${c.spec.completion.budgetSeconds} s; the branch worker decides whether to send again`,
          );
        if (!unresolved) {
          unresolved = true;
          await this.markUnresolved(
            c,
            StatusReason.OperationUnresolved,
            `the tool reported no end within ${c.spec.completion.budgetSeconds} s; still followed`,
          );
        }
      }
      await sleepUnlessAborted(interval, c.signal);
      if (unresolved) interval = backoffMs({ initialMs: this.pollMs, maxMs: this.maxPollMs }, ++waits);
    }
  }

  private async openWindow(c: Ctx, missedSince?: string): Promise<void> {
    const claim = { kind: "WebhookClaim" as const, namespace: c.claim.namespace, name: c.claim.name };
    await this.d.windows?.open({
      token: c.token,
      claim,
      branchKey: c.branchKey,
      // The endpoint lives on the claim: the claim is its own applier.
      applier: { namespace: claim.namespace, name: claim.name },
      managers: c.spec.fieldManagers ?? [],
      ...(missedSince ? { missedSince } : {}),
    });
  }

  private record(c: Ctx): steps.RecordOf {
    return steps.recordOf(this.d.kube, this.d.now, c);
  }

  private async markUnresolved(c: Ctx, reason: string, message: string): Promise<void> {
    if (!(await this.move(c, { phase: "Unresolved", message }))) return;
    c.log.warn({ reason }, "operation unresolved: still followed");
    await c.report("Unresolved", { reason, message });
    await steps.unresolvedEvent(this.d.events, c.claim, `operation ${c.token} for ${c.commit}: ${message}`);
  }

  /**
   * Moves the claim's record; false when the record is gone. Thrown, a failed write ended a sent
   * request RequestFailed while the record still showed it in flight (soak --mirror seed 101021,
   * a 409 storm on the claims): it is no end of the operation, which the tool carries out.
   */
  private move(c: Ctx, change: OperationChange): Promise<boolean> {
    return steps.moveRecord(this.record(c), change, async () => {
      this.d.windows?.close(c.token);
      await this.d.callbacks.close(c.token).catch(() => {});
    });
  }

  /**
   * The end, once on the claim, closes the window and the token for reports (a report after it is
   * a miss). A stop leaves it to restart recovery, which reads the report that ended it again
   * (reports are dropped only once on the claim).
   */
  private complete(c: Ctx, phase: "Succeeded" | "Failed", reason: string | undefined, message: string) {
    return steps.completeRecord(
      this.record(c),
      { phase, ...(reason ? { reason } : {}), message },
      {
        signal: c.signal,
        pollMs: this.pollMs,
        written: async () => {
          this.d.windows?.close(c.token);
          await this.d.callbacks
            .close(c.token)
            .catch((err) =>
              c.log.warn(
                { err: errorMessage(err) },
                "could not close the token for reports (expires on its own)",
              ),
            );
        },
      },
    );
  }
}
