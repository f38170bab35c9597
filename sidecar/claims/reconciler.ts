/**
 * The claim reconciler of one applier kind: watches claims, GitTargets and GitProviders, judges
 * eligibility and ranking for every claim in one pass, and calls the kind's ClaimController to
 * hold or hand back. It owns the finalizer, the conditions, the OperationUnfollowed rule and
 * restart recovery hand-off; every status write re-reads and retries on conflict.
 */
import { branchKey as makeBranchKey } from "../../queue/contract.js";
import {
  APPLIER_NAMESPACE_NOT_ALLOWED,
  type GitProvider,
  type GitTarget,
  type GrantView,
  type HoldRequest,
  mayHold,
  notAllowedMessage,
} from "../../queue/crds/index.js";
import type { Logger } from "../../queue/log.js";
import type { ClaimContext, ClaimController, HandBackResult, HoldResult } from "../applier-kind.js";
import type { EventRecorder, EventRegarding } from "../events.js";
import type { ExecutorHost } from "../executor.js";
import { type Following, UnfollowedClock } from "../following.js";
import {
  ConflictRetriesExhausted,
  type KObject,
  type Kube,
  RESOURCES,
  type ResourceType,
  retryOnConflict,
  type Watcher,
} from "../kube.js";
import type { ClaimMetrics } from "../metrics.js";
import {
  type ClaimLocator,
  completeOperation,
  isInFlight,
  type Operation,
  operationOf,
} from "../operation-record.js";
import type { Reporter } from "../reporter.js";
import { type ConditionInput, findCondition, sameConditions, setConditions } from "./conditions.js";
import {
  type ApplierSource,
  type Eligibility,
  eligibilityConditions,
  judgeEligibility,
  namesClaim,
  type ProviderView,
  type TargetView,
} from "./eligibility.js";
import { claimKey, type RankEntry, type RankingRules, rankClaims, waitingCondition } from "./ranking.js";

/** Held from before the first write to the applier until it is handed back or over. */
export const CLAIM_FINALIZER = "applygate.dev/claim";

export interface ClaimReconcilerOptions {
  claimType: typeof RESOURCES.fluxClaim | typeof RESOURCES.argoCDClaim;
  kube: Kube;
  log: Logger;
  events: EventRecorder;
  following: Following;
  controller: ClaimController;
  /** For restart recovery of operations recorded by a branch worker's attempt. */
  executor?: Pick<ExecutorHost, "recover">;
  /** For the Failed report of an operation settled as unfollowed. */
  reporter?: Reporter;
  now?: () => Date;
  /** Every claim is reconciled this often, so a resumed applier is noticed (default 60 s). */
  resyncMs?: number;
  /** A hand-back still unfinished this long after Releasing lets the claim go (default 10 min). */
  releaseTimeoutMs?: number;
  /** An in-flight operation nobody follows is settled after this long (default 60 s). */
  unfollowedGraceMs?: number;
  rankingRules?: RankingRules;
  /** Pause before a pass after a change, to take bursts in one pass (default 50 ms). */
  debounceMs?: number;
  /** Told the Ready condition of each claim after its status write, and which claims exist. */
  metrics?: ClaimMetrics;
}

interface Judged {
  claim: KObject;
  key: string;
  applier: { namespace: string; name: string };
  eligibility: Eligibility;
  source?: ApplierSource;
}

export class ClaimReconciler {
  private readonly now: () => Date;
  private watchers: Watcher<KObject>[] = [];
  private claims!: Watcher<KObject>;
  private targets!: Watcher<KObject>;
  private providers!: Watcher<KObject>;
  private grants!: Watcher<KObject>;
  private timer: NodeJS.Timeout | undefined;
  private timerDue = 0;
  private resync: NodeJS.Timeout | undefined;
  private passing: Promise<void> | undefined;
  private again = false;
  private stopped = false;
  private readonly unfollowed: UnfollowedClock;
  private readonly recoveryTried = new Set<string>();
  private readonly endsResent = new Set<string>();
  private passes = 0;
  private readonly startedAt: Date;

  constructor(private readonly o: ClaimReconcilerOptions) {
    this.now = o.now ?? (() => new Date());
    this.startedAt = this.now();
    this.unfollowed = new UnfollowedClock(o.unfollowedGraceMs ?? 60_000);
  }

  async start(): Promise<void> {
    const onChange = () => this.schedule(this.o.debounceMs ?? 50);
    const watch = (t: ResourceType) => this.o.kube.watch<KObject>(t, { onChange, log: this.o.log });
    this.claims = watch(this.o.claimType);
    this.targets = watch(RESOURCES.gitTarget);
    this.providers = watch(RESOURCES.gitProvider);
    this.grants = watch(RESOURCES.applierGrant);
    this.watchers = [this.claims, this.targets, this.providers, this.grants];
    await Promise.all(this.watchers.map((w) => w.start()));
    await Promise.all(this.watchers.map((w) => w.whenSynced()));
    this.o.following.onRelease(() => this.schedule(0));
    await this.o.controller.start?.({ requeueApplier: () => this.schedule(0) });
    this.resync = setInterval(() => this.schedule(0), this.o.resyncMs ?? 60_000);
    this.resync.unref?.();
    await this.pass();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    if (this.resync) clearInterval(this.resync);
    await Promise.all(this.watchers.map((w) => w.stop()));
    await this.o.controller.stop?.();
    await this.passing;
  }

  /** Completed passes (for tests that wait for a pass after a change). */
  passCount(): number {
    return this.passes;
  }

  /** Runs a pass soon; passes never overlap, and a change during one runs another after it. */
  schedule(delayMs: number): void {
    if (this.stopped) return;
    if (this.passing) {
      this.again = true;
      return;
    }
    // A change never waits behind a later requeue: the sooner of the two is kept.
    const due = Date.now() + delayMs;
    if (this.timer) {
      if (this.timerDue <= due) return;
      clearTimeout(this.timer);
    }
    this.timerDue = due;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.pass();
    }, delayMs);
    this.timer.unref?.();
  }

  /** One pass over every claim of the kind. */
  async pass(): Promise<void> {
    if (this.passing) {
      this.again = true;
      return this.passing;
    }
    this.passing = (async () => {
      let next: number | undefined;
      try {
        next = await this.reconcileAll();
      } catch (err) {
        this.o.log.error({ err: (err as Error).message }, "claim pass failed");
        next = 5_000;
      } finally {
        this.passes++;
        this.passing = undefined;
      }
      if (this.again) {
        this.again = false;
        this.schedule(0);
      } else if (next !== undefined) {
        this.schedule(next);
      }
    })();
    return this.passing;
  }

  private targetViews(): TargetView[] {
    return this.targets.list().map((o) => {
      const t = o as unknown as GitTarget;
      return {
        uid: t.metadata.uid ?? "",
        namespace: t.metadata.namespace ?? "",
        name: t.metadata.name,
        deleting: Boolean(o.metadata.deletionTimestamp),
        branch: t.spec?.branch ?? "",
        providerRef: t.spec?.providerRef ?? { name: "" },
        ...(t.spec?.claimRef ? { claimRef: t.spec.claimRef } : {}),
      };
    });
  }

  private grantViews(): GrantView[] {
    return this.grants.list().map((g) => ({
      namespace: g.metadata.namespace ?? "",
      ...(g.spec ? { spec: g.spec as GrantView["spec"] } : {}),
    }));
  }

  private provider = (namespace: string, name: string): ProviderView | undefined => {
    const p = this.providers.get(name, namespace) as unknown as GitProvider | undefined;
    if (!p) return undefined;
    return {
      namespace,
      name,
      url: p.spec?.url ?? "",
      ...(p.spec?.accessFrom ? { accessFrom: p.spec.accessFrom.namespaces } : {}),
    };
  };

  private ctx(extra: Partial<ClaimContext> = {}): ClaimContext {
    return {
      kube: this.o.kube,
      log: this.o.log,
      events: this.o.events,
      following: this.o.following,
      now: this.now,
      ...extra,
    };
  }

  private async reconcileAll(): Promise<number | undefined> {
    const targets = this.targetViews();
    const judged: Judged[] = [];
    const present = this.claims.list();
    this.o.metrics?.claimsPresent(
      this.o.claimType.kind,
      present.map((c) => ({
        kind: this.o.claimType.kind,
        namespace: c.metadata.namespace ?? "",
        name: c.metadata.name,
      })),
    );
    for (const cached of present) {
      const claim = cached;
      const key = claimKey({ namespace: claim.metadata.namespace ?? "", name: claim.metadata.name });
      const applier = this.o.controller.applierOf(claim);
      const identity = {
        kind: this.o.claimType.kind,
        namespace: claim.metadata.namespace ?? "",
        name: claim.metadata.name,
        ...((claim.spec as { accessFrom?: { namespaces: string[] } })?.accessFrom
          ? { accessFrom: (claim.spec as { accessFrom: { namespaces: string[] } }).accessFrom.namespaces }
          : {}),
      };
      const hold: HoldRequest = {
        claimKind: identity.kind,
        claimNamespace: identity.namespace,
        applierNamespace: applier.namespace,
        applierName: applier.name,
      };
      if (!mayHold(hold, this.grantViews())) {
        // Refused before anything is read in the applier's namespace: it holds nothing, and one
        // it held is handed back as on deletion.
        const message = notAllowedMessage(hold);
        const eligibility: Eligibility = {
          state: "Refused",
          reason: APPLIER_NAMESPACE_NOT_ALLOWED,
          message,
          verdicts: [],
        };
        judged.push({ claim, key, applier, eligibility });
        continue;
      }
      const naming = targets.filter((t) => namesClaim(t, identity));
      // A claim no GitTarget names reads nothing in the applier's cluster.
      let source: ApplierSource = { state: "Unknown", message: "not read" };
      if (naming.length > 0) {
        try {
          source = await this.o.controller.source(claim, applier, this.ctx());
        } catch (err) {
          source = {
            state: "Unknown",
            message: `reading the applier's source failed: ${(err as Error).message}`,
          };
        }
      }
      const eligibility = judgeEligibility({
        claim: identity,
        targets: naming,
        provider: this.provider,
        source,
      });
      judged.push({ claim, key, applier, eligibility, source });
    }

    const entries: RankEntry[] = judged.map((j) => ({
      namespace: j.claim.metadata.namespace ?? "",
      name: j.claim.metadata.name,
      applier: `${j.applier.namespace}/${j.applier.name}`,
      creationTimestamp: String(j.claim.metadata.creationTimestamp ?? ""),
      referenced: j.eligibility.state === "Bound",
      hasFinalizer: (j.claim.metadata.finalizers ?? []).includes(CLAIM_FINALIZER),
      operationInFlight: isInFlight(operationOf(j.claim)),
      deleting: Boolean(j.claim.metadata.deletionTimestamp),
    }));
    const standings = rankClaims(entries, this.o.rankingRules);

    let requeue: number | undefined;
    for (const j of judged) {
      if (this.stopped) break;
      const standing = standings.get(j.key) ?? { standing: "NotInLine" as const };
      const successor =
        standing.standing === "Holder"
          ? judged.find(
              (o) =>
                o.key !== j.key &&
                o.eligibility.state === "Bound" &&
                `${o.applier.namespace}/${o.applier.name}` === `${j.applier.namespace}/${j.applier.name}`,
            )?.key
          : undefined;
      try {
        const after = await this.reconcileOne(j, standing, successor);
        if (after !== undefined) requeue = Math.min(requeue ?? after, after);
      } catch (err) {
        const retry = err instanceof ConflictRetriesExhausted ? 200 : 5_000;
        this.o.log.warn({ claim: j.key, err: (err as Error).message }, "claim reconcile failed");
        requeue = Math.min(requeue ?? retry, retry);
      }
    }
    return requeue;
  }

  private regarding(claim: KObject): EventRegarding {
    return {
      apiVersion: `${this.o.claimType.group}/${this.o.claimType.version}`,
      kind: this.o.claimType.kind,
      namespace: claim.metadata.namespace ?? "",
      name: claim.metadata.name,
      ...(claim.metadata.uid ? { uid: claim.metadata.uid } : {}),
    };
  }

  private locator(claim: KObject): ClaimLocator {
    return { type: this.o.claimType, namespace: claim.metadata.namespace ?? "", name: claim.metadata.name };
  }

  private async reconcileOne(
    j: Judged,
    standing: ReturnType<typeof rankClaims> extends Map<string, infer S> ? S : never,
    successor: string | undefined,
  ): Promise<number | undefined> {
    const { eligibility } = j;
    // Decide on the claim as it is now (the cache can lag our own writes and the executor's record).
    const claim = await this.o.kube.get<KObject>(
      this.o.claimType,
      j.claim.metadata.namespace ?? "",
      j.claim.metadata.name,
    );
    if (!claim) return undefined;
    j = { ...j, claim };
    const generation = claim.metadata.generation;
    const g = generation !== undefined ? { observedGeneration: generation } : {};
    const deleting = Boolean(claim.metadata.deletionTimestamp);
    const hasFinalizer = (claim.metadata.finalizers ?? []).includes(CLAIM_FINALIZER);
    const operation = operationOf(claim);
    const inFlight = isInFlight(operation) ? operation : undefined;
    const bound = eligibility.state === "Bound" ? eligibility : undefined;
    const branchKey = this.branchKeyOf(bound?.eligible ?? []);
    const conditions: ConditionInput[] = [];
    let status: Record<string, unknown> | undefined;
    let requeue: number | undefined;

    const releaseConclusively =
      deleting || eligibility.state === "NotReferenced" || eligibility.state === "Refused";

    if (releaseConclusively || standing.standing !== "Holder") {
      conditions.push(...eligibilityConditions(eligibility, generation));
      if (standing.standing === "Waiting" && !deleting) {
        conditions.push(waitingCondition(standing.holder, generation));
        conditions.push({
          type: "Ready",
          status: "False",
          reason: "HeldByAnotherClaim",
          message: `claim ${standing.holder} holds the applier`,
          ...g,
        });
        conditions.push({
          type: "InControl",
          status: "False",
          reason: "HeldByAnotherClaim",
          message: `claim ${standing.holder} holds the applier`,
          ...g,
        });
      }
      if (hasFinalizer && (releaseConclusively || standing.standing === "Holder")) {
        const result = await this.handBack(j, successor, inFlight, branchKey);
        conditions.push(...(result.conditions ?? []));
        status = result.status;
        requeue = result.requeueAfterMs ?? (result.done ? undefined : 5_000);
        if (result.done) {
          await this.writeStatus(j.claim, conditions, status);
          await this.dropFinalizer(claim);
          return requeue;
        }
      } else if (!hasFinalizer && standing.standing !== "Waiting") {
        const reason = eligibility.state === "NotReferenced" ? "NotReferenced" : "NotConfigured";
        conditions.push({
          type: "InControl",
          status: "False",
          reason,
          message: "the claim holds nothing",
          ...g,
        });
      }
      await this.writeStatus(claim, conditions, status);
      return requeue;
    }

    // The holder in line, and either bound or not judgeable yet.
    if (eligibility.state === "Undecided") {
      conditions.push(...eligibilityConditions(eligibility, generation));
      await this.writeStatus(claim, conditions);
      return 10_000;
    }

    const check = await this.o.controller.checkExternal(
      claim,
      j.applier,
      this.ctx({ ...(branchKey ? { branchKey } : {}) }),
    );
    if (check.configured !== true) {
      const s = check.configured === false ? "False" : "Unknown";
      conditions.push({ type: "Configured", status: s, reason: check.reason, message: check.message, ...g });
      conditions.push({ type: "Ready", status: s, reason: check.reason, message: check.message, ...g });
      if (hasFinalizer) {
        conditions.push({
          type: "InControl",
          status: "Unknown",
          reason: "NotConfigured",
          message: `the applier is left as this claim last held it (under field manager applygate): ${check.message}`,
          ...g,
        });
      } else {
        conditions.push({
          type: "InControl",
          status: "False",
          reason: "NotConfigured",
          message: check.message,
          ...g,
        });
      }
      await this.writeStatus(claim, conditions);
      return check.configured === "Unknown" ? 10_000 : undefined;
    }

    const names = bound!.eligible.map((t) => `${t.namespace}/${t.name}`).join(", ");
    conditions.push({
      type: "Configured",
      status: "True",
      reason: "Bound",
      message: `GitTarget ${names} applies through this claim`,
      ...g,
    });

    let current = claim;
    if (!hasFinalizer) current = await this.addFinalizer(claim);

    if (inFlight && inFlight.targets.length > 0) {
      const handled = await this.handleUnfollowed(current, j, inFlight, branchKey);
      if (handled !== undefined) requeue = handled;
    }
    if (operation && !inFlight && branchKey) await this.resendEnd(current, operation, branchKey);

    const ctx = this.ctx({
      ...(inFlight ? { operation: inFlight } : {}),
      ...(branchKey ? { branchKey } : {}),
    });
    const held: HoldResult = await this.o.controller.hold(current, j.applier, ctx);
    conditions.push(...held.conditions);
    await this.writeStatus(current, conditions, held.status);
    if (held.requeueAfterMs !== undefined)
      requeue = Math.min(requeue ?? held.requeueAfterMs, held.requeueAfterMs);
    return requeue;
  }

  /**
   * Reports again, once per process, the end of an operation an earlier process completed: it
   * may have been stopped (SIGKILL) between recording the end on the claim and queuing the
   * report, and the worker would then wait for that attempt forever. A duplicate end changes
   * nothing at the worker; an end this process recorded itself was reported by its executor.
   */
  private async resendEnd(claim: KObject, op: Operation, branchKey: string): Promise<void> {
    const completedAt = op.completedAt ? Date.parse(op.completedAt) : Number.NaN;
    if (!this.o.reporter || this.endsResent.has(op.token)) return;
    if (!(completedAt < this.startedAt.getTime())) return;
    this.endsResent.add(op.token);
    this.o.log.info(
      { token: op.token, commit: op.commit, phase: op.phase },
      "reporting a recorded end again",
    );
    await this.o.reporter
      .phase({
        token: op.token,
        claim: {
          kind: this.o.claimType.kind,
          namespace: claim.metadata.namespace ?? "",
          name: claim.metadata.name,
        },
        branchKey,
        phase: op.phase,
        at: this.now().toISOString(),
        commit: op.commit,
        ...(op.outcome ? { reason: op.outcome } : {}),
        ...(op.message ? { message: op.message } : {}),
      })
      .catch((err) => {
        this.endsResent.delete(op.token);
        this.o.log.warn({ err: (err as Error).message }, "could not report a recorded end again");
      });
  }

  /** Follows up an operation in flight nobody here follows: recovery first, then OperationUnfollowed. */
  private async handleUnfollowed(
    claim: KObject,
    j: Judged,
    op: NonNullable<ReturnType<typeof operationOf>>,
    branchKey: string | undefined,
  ): Promise<number | undefined> {
    const followed = this.o.following.isFollowed(op.token);
    if (!followed && branchKey && this.o.executor && !this.recoveryTried.has(op.token)) {
      this.recoveryTried.add(op.token);
      const started = this.o.executor.recover({
        claim: this.locator(claim),
        applier: j.applier,
        operation: op,
        branchKey,
      });
      if (started) {
        this.o.log.info(
          { claim: j.key, token: op.token, commit: op.commit },
          "following a recorded operation",
        );
        return undefined;
      }
    }
    const now = this.now();
    if (!this.unfollowed.overdue(op.token, this.o.following.isFollowed(op.token), now)) {
      return this.o.following.isFollowed(op.token) ? undefined : this.unfollowed.remainingMs(op.token, now);
    }
    const settle = this.o.controller.settleUnfollowed;
    const safe = settle
      ? await settle.call(this.o.controller, claim, j.applier, op, this.ctx({ operation: op }))
      : true;
    if (!safe) return 2_000;
    const message = `operation ${op.token} was not followed by any sidecar for over a minute; the applier is held again`;
    await completeOperation(this.o.kube, this.locator(claim), op.token, {
      phase: "Failed",
      outcome: "OperationUnfollowed",
      message,
    });
    this.unfollowed.forget(op.token);
    await this.o.events.emit({
      type: "Warning",
      reason: "OperationUnfollowed",
      action: "Complete",
      note: message,
      regarding: this.regarding(claim),
    });
    if (this.o.reporter && branchKey) {
      await this.o.reporter
        .phase({
          token: op.token,
          claim: {
            kind: this.o.claimType.kind,
            namespace: claim.metadata.namespace ?? "",
            name: claim.metadata.name,
          },
          branchKey,
          phase: "Failed",
          at: this.now().toISOString(),
          commit: op.commit,
          reason: "OperationUnfollowed",
          message,
        })
        .catch((err) =>
          this.o.log.warn({ err: (err as Error).message }, "could not report OperationUnfollowed"),
        );
    }
    return undefined;
  }

  private async handBack(
    j: Judged,
    successor: string | undefined,
    inFlight: ReturnType<typeof operationOf>,
    branchKey: string | undefined,
  ): Promise<HandBackResult> {
    const { claim } = j;
    const g =
      claim.metadata.generation !== undefined ? { observedGeneration: claim.metadata.generation } : {};
    const conditions = (claim.status as { conditions?: Parameters<typeof findCondition>[0] })?.conditions;
    const inControl = findCondition(conditions, "InControl");
    const releasingSince =
      inControl?.reason === "Releasing" && inControl.status === "False"
        ? new Date(inControl.lastTransitionTime)
        : this.now();
    const releasing: ConditionInput = {
      type: "InControl",
      status: "False",
      reason: "Releasing",
      message: successor ? `handing the applier over to claim ${successor}` : "handing the applier back",
      ...g,
    };
    const timeoutMs = this.o.releaseTimeoutMs ?? 600_000;
    let result: HandBackResult;
    try {
      result = await this.o.controller.handBack(
        claim,
        j.applier,
        this.ctx({
          releasingSince,
          ...(successor ? { successor } : {}),
          ...(inFlight ? { operation: inFlight } : {}),
          ...(branchKey ? { branchKey } : {}),
        }),
      );
    } catch (err) {
      result = {
        done: false,
        conditions: [{ ...releasing, message: `hand-back failed: ${(err as Error).message}` }],
      };
    }
    if (result.done) {
      await this.o.events.emit({
        type: "Normal",
        reason: successor ? "HandedOver" : "Released",
        action: "Release",
        note: successor ? `the applier is left held for claim ${successor}` : "the applier is handed back",
        regarding: this.regarding(claim),
      });
      return result;
    }
    if (this.now().getTime() - releasingSince.getTime() > timeoutMs) {
      const where = result.conditions?.find((c) => c.type === "InControl")?.message ?? "as it was last held";
      await this.o.events.emit({
        type: "Warning",
        reason: "ReleaseFailed",
        action: "Release",
        note: `hand-back unfinished after ${Math.round(timeoutMs / 60_000)} minutes; the applier is left ${where}`,
        regarding: this.regarding(claim),
      });
      return { done: true, conditions: result.conditions ?? [] };
    }
    const conds = result.conditions?.some((c) => c.type === "InControl")
      ? result.conditions
      : [...(result.conditions ?? []), releasing];
    return { ...result, conditions: conds };
  }

  private branchKeyOf(targets: TargetView[]): string | undefined {
    for (const t of targets) {
      const p = this.provider(t.providerRef.namespace ?? t.namespace, t.providerRef.name);
      if (p?.url) return makeBranchKey(p.url, t.branch);
    }
    return undefined;
  }

  private async addFinalizer(claim: KObject): Promise<KObject> {
    const t = this.o.claimType;
    const out = await retryOnConflict(
      () => this.o.kube.get<KObject>(t, claim.metadata.namespace ?? "", claim.metadata.name),
      (c) => (c && !(c.metadata.finalizers ?? []).includes(CLAIM_FINALIZER) ? c : undefined),
      (_c, c) => this.o.kube.setFinalizer<KObject>(t, c, CLAIM_FINALIZER, true),
    );
    return (
      out ?? (await this.o.kube.get<KObject>(t, claim.metadata.namespace ?? "", claim.metadata.name)) ?? claim
    );
  }

  private async dropFinalizer(claim: KObject): Promise<void> {
    const t = this.o.claimType;
    await retryOnConflict(
      () => this.o.kube.get<KObject>(t, claim.metadata.namespace ?? "", claim.metadata.name),
      (c) => (c && (c.metadata.finalizers ?? []).includes(CLAIM_FINALIZER) ? c : undefined),
      (_c, c) => this.o.kube.setFinalizer<KObject>(t, c, CLAIM_FINALIZER, false),
    );
  }

  /** Merges conditions (and kind status fields) onto a fresh read; writes only a change. */
  private async writeStatus(
    claim: KObject,
    inputs: ConditionInput[],
    fields: Record<string, unknown> = {},
  ): Promise<void> {
    const t = this.o.claimType;
    // Later inputs of one type win (e.g. Waiting overrides eligibility's Configured).
    const byType = new Map<string, ConditionInput>();
    for (const c of inputs) byType.set(c.type, c);
    let ready: { status: string | undefined } | undefined;
    await retryOnConflict(
      () => this.o.kube.get<KObject>(t, claim.metadata.namespace ?? "", claim.metadata.name),
      (current) => {
        if (!current) return undefined;
        const status = (current.status ?? {}) as Record<string, unknown> & {
          conditions?: Parameters<typeof setConditions>[0];
        };
        const next = setConditions(status.conditions, [...byType.values()], this.now());
        ready = { status: findCondition(next, "Ready")?.status };
        const changedFields = Object.entries(fields).filter(
          ([k, v]) => JSON.stringify(status[k]) !== JSON.stringify(v),
        );
        const generation = current.metadata.generation;
        const genChanged = generation !== undefined && status.observedGeneration !== generation;
        if (sameConditions(status.conditions, next) && changedFields.length === 0 && !genChanged)
          return undefined;
        return {
          conditions: next,
          ...Object.fromEntries(changedFields),
          ...(generation !== undefined ? { observedGeneration: generation } : {}),
        };
      },
      (current, patch) =>
        this.o.kube.patchStatus(
          t,
          current!.metadata.namespace ?? "",
          current!.metadata.name,
          patch,
          current!.metadata.resourceVersion,
        ),
    );
    if (ready) {
      const identity = { namespace: claim.metadata.namespace ?? "", name: claim.metadata.name };
      this.o.metrics?.claimReady({ kind: t.kind, ...identity }, ready.status);
    }
  }
}
