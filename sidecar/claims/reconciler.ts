/**
 * The claim reconciler of one applier kind, a controller keyed by claim: watch events of what a
 * claim's judgement reads (the claim and the claims sharing its applier, GitTargets naming it,
 * their GitProviders, ApplierGrants, and the applier itself through the kind's requeue hook) put
 * that claim on a work queue, and a worker judges its eligibility and ranking and calls the
 * kind's ClaimController to hold or hand back. A failure is retried with a per-claim backoff; a
 * periodic pass over every claim stays only as a safety net. It owns the finalizer, the
 * conditions, the OperationUnfollowed rule, the restart recovery hand-off and the Event of an
 * operation's end; every status write re-reads and retries on conflict.
 */
import { branchKey as makeBranchKey } from "../../queue/contract.js";
import {
  type ApplierGrant,
  type GitProvider,
  type GitTarget,
  type HoldRequest,
  mayHold,
  notAllowedMessage,
} from "../../queue/crds/index.js";
import { StatusReason } from "../../queue/crds/reasons.js";
import {
  type Claim,
  type ClaimType,
  ConflictRetriesExhausted,
  type Informer,
  type InformerHandle,
  type KObject,
  type Kube,
  RESOURCES,
  readApplierGrant,
  readClaim,
  readGitProvider,
  readGitTarget,
  retryOnConflict,
  statusWriter,
  TypedCache,
  WorkQueue,
} from "../../queue/kube/index.js";
import { claimField, type Logger } from "../../queue/log.js";
import { judgeHolding, providerFacts, targetFacts } from "../../queue/tenancy.js";
import type { ClaimContext, ClaimController, HandBackResult, HoldResult } from "../applier-kind.js";
import type { EventRecorder, EventRegarding } from "../events.js";
import type { ExecutorHost } from "../executor.js";
import { type Following, UnfollowedClock } from "../following.js";
import type { ClaimMetrics } from "../metrics.js";
import {
  type ClaimLocator,
  COMPLETED_PHASES,
  completeOperation,
  isInFlight,
  type Operation,
  withdrawOperation,
} from "../operation-record.js";
import type { Reporter, Sent } from "../reporter.js";
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
  claimType: ClaimType;
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
  /** The safety net: every claim is queued this often, events or not (default 60 s). */
  resyncMs?: number;
  /** A hand-back still unfinished this long after Releasing lets the claim go (default 10 min). */
  releaseTimeoutMs?: number;
  /** An in-flight operation nobody follows is settled after this long (default 60 s). */
  unfollowedGraceMs?: number;
  rankingRules?: RankingRules;
  /** Claims reconciled at once (default 4); claims of one applier never at once. */
  concurrency?: number;
  /** Retry delay after a claim's n-th consecutive failure (default 100 ms doubling to 5 min). */
  retryBackoffMs?: (failures: number) => number;
  /** Told the Ready condition of each claim after its status write, and which claims exist. */
  metrics?: ClaimMetrics;
}

interface Judged {
  claim: KObject;
  typed: Claim;
  key: string;
  applier: { namespace: string; name: string };
  eligibility: Eligibility;
  source?: ApplierSource;
}

const splitKey = (key: string) => {
  const slash = key.indexOf("/");
  return { namespace: key.slice(0, slash), name: key.slice(slash + 1) };
};

export class ClaimReconciler {
  private readonly now: () => Date;
  /** A claim's key (namespace/name) as every process logs a claim. */
  private claimField(key: string): string {
    return claimField({ kind: this.o.claimType.kind, ...splitKey(key) });
  }
  private handles: InformerHandle<KObject>[] = [];
  private claims!: Informer<KObject>;
  private typedClaims!: TypedCache<Claim>;
  private targets!: TypedCache<GitTarget>;
  private providers!: TypedCache<GitProvider>;
  private grants!: TypedCache<ApplierGrant>;
  private readonly queue: WorkQueue<string>;
  /** Claims of one applier are judged and acted on one at a time: ranking reads them all. */
  private readonly applierLocks = new Map<string, Promise<unknown>>();
  private resync: NodeJS.Timeout | undefined;
  private stopped = false;
  /** Set once every informer has listed: a claim judged before that would miss its GitTargets. */
  private ready = false;
  private readonly unfollowed: UnfollowedClock;
  private readonly recoveryTried = new Set<string>();
  private readonly offs: (() => void)[] = [];
  private readonly endsResent = new Set<string>();
  private readonly startedAt: Date;

  constructor(private readonly o: ClaimReconcilerOptions) {
    this.now = o.now ?? (() => new Date());
    this.startedAt = this.now();
    this.unfollowed = new UnfollowedClock(o.unfollowedGraceMs ?? 60_000);
    this.queue = new WorkQueue<string>({
      handle: (key) => this.reconcileKey(key),
      concurrency: o.concurrency ?? 4,
      ...(o.retryBackoffMs ? { backoffMs: o.retryBackoffMs } : {}),
      onError: (key, err, retryInMs) =>
        this.o.log.warn(
          { claim: this.claimField(key), err: (err as Error).message, retryInMs },
          "claim reconcile failed",
        ),
    });
  }

  async start(): Promise<void> {
    const { kube, log } = this.o;
    const claims = kube.informer<KObject>(this.o.claimType, {
      log,
      onChange: (type, obj, previous) => this.onClaim(type, obj, previous),
    });
    const targets = kube.informer<KObject>(RESOURCES.gitTarget, {
      log,
      onChange: (_t, obj, previous) => this.onTarget(obj, previous),
    });
    const providers = kube.informer<KObject>(RESOURCES.gitProvider, {
      log,
      onChange: (_t, obj) => this.onProvider(obj),
    });
    const grants = kube.informer<KObject>(RESOURCES.applierGrant, { log, onChange: () => this.enqueueAll() });
    this.handles = [claims, targets, providers, grants];
    this.claims = claims.informer;
    this.typedClaims = new TypedCache(claims.informer, (o) => readClaim(this.o.claimType, o), log);
    this.targets = new TypedCache(targets.informer, readGitTarget, log);
    this.providers = new TypedCache(providers.informer, readGitProvider, log);
    this.grants = new TypedCache(grants.informer, readApplierGrant, log);
    await Promise.all(this.handles.map((h) => h.synced()));
    this.offs.push(
      this.o.following.onRelease((claim) => {
        if (this.ready) this.queue.add(claim);
      }),
    );
    await this.o.controller.start?.({
      requeueApplier: (namespace, name) => this.enqueueApplier(namespace, name),
    });
    this.resync = setInterval(() => this.enqueueAll(), this.o.resyncMs ?? 60_000);
    this.resync.unref?.();
    this.ready = true;
    this.reportPresent();
    this.enqueueAll();
    await this.queue.whenIdle();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.resync) clearInterval(this.resync);
    for (const off of this.offs.splice(0)) off();
    await this.queue.stop();
    await Promise.all(this.handles.map((h) => h.release()));
    await this.o.controller.stop?.();
  }

  /** Claims reconciled so far (for tests that wait for reconciles after a change). */
  passCount(): number {
    return this.queue.handled;
  }

  /** Queues every claim of the kind after `delayMs` (what the safety-net pass does). */
  schedule(delayMs: number): void {
    if (this.stopped || !this.ready) return;
    for (const key of this.claimKeys()) this.queue.addAfter(key, delayMs);
  }

  /** Resolves when no claim is queued or being reconciled (a delayed requeue does not count). */
  whenIdle(): Promise<void> {
    return this.queue.whenIdle();
  }

  // -------------------------------------------------------------------------------------------
  // Events → keys

  private claimKeys(): string[] {
    return this.claims
      .list()
      .map((c) => claimKey({ namespace: c.metadata.namespace ?? "", name: c.metadata.name }));
  }

  private enqueueAll(): void {
    if (this.stopped || !this.ready) return;
    for (const key of this.claimKeys()) this.queue.add(key);
  }

  private applierKeyOf(claim: KObject): string {
    const a = this.o.controller.applierOf(claim);
    return `${a.namespace}/${a.name}`;
  }

  /** The claims of the kind that name this applier. */
  private claimsOfApplier(applierKey: string): KObject[] {
    return this.claims.list().filter((c) => this.applierKeyOf(c) === applierKey);
  }

  private enqueueApplier(namespace: string, name: string): void {
    if (this.stopped || !this.ready) return;
    for (const c of this.claimsOfApplier(`${namespace}/${name}`)) this.queue.add(this.keyOf(c));
  }

  private keyOf(claim: KObject): string {
    return claimKey({ namespace: claim.metadata.namespace ?? "", name: claim.metadata.name });
  }

  private onClaim(type: "add" | "update" | "delete", claim: KObject, previous: KObject | undefined): void {
    if (!this.ready) return; // the first lists: start() queues every claim once all have landed
    if (type !== "update") this.reportPresent();
    if (type === "update" && previous) void this.announceEnd(claim, previous);
    if (this.stopped) return;
    // The claims sharing its applier are ranked with it: a change of one may move the others.
    this.queue.add(this.keyOf(claim));
    this.enqueueApplier(...(this.applierKeyOf(claim).split("/") as [string, string]));
  }

  /** The claims a GitTarget names now and named before (a changed claimRef releases the old one). */
  private onTarget(target: KObject, previous: KObject | undefined): void {
    if (this.stopped || !this.ready) return;
    for (const t of [target, previous]) {
      const read = t ? this.targets.of(t) : undefined;
      const key = read?.ok ? this.claimNamedBy(read.value) : undefined;
      if (key) this.queue.add(key);
    }
  }

  private claimNamedBy(target: GitTarget): string | undefined {
    const ref = target.spec.claimRef;
    if (!ref || ref.kind !== this.o.claimType.kind) return undefined;
    return claimKey({ namespace: ref.namespace ?? target.metadata.namespace ?? "", name: ref.name });
  }

  /** A GitProvider decides the eligibility and branch of the GitTargets that name it. */
  private onProvider(provider: KObject): void {
    if (this.stopped || !this.ready) return;
    const ns = provider.metadata.namespace ?? "";
    for (const t of this.targets.list()) {
      const ref = t.spec.providerRef;
      if (ref.name !== provider.metadata.name || (ref.namespace ?? t.metadata.namespace) !== ns) continue;
      const key = this.claimNamedBy(t);
      if (key) this.queue.add(key);
    }
  }

  private reportPresent(): void {
    this.o.metrics?.claimsPresent(
      this.o.claimType.kind,
      this.claims.list().map((c) => ({
        kind: this.o.claimType.kind,
        namespace: c.metadata.namespace ?? "",
        name: c.metadata.name,
      })),
    );
  }

  /**
   * An Event when an operation ends Succeeded or Failed, seen on the claim's status whoever
   * completed it (the executor, recovery, the OperationUnfollowed rule): alerting keys on it.
   */
  private async announceEnd(claim: KObject, previous: KObject): Promise<void> {
    const now = this.typedClaims.of(claim);
    const op = now.ok ? now.value.status?.operation : undefined;
    if (!op || !COMPLETED_PHASES.includes(op.phase)) return;
    const was = this.typedClaims.of(previous);
    const before = was.ok ? was.value.status?.operation : undefined;
    if (before?.token === op.token && !isInFlight(before)) return;
    await this.o.events
      .emit(operationEndEvent(op, this.regarding(claim)))
      .catch((err) =>
        this.o.log.warn({ err: (err as Error).message, token: op.token }, "could not record the Event"),
      );
  }

  // -------------------------------------------------------------------------------------------
  // Judging

  private targetViews(): TargetView[] {
    const targets = this.targets.list();
    // Which GitProvider holds each repository and which GitTargets each folder (queue/tenancy.ts),
    // as the worker judges: a GitTarget refused there holds no applier here either.
    const holding = judgeHolding(this.providers.list().map(providerFacts), targets.map(targetFacts));
    return targets.map((t) => {
      const facts = targetFacts(t);
      const refused = holding.target(facts);
      return {
        uid: t.metadata.uid ?? "",
        namespace: t.metadata.namespace ?? "",
        name: t.metadata.name,
        deleting: Boolean(t.metadata.deletionTimestamp),
        branch: t.spec.branch,
        providerRef: t.spec.providerRef,
        ...(t.spec.claimRef ? { claimRef: t.spec.claimRef } : {}),
        ...(refused && refused.reason !== StatusReason.ProviderNamespaceNotAllowed ? { refused } : {}),
      };
    });
  }

  private grantViews() {
    return this.grants.list().map((g) => ({ namespace: g.metadata.namespace ?? "", spec: g.spec }));
  }

  private provider = (namespace: string, name: string): ProviderView | undefined => {
    const p = this.providers.get(name, namespace);
    if (!p) return undefined;
    return {
      namespace,
      name,
      url: p.spec.url,
      ...(p.spec.accessFrom ? { accessFrom: p.spec.accessFrom.namespaces } : {}),
    };
  };

  private ctx(extra: Partial<ClaimContext> = {}): ClaimContext {
    return {
      kube: this.o.kube,
      log: this.o.log,
      events: this.o.events,
      following: this.o.following,
      now: this.now,
      follow: (op) => this.o.executor?.recover(op) ?? false,
      ...extra,
    };
  }

  /** Runs `body` once no other claim of the same applier is being reconciled. */
  private async withApplier<T>(applierKey: string, body: () => Promise<T>): Promise<T> {
    const before = this.applierLocks.get(applierKey) ?? Promise.resolve();
    const run = before.then(body, body);
    const settled = run.catch(() => {});
    this.applierLocks.set(applierKey, settled);
    try {
      return await run;
    } finally {
      if (this.applierLocks.get(applierKey) === settled) this.applierLocks.delete(applierKey);
    }
  }

  /** One claim: judge it with the claims sharing its applier, rank them, act on this one. */
  private async reconcileKey(key: string): Promise<number | undefined> {
    if (this.stopped) return undefined;
    const { namespace, name } = splitKey(key);
    const cached = this.claims.get(name, namespace);
    if (!cached) return undefined;
    const applierKey = this.applierKeyOf(cached);
    return this.withApplier(applierKey, async () => {
      const targets = this.targetViews();
      const grants = this.grantViews();
      const judged: Judged[] = [];
      for (const c of this.claimsOfApplier(applierKey)) {
        const j = await this.judge(c, targets, grants);
        if (j) judged.push(j);
      }
      const mine = judged.find((j) => j.key === key);
      if (!mine) return undefined;
      const entries: RankEntry[] = judged.map((j) => ({
        namespace: j.claim.metadata.namespace ?? "",
        name: j.claim.metadata.name,
        applier: applierKey,
        creationTimestamp: String(j.claim.metadata.creationTimestamp ?? ""),
        referenced: j.eligibility.state === "Bound",
        hasFinalizer: (j.claim.metadata.finalizers ?? []).includes(CLAIM_FINALIZER),
        operationInFlight: isInFlight(j.typed.status?.operation),
        deleting: Boolean(j.claim.metadata.deletionTimestamp),
      }));
      const standing = rankClaims(entries, this.o.rankingRules).get(key) ?? {
        standing: "NotInLine" as const,
      };
      const successor =
        standing.standing === "Holder"
          ? judged.find((o) => o.key !== key && o.eligibility.state === "Bound")?.key
          : undefined;
      try {
        return await this.reconcileOne(mine, standing, successor);
      } catch (err) {
        // A lost race past the retry bound is retried soon; other failures back off in the queue.
        if (err instanceof ConflictRetriesExhausted) {
          this.o.log.info(
            { claim: this.claimField(key), err: err.message },
            "claim status kept conflicting; again soon",
          );
          return 200;
        }
        throw err;
      }
    });
  }

  private async judge(
    claim: KObject,
    targets: TargetView[],
    grants: ReturnType<ClaimReconciler["grantViews"]>,
  ): Promise<Judged | undefined> {
    const read = this.typedClaims.of(claim);
    if (!read.ok) return undefined;
    const typed = read.value;
    const key = this.keyOf(claim);
    const applier = this.o.controller.applierOf(claim);
    const identity = {
      kind: this.o.claimType.kind,
      namespace: claim.metadata.namespace ?? "",
      name: claim.metadata.name,
      ...(typed.spec.accessFrom ? { accessFrom: typed.spec.accessFrom.namespaces } : {}),
    };
    const hold: HoldRequest = {
      claimKind: identity.kind,
      claimNamespace: identity.namespace,
      applierNamespace: applier.namespace,
      applierName: applier.name,
    };
    if (!mayHold(hold, grants)) {
      // Refused before anything is read in the applier's namespace: it holds nothing, and one
      // it held is handed back as on deletion.
      const eligibility: Eligibility = {
        state: "Refused",
        reason: StatusReason.ApplierNamespaceNotAllowed,
        message: notAllowedMessage(hold),
        verdicts: [],
      };
      return { claim, typed, key, applier, eligibility };
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
    return { claim, typed, key, applier, eligibility, source };
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
    const read = readClaim(this.o.claimType, claim);
    if (!read.ok) {
      this.o.log.warn(
        { claim: this.claimField(j.key), err: read.error },
        "claim does not fit its schema; left as it is",
      );
      return undefined;
    }
    const typed = read.value;
    j = { ...j, claim, typed };
    const generation = typed.metadata.generation;
    const g = generation !== undefined ? { observedGeneration: generation } : {};
    const deleting = Boolean(typed.metadata.deletionTimestamp);
    const hasFinalizer = (typed.metadata.finalizers ?? []).includes(CLAIM_FINALIZER);
    const operation = typed.status?.operation;
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
          reason: StatusReason.HeldByAnotherClaim,
          message: `claim ${standing.holder} holds the applier`,
          ...g,
        });
        conditions.push({
          type: "InControl",
          status: "False",
          reason: StatusReason.HeldByAnotherClaim,
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
      } else if (!hasFinalizer && standing.standing !== "Waiting" && !gaveUp(typed)) {
        const reason =
          eligibility.state === "NotReferenced" ? StatusReason.NotReferenced : StatusReason.NotConfigured;
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
          reason: StatusReason.NotConfigured,
          message: `the applier is left as this claim last held it (under field manager applygate): ${check.message}`,
          ...g,
        });
      } else {
        conditions.push({
          type: "InControl",
          status: "False",
          reason: StatusReason.NotConfigured,
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
      reason: StatusReason.Bound,
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
    // Before the report: a stalled check of the dead process's job must count it as ended.
    this.o.following.reportedEnd(op.token, op.phase);
    this.o.log.info(
      { token: op.token, commit: op.commit, phase: op.phase },
      "reporting a recorded end again",
    );
    await this.reportEnd(claim, op, branchKey, {
      phase: op.phase,
      ...(op.outcome ? { reason: op.outcome } : {}),
      ...(op.message ? { message: op.message } : {}),
    }).catch((err) => {
      this.endsResent.delete(op.token);
      this.o.log.warn({ err: (err as Error).message }, "could not report a recorded end again");
    });
  }

  /** Reports an end of `op` to the worker, as its executor would have. */
  private reportEnd(
    claim: KObject,
    op: Operation,
    branchKey: string,
    end: { phase: Operation["phase"]; reason?: string; message?: string },
  ): Promise<Sent | undefined> {
    if (!this.o.reporter) return Promise.resolve(undefined);
    return this.o.reporter.phase({
      token: op.token,
      claim: {
        kind: this.o.claimType.kind,
        namespace: claim.metadata.namespace ?? "",
        name: claim.metadata.name,
      },
      branchKey,
      at: this.now().toISOString(),
      commit: op.commit,
      ...end,
    });
  }

  /** Follows up an operation in flight nobody here follows: recovery first, then OperationUnfollowed. */
  private async handleUnfollowed(
    claim: KObject,
    j: Judged,
    op: Operation,
    branchKey: string | undefined,
  ): Promise<number | undefined> {
    const followed = this.o.following.isFollowed(op.token);
    if (!followed && this.o.following.ended(op.token)) return this.settleEndedRecord(claim, j, op);
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
          { claim: this.claimField(j.key), token: op.token, commit: op.commit },
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
      outcome: StatusReason.OperationUnfollowed,
      message,
    });
    this.unfollowed.forget(op.token);
    await this.o.events.emit({
      type: "Warning",
      reason: StatusReason.OperationUnfollowed,
      action: "Complete",
      note: message,
      regarding: this.regarding(claim),
    });
    if (this.o.reporter && branchKey) {
      await this.reportEnd(claim, op, branchKey, {
        phase: "Failed",
        reason: StatusReason.OperationUnfollowed,
        message,
      }).catch((err) =>
        this.o.log.warn({ err: (err as Error).message }, "could not report OperationUnfollowed"),
      );
    }
    return undefined;
  }

  /**
   * An operation this process ended and reported whose record still shows it in flight: the write
   * of its end failed (a storm of conflicts outlasted the retries). The end is the one reported;
   * only the record lags, so it is brought level at once and reported nothing again (settled as
   * unfollowed a minute later, it was reported a second time: soak seed 30052). An end that started
   * nothing takes the record away, as the executor meant to (past Requested, completes it Failed);
   * Succeeded, Failed or Superseded completes it.
   */
  private async settleEndedRecord(claim: KObject, j: Judged, op: Operation): Promise<number | undefined> {
    const phase = this.o.following.endedAs(op.token);
    const locator = this.locator(claim);
    try {
      if (phase === "Succeeded" || phase === "Failed" || phase === "Superseded")
        await completeOperation(this.o.kube, locator, op.token, { phase });
      else if (!(await withdrawOperation(this.o.kube, locator, op.token, undefined)))
        // Past Requested (it resumed the applier) a record is completed, not taken away.
        await completeOperation(this.o.kube, locator, op.token, {
          phase: "Failed",
          message: `ended ${phase ?? "without a phase"} here; its record could not be written then`,
        });
    } catch (err) {
      this.o.log.warn(
        { claim: this.claimField(j.key), token: op.token, err: (err as Error).message },
        "could not bring the record of an ended operation level; trying again",
      );
      return 2_000;
    }
    this.o.log.info(
      { claim: this.claimField(j.key), token: op.token, commit: op.commit, phase },
      "the record of an operation ended here showed it in flight; brought level with its reported end",
    );
    return undefined;
  }

  private async handBack(
    j: Judged,
    successor: string | undefined,
    inFlight: Operation | undefined,
    branchKey: string | undefined,
  ): Promise<HandBackResult> {
    const { claim, typed } = j;
    const g =
      typed.metadata.generation !== undefined ? { observedGeneration: typed.metadata.generation } : {};
    const inControl = findCondition(typed.status?.conditions, "InControl");
    const releasingSince =
      inControl?.reason === StatusReason.Releasing && inControl.status === "False"
        ? new Date(inControl.lastTransitionTime)
        : this.now();
    const releasing: ConditionInput = {
      type: "InControl",
      status: "False",
      reason: StatusReason.Releasing,
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
    // One Event per outcome, recorded here alone: handed back (or over), or given up.
    if (result.done) {
      const how = result.conditions?.find((c) => c.type === "InControl")?.message;
      await this.o.events.emit({
        type: "Normal",
        reason: successor ? StatusReason.HandedOver : StatusReason.Released,
        action: "Release",
        note:
          how ??
          (successor ? `the applier is left held for claim ${successor}` : "the applier is handed back"),
        regarding: this.regarding(claim),
      });
      return result;
    }
    if (this.now().getTime() - releasingSince.getTime() > timeoutMs) {
      const message = `hand-back unfinished after ${formatDuration(timeoutMs)}; the applier is left ${result.leftAs ?? "as this claim last held it"}`;
      await this.o.events.emit({
        type: "Warning",
        reason: StatusReason.ReleaseFailed,
        action: "Release",
        note: message,
        regarding: this.regarding(claim),
      });
      return {
        done: true,
        conditions: [
          { type: "InControl", status: "False", reason: StatusReason.ReleaseFailed, message, ...g },
        ],
      };
    }
    const conds = result.conditions?.some((c) => c.type === "InControl")
      ? result.conditions
      : [...(result.conditions ?? []), releasing];
    return { ...result, conditions: conds };
  }

  private branchKeyOf(targets: TargetView[]): string | undefined {
    for (const t of targets) {
      const p = this.provider(t.providerRef.namespace ?? t.namespace, t.providerRef.name);
      if (p?.url) return makeBranchKey(p, p.url, t.branch);
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
        statusWriter(this.o.kube, "claim", "claim-controller").patch(
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

/**
 * The claim let go of an applier it could not hand back (ReleaseFailed): while it holds nothing,
 * InControl keeps saying where the applier was left.
 */
function gaveUp(claim: Claim): boolean {
  const c = findCondition(claim.status?.conditions, "InControl");
  return c?.status === "False" && c.reason === StatusReason.ReleaseFailed;
}

/** "10 minutes", "90 seconds", "400 ms": a deadline as a person reads it. */
function formatDuration(ms: number): string {
  if (ms >= 60_000 && ms % 60_000 === 0) return `${ms / 60_000} minute${ms === 60_000 ? "" : "s"}`;
  if (ms >= 1_000 && ms % 1_000 === 0) return `${ms / 1_000} seconds`;
  return `${ms} ms`;
}

/** The Event of an operation's end (pure): Normal OperationSucceeded, Warning OperationFailed. */
export function operationEndEvent(op: Operation, regarding: EventRegarding) {
  const succeeded = op.phase === "Succeeded";
  const detail = [op.outcome, op.message].filter(Boolean).join(": ");
  // Ended by a newer commit: no failure to alert on, and no success either.
  if (op.phase === "Superseded")
    return {
      type: "Normal" as const,
      reason: StatusReason.OperationSuperseded,
      action: "Apply",
      note: `operation ${op.token} for commit ${op.commit} was ended: a newer commit supersedes it${op.message ? ` (${op.message})` : ""}`,
      regarding,
    };
  return {
    type: succeeded ? ("Normal" as const) : ("Warning" as const),
    reason: succeeded ? StatusReason.OperationSucceeded : StatusReason.OperationFailed,
    action: "Apply",
    note: `operation ${op.token} for commit ${op.commit} ${succeeded ? "succeeded" : "failed"}${detail ? ` (${detail})` : ""}`,
    regarding,
  };
}
