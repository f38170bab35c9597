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
import { errorMessage } from "../../queue/errors.js";
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
  TypedCache,
  WorkQueue,
} from "../../queue/kube/index.js";
import { claimField, type Logger } from "../../queue/log.js";
import { judgeHolding, providerFacts, targetFacts } from "../../queue/tenancy.js";
import type { ClaimContext, ClaimController, HoldResult } from "../applier-kind.js";
import type { EventRecorder } from "../events.js";
import type { ExecutorHost } from "../executor.js";
import type { Following } from "../following.js";
import type { ClaimMetrics } from "../metrics.js";
import { isInFlight } from "../operation-record.js";
import type { Reporter } from "../reporter.js";
import { Aftercare } from "./aftercare.js";
import { CLAIM_FINALIZER, ClaimWrites } from "./claim-writes.js";
import { findCondition } from "./conditions.js";
import {
  type ApplierSource,
  type Eligibility,
  judgeEligibility,
  namesClaim,
  type ProviderView,
  type TargetView,
} from "./eligibility.js";
import { handBack } from "./hand-back.js";
import { planClaim, planHold } from "./plan.js";
import { claimKey, type RankEntry, type RankingRules, rankClaims } from "./ranking.js";

export { CLAIM_FINALIZER } from "./claim-writes.js";

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
  private readonly offs: (() => void)[] = [];
  private readonly aftercare: Aftercare;
  private readonly writes: ClaimWrites;

  constructor(private readonly o: ClaimReconcilerOptions) {
    this.now = o.now ?? (() => new Date());
    this.writes = new ClaimWrites(o.kube, o.claimType, this.now, o.metrics);
    this.aftercare = new Aftercare({
      ...o,
      now: this.now,
      unfollowedGraceMs: o.unfollowedGraceMs ?? 60_000,
      ctx: (extra) => this.ctx(extra),
    });
    this.queue = new WorkQueue<string>({
      handle: (key) => this.reconcileKey(key),
      concurrency: o.concurrency ?? 4,
      ...(o.retryBackoffMs ? { backoffMs: o.retryBackoffMs } : {}),
      onError: (key, err, retryInMs) =>
        this.o.log.warn(
          { claim: this.claimField(key), err: errorMessage(err), retryInMs },
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

  private announceEnd(claim: KObject, previous: KObject): Promise<void> {
    const now = this.typedClaims.of(claim);
    const was = this.typedClaims.of(previous);
    return this.aftercare.announceEnd(
      claim,
      now.ok ? now.value.status?.operation : undefined,
      was.ok ? was.value.status?.operation : undefined,
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
          message: `reading the applier's source failed: ${errorMessage(err)}`,
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

  private async reconcileOne(
    j: Judged,
    standing: ReturnType<typeof rankClaims> extends Map<string, infer S> ? S : never,
    successor: string | undefined,
  ): Promise<number | undefined> {
    const { eligibility } = j;
    // Decide on the claim as it is now. The cache can lag our own writes and the executor's record:
    // it answers only when it holds the newest version this process read or wrote.
    const cached = this.claims.get(j.claim.metadata.name, j.claim.metadata.namespace);
    const claim = this.o.kube.isCurrent(this.o.claimType, cached)
      ? cached
      : await this.o.kube.get<KObject>(
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
    const hasFinalizer = (typed.metadata.finalizers ?? []).includes(CLAIM_FINALIZER);
    const operation = typed.status?.operation;
    const inFlight = isInFlight(operation) ? operation : undefined;
    const bound = eligibility.state === "Bound" ? eligibility : undefined;
    const branchKey = this.branchKeyOf(bound?.eligible ?? []);

    const plan = planClaim({
      eligibility,
      standing,
      ...(generation !== undefined ? { generation } : {}),
      deleting: Boolean(typed.metadata.deletionTimestamp),
      hasFinalizer,
      gaveUp: gaveUp(typed),
    });
    if (plan.act === "Wait") {
      await this.writes.status(claim, plan.conditions);
      return plan.requeueMs;
    }
    if (plan.act === "Release") {
      if (!plan.handBack) {
        await this.writes.status(claim, plan.conditions);
        return undefined;
      }
      const result = await handBack(
        {
          controller: this.o.controller,
          events: this.o.events,
          now: this.now,
          releaseTimeoutMs: this.o.releaseTimeoutMs ?? 600_000,
          regarding: (c) => this.aftercare.regarding(c),
          ctx: (extra) => this.ctx(extra),
        },
        { claim: j.claim, typed: j.typed, applier: j.applier },
        {
          ...(successor ? { successor } : {}),
          ...(inFlight ? { inFlight } : {}),
          ...(branchKey ? { branchKey } : {}),
        },
      );
      await this.writes.status(claim, [...plan.conditions, ...(result.conditions ?? [])], result.status);
      if (!result.done) return result.requeueAfterMs ?? 5_000;
      await this.writes.dropFinalizer(claim);
      return result.requeueAfterMs;
    }

    const check = await this.o.controller.checkExternal(
      claim,
      j.applier,
      this.ctx({ ...(branchKey ? { branchKey } : {}) }),
    );
    const names = (bound?.eligible ?? []).map((t) => `${t.namespace}/${t.name}`);
    const hold = planHold(check, names, hasFinalizer, generation);
    if (hold.act === "Wait") {
      await this.writes.status(claim, hold.conditions);
      return hold.requeueMs;
    }

    const current = hasFinalizer ? claim : await this.writes.addFinalizer(claim);
    let requeue: number | undefined;
    if (inFlight && inFlight.targets.length > 0)
      requeue = await this.aftercare.followUp(current, j.applier, inFlight, branchKey);
    if (operation && !inFlight && branchKey) await this.aftercare.resendEnd(current, operation, branchKey);

    const ctx = this.ctx({
      ...(inFlight ? { operation: inFlight } : {}),
      ...(branchKey ? { branchKey } : {}),
    });
    const held: HoldResult = await this.o.controller.hold(current, j.applier, ctx);
    await this.writes.status(current, [...hold.conditions, ...held.conditions], held.status);
    if (held.requeueAfterMs !== undefined)
      requeue = Math.min(requeue ?? held.requeueAfterMs, held.requeueAfterMs);
    return requeue;
  }

  private branchKeyOf(targets: TargetView[]): string | undefined {
    for (const t of targets) {
      const p = this.provider(t.providerRef.namespace ?? t.namespace, t.providerRef.name);
      if (p?.url) return makeBranchKey(p, p.url, t.branch);
    }
    return undefined;
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
