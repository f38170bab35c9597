/**
 * The watch plane: `applygate mirror`. It reads WatchRules, watches the kinds they select (one
 * shared informer per kind, however many rules select it), and turns each watched write into a
 * pending write through the same intake gate the intake API uses (the branch's inbox, its budget
 * and pause latch), so the branch worker owns it from then on. Every decision is pure and lives
 * beside it (authorship, sanitize, ownership, rules) or in the worker's decision core (the apply
 * window's judgement of the applier's own writes); this file is the shell around them.
 */
import { randomUUID } from "node:crypto";
import type { KubeConfig } from "@kubernetes/client-node";
import { Queue } from "bullmq";
import type { Redis } from "ioredis";
import { type AcceptedWrite, QUEUES, type SnapshotStamp } from "../../queue/contract.js";
import {
  type GitProvider,
  type GitTarget,
  type ScopeGrant,
  scopeGrant,
  type WatchRule,
  watchRule,
} from "../../queue/crds/index.js";
import { errorMessage } from "../../queue/errors.js";
import { WATCHED_TTL_MS } from "../../queue/keys.js";
import {
  type InformerEvent,
  type InformerHandle,
  type KObject,
  Kube,
  RESOURCES,
  type ResourceType,
  readGitProvider,
  readGitTarget,
  readObject,
  type StatusWriter,
  statusWriter,
  TypedCache,
} from "../../queue/kube/index.js";
import { type Logger, silentLogger } from "../../queue/log.js";
import { readApplyState } from "../../queue/records.js";
import { bullConnection, connectRedis } from "../../queue/redis.js";
import { Coverage, collectionKey, coverageKey, listenForRecollections } from "./coverage.js";
import { Delivery } from "./delivery.js";
import { resolveKind } from "./discovery.js";
import type { MirrorMetrics } from "./http.js";
import { KindWatches, type WatchState } from "./kind-watches.js";
import { type RuleState, writeRuleStatuses } from "./rule-state.js";
import { describeKind, kindKey, namesKind, type ResolvedKind } from "./rules.js";
import { DEFAULT_CONTROLLER_MANAGERS } from "./sanitize.js";
import { SWEEP_AUTHOR, sweepPlan } from "./sweep.js";
import {
  appliedCommitOf,
  clusterCommitsOf,
  lookupTarget,
  type ResolvedTarget,
  type TargetSources,
} from "./targets.js";
import { stable, translate, type WriteBody } from "./translate.js";

export interface MirrorOptions {
  kubeConfig: KubeConfig;
  redisUrl: string;
  redisPrefix: string;
  log?: Logger;
  now?: () => number;
  /** Managers whose fields alone are left out (the HPA's spec.replicas); default DEFAULT_CONTROLLER_MANAGERS. */
  controllerManagers?: readonly string[];
  /** Authors are `<manager> <manager@domain>`; default `cluster.local`. */
  authorDomain?: string;
  /** How often a rule's unresolved and forbidden kinds are looked up again (default 10 s). */
  resolveIntervalMs?: number;
  /**
   * How long a reconcile waits for a new kind's first list (default 5 s). A kind still not listed
   * then is not waited for: its rules take their snapshot of it once it lands, and a kind the
   * mirror may not list (403) is reported on the rules naming it. Nothing one rule names can
   * hold up another rule.
   */
  watchSyncTimeoutMs?: number;
  /** How often changed WatchRule status is written (default 2 s). */
  statusIntervalMs?: number;
  /** How often the mirror's coverage of its GitTargets is refreshed in Redis (default a third of its TTL). */
  coverageIntervalMs?: number;
  metrics?: MirrorMetrics;
}

const SCOPE_GRANT: ResourceType = RESOURCES.scopeGrant;

const ruleKey = (r: { metadata: { namespace?: string; name: string } }) =>
  `${r.metadata.namespace ?? ""}/${r.metadata.name}`;

export class Mirror {
  readonly kube: Kube;
  private readonly log: Logger;
  private readonly now: () => number;
  private readonly redis: Redis;
  private readonly branches: Queue;
  private readonly handles: InformerHandle<KObject>[] = [];
  private rulesCache!: TypedCache<WatchRule>;
  private targetsCache!: TypedCache<GitTarget>;
  private providersCache!: TypedCache<GitProvider>;
  private grantsCache!: TypedCache<ScopeGrant>;
  private claims = new Map<string, InformerHandle<KObject>>();
  private readonly rules = new Map<string, RuleState>();
  private readonly kindWatches: KindWatches;
  /** Objects excluded as another applier's, logged once each (by uid and folder). */
  private readonly loggedExclusions = new Set<string>();
  private reconciling: Promise<void> | undefined;
  private again = false;
  private timers: NodeJS.Timeout[] = [];
  private stopped = false;
  private started = false;
  /** The typed caches exist: before that, a change is left for the first reconcile to read. */
  private cachesReady = false;
  private readonly delivery: Delivery;
  /** Writes handed to an inbox, in order (tests and the playground read it): the delivery's. */
  readonly sent: AcceptedWrite[];
  /** The initial-snapshot markers handed to an inbox, in order. */
  readonly markers: AcceptedWrite[];
  private readonly coverage: Coverage;
  private subscriber: Redis | undefined;

  private readonly statusWriter: StatusWriter<"watchRule", "mirror">;

  constructor(private readonly o: MirrorOptions) {
    this.kube = new Kube(o.kubeConfig);
    this.statusWriter = statusWriter(this.kube, "watchRule", "mirror");
    this.log = (o.log ?? silentLogger()).child({ component: "mirror" });
    this.now = o.now ?? Date.now;
    this.redis = connectRedis(o.redisUrl);
    const connection = bullConnection(o.redisUrl);
    this.branches = new Queue(QUEUES.branches, { connection, prefix: o.redisPrefix });
    this.branches.on("error", () => {});
    this.delivery = new Delivery({
      redis: this.redis,
      redisPrefix: o.redisPrefix,
      branches: this.branches,
      log: this.log,
      now: this.now,
      stopping: () => this.stopped,
    });
    this.kindWatches = new KindWatches({
      kube: this.kube,
      log: this.log,
      now: this.now,
      resolveIntervalMs: o.resolveIntervalMs ?? 10_000,
      watchSyncTimeoutMs: o.watchSyncTimeoutMs ?? 5_000,
      onObject: (kind, type, obj, prev) => this.onObject(kind, type, obj, prev),
      onSynced: () => this.reconcileSoon(),
    });
    this.coverage = new Coverage({ redis: this.redis, redisPrefix: o.redisPrefix, log: this.log });
    this.sent = this.delivery.sent;
    this.markers = this.delivery.markers;
  }

  /** Lists WatchRules, GitTargets, GitProviders, ScopeGrants and claims, then starts every rule. */
  async start(): Promise<void> {
    const onChange = () => this.reconcileSoon();
    const acquire = (t: ResourceType) => {
      const h = this.kube.informer(t, { onChange, log: this.log });
      this.handles.push(h);
      return h;
    };
    const rules = acquire(RESOURCES.watchRule);
    const targets = acquire(RESOURCES.gitTarget);
    const providers = acquire(RESOURCES.gitProvider);
    const grants = acquire(SCOPE_GRANT);
    this.claims.set("FluxClaim", acquire(RESOURCES.fluxClaim));
    this.claims.set("ArgoCDClaim", acquire(RESOURCES.argoCDClaim));
    this.claims.set("WebhookClaim", acquire(RESOURCES.webhookClaim));
    await Promise.all(this.handles.map((h) => h.synced()));
    this.rulesCache = new TypedCache(rules.informer, (o) => readObject(watchRule, o), this.log);
    this.targetsCache = new TypedCache(targets.informer, readGitTarget, this.log);
    this.providersCache = new TypedCache(providers.informer, readGitProvider, this.log);
    this.grantsCache = new TypedCache(grants.informer, (o) => readObject(scopeGrant, o), this.log);
    // Changes seen while the informers synced are in the caches this first pass reads.
    this.reconciling = this.reconcile();
    try {
      await this.reconciling;
    } finally {
      this.reconciling = undefined;
    }
    this.cachesReady = true;
    if (this.again) this.reconcileSoon();
    const every = (ms: number, f: () => void) => {
      const t = setInterval(f, ms);
      t.unref?.();
      this.timers.push(t);
    };
    every(this.o.resolveIntervalMs ?? 10_000, () => {
      if ([...this.rules.values()].some((r) => r.unresolved.length > 0 || r.forbidden.length > 0))
        this.reconcileSoon();
    });
    every(this.o.statusIntervalMs ?? 2_000, () => void this.writeStatus());
    every(this.o.coverageIntervalMs ?? Math.floor(WATCHED_TTL_MS / 3), () => {
      if (!this.stopped) void this.coverage.refresh();
    });
    await this.subscribeRecollections();
    this.started = true;
    this.log.info({ rules: this.rules.size }, "mirror started");
  }

  async stop(): Promise<void> {
    this.stopped = true;
    for (const t of this.timers) clearInterval(t);
    this.subscriber?.disconnect();
    await this.reconciling;
    await this.delivery.idle();
    await this.writeStatus();
    await this.kube.close();
    await this.branches.close();
    this.redis.disconnect();
  }

  /** Resolves once every write decided so far has reached its inbox. */
  async idle(): Promise<void> {
    while (this.reconciling) await this.reconciling;
    await this.delivery.idle();
  }

  /** What /readyz reports. */
  async checks(): Promise<{ redis: boolean; started: boolean; unsyncedWatches: string[] }> {
    const redis = await this.redis.ping().then(
      (r) => r === "PONG",
      () => false,
    );
    // A kind known to be forbidden is listed again every resolve interval to see whether it was
    // granted since; that probe is no watch the mirror waits for.
    const probing = new Set(this.kindWatches.probingPaths());
    return {
      redis,
      started: this.started,
      unsyncedWatches: this.kube.unsyncedWatches().filter((p) => !probing.has(p)),
    };
  }

  /** The counts and problems of each rule, as its status will say. */
  ruleStates(): ReadonlyMap<string, Readonly<RuleState>> {
    return this.rules;
  }

  /** Informer paths running, one per watched kind. */
  watchedPaths(): string[] {
    return this.kindWatches.paths();
  }

  // ------------------------------------------------------------------------------------------
  // Rules

  private reconcileSoon(): void {
    if (this.stopped) return;
    if (this.reconciling || !this.cachesReady) {
      this.again = true;
      return;
    }
    this.reconciling = (async () => {
      do {
        this.again = false;
        try {
          await this.reconcile();
        } catch (err) {
          this.log.error({ err: errorMessage(err) }, "reconciling WatchRules failed");
        }
      } while (this.again && !this.stopped);
      this.reconciling = undefined;
    })();
  }

  private sources(): TargetSources {
    return {
      target: (ns, name) => this.targetsCache.get(name, ns),
      provider: (ns, name) => this.providersCache.get(name, ns),
      providers: () => this.providersCache.list(),
      targets: () => this.targetsCache.list(),
      grants: () => this.grantsCache.list(),
      claim: (kind, ns, name) => this.claims.get(kind)?.informer.get(name, ns) as never,
    };
  }

  /** Brings rules, their targets and kinds, and the kind watches in line with the caches. */
  private async reconcile(): Promise<void> {
    const seen = new Set<string>();
    const due: Array<{ st: RuleState; kinds: ResolvedKind[] }> = [];
    for (const rule of this.rulesCache.list()) {
      const key = ruleKey(rule);
      seen.add(key);
      let st = this.rules.get(key);
      const changed = !st || st.rule.metadata.generation !== rule.metadata.generation;
      if (!st) {
        st = {
          key,
          rule,
          kinds: new Map(),
          waiting: new Map(),
          unresolved: [],
          forbidden: [],
          target: undefined,
          mirrored: rule.status?.mirrored ?? 0,
          refused: rule.status?.refused ?? 0,
          excluded: rule.status?.excluded ?? 0,
          statusDirty: true,
          lastStatus: "",
        };
        this.rules.set(key, st);
      }
      st.rule = rule;
      const lookup = lookupTarget(this.sources(), rule.metadata.namespace ?? "", rule.spec.targetRef.name);
      const before = st.target ? stable(st.target) : "";
      if (lookup.ok) {
        st.target = lookup.target;
        delete st.targetProblem;
      } else {
        st.target = undefined;
        st.targetProblem = { reason: lookup.reason, message: lookup.message };
      }
      const targetChanged = (st.target ? stable(st.target) : "") !== before;
      const newKinds = await this.resolveKinds(st, changed);
      st.statusDirty = true;
      // A rule that starts, changes, gains a kind or a target takes a snapshot of what it selects.
      if (st.target && (changed || targetChanged || newKinds.length > 0))
        due.push({ st, kinds: changed || targetChanged ? [...st.kinds.values()] : newKinds });
    }
    for (const key of [...this.rules.keys()]) if (!seen.has(key)) this.rules.delete(key);
    await this.takeSnapshots(due);
    this.coverage.forgetAllBut(
      new Set(
        [...this.rules.values()].flatMap((r) =>
          r.target && r.kinds.size > 0 ? [coverageKey(r.target)] : [],
        ),
      ),
    );
    await this.releaseUnused();
  }

  /**
   * Snapshots, grouped by GitTarget. A GitTarget with a collection taking its first snapshot starts
   * a round of initial snapshots: its coverage token is written to Redis (so the worker's barrier
   * holds its applier), a `started` marker goes to the inbox, then the writes, then a `done`
   * marker, after which the worker lets the applier go once everything before it is published.
   */
  private async takeSnapshots(due: Array<{ st: RuleState; kinds: ResolvedKind[] }>): Promise<void> {
    const byTarget = new Map<string, Array<{ st: RuleState; kinds: ResolvedKind[] }>>();
    for (const d of due) {
      const t = d.st.target as ResolvedTarget;
      const key = coverageKey(t);
      byTarget.set(key, [...(byTarget.get(key) ?? []), d]);
    }
    for (const [_key, group] of byTarget) {
      const target = (group[0] as { st: RuleState }).st.target as ResolvedTarget;
      const collections = group.flatMap((d) => d.kinds.map((k) => collectionKey(d.st.target, d.st.key, k)));
      let token: string | undefined;
      if (this.coverage.anyNew(collections)) {
        token = await this.coverage.startRound(target);
        this.marker(group[0] as { st: RuleState }, token, "started");
      }
      for (const d of group) for (const k of d.kinds) await this.snapshot(d.st, k);
      if (token) this.marker(group[0] as { st: RuleState }, token, "done");
    }
  }

  private marker(d: { st: RuleState }, token: string, phase: "started" | "done"): void {
    this.send(d.st, { changes: [], author: this.author(SWEEP_AUTHOR), initialSnapshots: { token, phase } });
  }

  /** The worker asks for a GitTarget's snapshots again (Git is no longer ahead, or the hold's bound passed). */
  private async subscribeRecollections(): Promise<void> {
    const listening = listenForRecollections(this.o.redisUrl, this.o.redisPrefix, (m) => {
      const due = [...this.rules.values()].filter(
        (r) =>
          r.target?.branchKey === m.branchKey &&
          r.target?.namespace === m.namespace &&
          r.target?.name === m.name,
      );
      if (due.length === 0) return;
      this.log.info(
        { branch: m.branchKey, target: `${m.namespace}/${m.name}` },
        "collecting a GitTarget's snapshots again, as its branch worker asked",
      );
      void this.takeSnapshots(due.map((st) => ({ st, kinds: [...st.kinds.values()] }))).catch(
        (err: unknown) => this.log.warn({ err: errorMessage(err) }, "collecting snapshots again failed"),
      );
    });
    this.subscriber = listening.connection;
    await listening.subscribed;
  }

  /**
   * Resolves the rule's kinds not watched for it yet (all again when it changed); answers the
   * kinds it newly selects. A kind is selected once its watch has synced; one not served, not
   * listed yet or forbidden is reported on this rule alone and looked up again later.
   */
  private async resolveKinds(st: RuleState, changed: boolean): Promise<ResolvedKind[]> {
    if (changed) st.kinds = new Map();
    const watched = [...st.kinds.values()];
    const want = st.rule.spec.kinds.filter((k) => !watched.some((r) => namesKind(k, r)));
    const unresolved: string[] = [];
    const forbidden: string[] = [];
    const added: ResolvedKind[] = [];
    st.waiting = new Map();
    for (const k of want) {
      const r = await resolveKind(this.kube, k);
      const w: WatchState = r ? await this.kindWatches.watchOf(r) : { state: "unserved" };
      if (w.state === "forbidden") forbidden.push(`${describeKind(k)}: ${w.message}`);
      else if (w.state !== "synced" || !r) {
        unresolved.push(describeKind(k));
        if (r && w.state === "syncing") st.waiting.set(kindKey(r), r);
      } else {
        if (!st.kinds.has(kindKey(r))) added.push(r);
        st.kinds.set(kindKey(r), r);
      }
    }
    st.unresolved = unresolved;
    st.forbidden = forbidden;
    return added;
  }

  private releaseUnused(): Promise<void> {
    return this.kindWatches.releaseAllBut(
      new Set([...this.rules.values()].flatMap((r) => [...r.kinds.keys(), ...r.waiting.keys()])),
    );
  }

  /**
   * A rule's snapshot of one kind: every object it selects, written; the worker keeps only
   * differences. The branch's apply state (epoch, whether Git is ahead) is read just before the
   * collection is listed, and every write of the snapshot and its sweep carries it, so the worker
   * can discard a snapshot collected while Git was ahead or across an apply. The first snapshot of
   * a collection in this process is initial: the startup baseline, never held.
   */
  private async snapshot(st: RuleState, kind: ResolvedKind): Promise<void> {
    const target = st.target;
    if (!target) return;
    let applied: Awaited<ReturnType<typeof readApplyState>>;
    try {
      applied = await readApplyState(this.redis, this.o.redisPrefix, target.branchKey);
    } catch (err) {
      this.error(st, `reading the apply state of ${target.branchKey}: ${errorMessage(err)}`);
      applied = undefined;
    }
    const w = this.kindWatches.get(kind);
    if (!w || st.target !== target) return;
    const collection = collectionKey(target, st.key, kind);
    // The cluster may still run an older commit than the tip the worker reads the snapshot at (a
    // push it has not applied, or not even seen, when this was read): the worker needs those
    // commits to tell the applier's state from an edit.
    const clusterCommits = clusterCommitsOf(this.sources(), target.namespace, target.name);
    const stamp: SnapshotStamp = {
      id: `s-${randomUUID()}`,
      epoch: applied?.epoch ?? null,
      gitAhead: applied?.gitAhead ?? false,
      initial: this.coverage.firstSnapshot(collection),
      ...(clusterCommits.length > 0 ? { appliedCommits: clusterCommits } : {}),
    };
    const objects = w.handle.informer.list();
    for (const obj of objects) this.mirrorFor(st, kind, "add", obj, undefined, stamp);
    if (st.rule.spec.prune?.mode === "Always") this.sweep(st, kind, objects, stamp);
  }

  /**
   * After a snapshot under `prune.mode: Always`: one sweep write, after the snapshot's writes on the
   * branch's chain, that the worker turns into deletes of the files of objects gone live. Every
   * live object of the kind in the swept namespaces is named, selected or not, so a file that
   * another rule holds for a live object stays. It carries the commit the applier last applied:
   * only a file Git held then is swept. Nothing applied yet (or no claim): no sweep.
   */
  private sweep(st: RuleState, kind: ResolvedKind, objects: readonly KObject[], stamp: SnapshotStamp): void {
    const target = st.target;
    if (!target || st.rule.spec.suspend === true) return;
    const appliedCommit = appliedCommitOf(this.sources(), target.namespace, target.name);
    if (!appliedCommit) {
      if (!st.sweepWithoutApplyLogged)
        this.log.debug(
          { rule: st.key, branch: target.branchKey, kind: kind.kind },
          "prune sweep skipped: the GitTarget's applier has applied no commit yet",
        );
      st.sweepWithoutApplyLogged = true;
      return;
    }
    const plan = sweepPlan(st.rule, target.scope, kind, objects);
    if (!plan) return;
    this.send(st, {
      changes: [],
      author: this.author(SWEEP_AUTHOR),
      sweep: { ...plan, appliedCommit },
      snapshot: stamp,
    });
  }

  // ------------------------------------------------------------------------------------------
  // Objects

  private onObject(
    kind: ResolvedKind,
    type: InformerEvent,
    obj: KObject,
    previous: KObject | undefined,
  ): void {
    if (this.stopped || !this.rulesCache) return;
    // One write per GitTarget, however many of its rules select the object.
    const targets = new Set<string>();
    for (const st of this.rules.values()) {
      if (!st.target || !st.kinds.has(kindKey(kind))) continue;
      const t = `${st.target.namespace}/${st.target.name}`;
      if (targets.has(t)) continue;
      if (this.mirrorFor(st, kind, type, obj, previous)) targets.add(t);
    }
  }

  /** Judges one watched write for one rule and acts on it; true when the rule selected the object. */
  private mirrorFor(
    st: RuleState,
    kind: ResolvedKind,
    type: InformerEvent,
    obj: KObject,
    previous: KObject | undefined,
    stamp?: SnapshotStamp,
  ): boolean {
    const target = st.target;
    if (!target) return false;
    const t = translate({
      rule: st.rule,
      target,
      kind,
      type,
      obj,
      ...(previous ? { previous } : {}),
      ...(stamp ? { stamp } : {}),
      controllerManagers: this.o.controllerManagers ?? DEFAULT_CONTROLLER_MANAGERS,
      authorDomain: this.o.authorDomain ?? "cluster.local",
    });
    switch (t.verdict) {
      case "NotSelected":
        return false;
      case "Unchanged":
        return true;
      case "Refused":
        this.refuse(st, t.message);
        return true;
      case "Write":
        this.send(st, t.write);
        return true;
      case "Excluded":
        st.excluded++;
        this.o.metrics?.outcome("excluded");
        st.statusDirty = true;
        if (t.owner) this.logExclusion(obj, t.shown, t.owner, target);
        return true;
    }
  }

  /** Once per object and GitTarget: another applier's object is left out of the folder. */
  private logExclusion(obj: KObject, shown: string, owner: string, target: ResolvedTarget): void {
    const once = `${obj.metadata.uid ?? shown}@${target.namespace}/${target.name}`;
    if (this.loggedExclusions.has(once)) return;
    this.loggedExclusions.add(once);
    this.log.warn(
      { object: shown, owner, target: `${target.namespace}/${target.name}`, branch: target.branchKey },
      "another applier's object: excluded from the folder",
    );
  }

  private author(manager: string) {
    return { name: manager, email: `${manager}@${this.o.authorDomain ?? "cluster.local"}` };
  }

  private send(st: RuleState, w: WriteBody): void {
    this.delivery.send(st.target as ResolvedTarget, w, {
      accepted: (write) => {
        // A sweep or a marker is no mirrored object: counted nowhere on the rule.
        if (!write.sweep && !write.initialSnapshots) {
          st.mirrored++;
          this.o.metrics?.outcome("mirrored");
        }
        st.statusDirty = true;
      },
      failed: (message) => this.error(st, message),
    });
  }

  private refuse(st: RuleState, message: string): void {
    st.refused++;
    this.o.metrics?.outcome("refused");
    st.statusDirty = true;
    st.lastError = { message, at: new Date(this.now()).toISOString() };
  }

  private error(st: RuleState, message: string): void {
    st.lastError = { message, at: new Date(this.now()).toISOString() };
    st.statusDirty = true;
    this.log.warn({ rule: st.key, err: message }, "mirror error");
  }

  // ------------------------------------------------------------------------------------------
  // Status

  private writeStatus(): Promise<void> {
    return writeRuleStatuses(
      this.rules.values(),
      this.statusWriter,
      new Date(this.now()).toISOString(),
      this.log,
    );
  }
}
