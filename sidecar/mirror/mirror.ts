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
import {
  type AcceptedWrite,
  type ObjectRef,
  QUEUES,
  type SnapshotStamp,
  type WriteChange,
} from "../../queue/contract.js";
import {
  type Condition,
  type GitProvider,
  type GitTarget,
  type ScopeGrant,
  StatusReason,
  scopeGrant,
  type WatchRule,
  type WatchRuleStatus,
  watchRule,
} from "../../queue/crds/index.js";
import { acceptWrite } from "../../queue/intake.js";
import { recollectChannel, WATCHED_TTL_MS, watchedTargetKey } from "../../queue/keys.js";
import {
  apiFailure,
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
import { writeProblem } from "../../queue/write-check.js";
import { authorshipOf } from "./authorship.js";
import { resolveKind } from "./discovery.js";
import type { MirrorMetrics } from "./http.js";
import { describeOwner, excludingOwner } from "./ownership.js";
import {
  apiVersionOf,
  describeKind,
  kindKey,
  kindRefusal,
  namesKind,
  outOfScope,
  type ResolvedKind,
  selects,
} from "./rules.js";
import { DEFAULT_CONTROLLER_MANAGERS, type SanitizeOptions, sanitize } from "./sanitize.js";
import { SWEEP_AUTHOR, sweepPlan } from "./sweep.js";
import {
  appliedCommitOf,
  clusterCommitsOf,
  lookupTarget,
  type ResolvedTarget,
  type TargetSources,
} from "./targets.js";

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

interface RuleState {
  key: string;
  rule: WatchRule;
  /** Served kinds this rule selects whose watch has synced, by kindKey. */
  kinds: Map<string, ResolvedKind>;
  /** Served kinds whose watch has not synced yet (its first list not landed), by kindKey. */
  waiting: Map<string, ResolvedKind>;
  /** Kinds not watched yet: not served, or not listed yet. */
  unresolved: string[];
  /** Kinds the mirror may not watch, with why (its RBAC, or Secrets). */
  forbidden: string[];
  target: ResolvedTarget | undefined;
  targetProblem?: { reason: string; message: string };
  mirrored: number;
  refused: number;
  excluded: number;
  lastError?: { message: string; at: string };
  statusDirty: boolean;
  lastStatus: string;
  /** Whether a sweep skipped for want of an applied commit was logged (once per rule). */
  sweepWithoutApplyLogged?: boolean;
}

interface KindWatch {
  kind: ResolvedKind;
  handle: InformerHandle<KObject>;
}

/** What became of a kind's watch when a rule asked for it. */
type WatchState = { state: "synced" | "syncing" | "unserved" } | { state: "forbidden"; message: string };

/** Resolves once `p` settles or `ms` passed, whichever comes first. */
function bounded(p: Promise<unknown>, ms: number): Promise<void> {
  return new Promise((resolve) => {
    const t = setTimeout(resolve, ms);
    t.unref?.();
    const done = () => {
      clearTimeout(t);
      resolve();
    };
    p.then(done, done);
  });
}

const ruleKey = (r: { metadata: { namespace?: string; name: string } }) =>
  `${r.metadata.namespace ?? ""}/${r.metadata.name}`;

/** A stable encoding (keys sorted), so two sanitized versions compare by content. */
function stable(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(stable).join(",")}]`;
  if (v && typeof v === "object")
    return `{${Object.keys(v as object)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${stable((v as Record<string, unknown>)[k])}`)
      .join(",")}}`;
  return JSON.stringify(v);
}

/** A GitTarget as the mirror's coverage knows it. */
const coverageKey = (t: ResolvedTarget) => `${t.branchKey} ${t.namespace}/${t.name}`;
/** One collection: a rule's kind, for the GitTarget it writes to now. */
const collectionKey = (st: RuleState, kind: ResolvedKind) =>
  `${st.target ? coverageKey(st.target) : ""}|${st.key}|${kindKey(kind)}`;

const refOf = (kind: ResolvedKind, o: KObject): ObjectRef => ({
  apiVersion: apiVersionOf(kind),
  kind: kind.kind,
  name: o.metadata.name,
  ...(kind.namespaced && o.metadata.namespace ? { namespace: o.metadata.namespace } : {}),
});

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
  private readonly watches = new Map<string, KindWatch>();
  /** Kinds whose list the API server refused the mirror (403), by kindKey, and when: asked again after resolveIntervalMs. */
  private readonly forbiddenKinds = new Map<string, { message: string; at: number }>();
  /** One chain of sends per branch, so one object's writes reach its inbox in order. */
  private readonly chains = new Map<string, Promise<void>>();
  /** Objects excluded as another applier's, logged once each (by uid and folder). */
  private readonly loggedExclusions = new Set<string>();
  private reconciling: Promise<void> | undefined;
  private again = false;
  private timers: NodeJS.Timeout[] = [];
  private stopped = false;
  private started = false;
  /** The typed caches exist: before that, a change is left for the first reconcile to read. */
  private cachesReady = false;
  /** Writes handed to an inbox, in order (tests and the playground read it). */
  readonly sent: AcceptedWrite[] = [];
  /** The initial-snapshot markers handed to an inbox, in order. */
  readonly markers: AcceptedWrite[] = [];
  /** This process: a coverage token is `<instance>:<round>`, so a restart starts new rounds. */
  readonly instance = randomUUID().slice(0, 8);
  /** Collections (GitTarget, rule, kind) that took their initial snapshot in this process. */
  private readonly collected = new Set<string>();
  /** The coverage token of each GitTarget the mirror covers, by `<branchKey> <namespace>/<name>`. */
  private readonly coverage = new Map<string, { token: string; target: ResolvedTarget }>();
  private rounds = 0;
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
    every(this.o.coverageIntervalMs ?? Math.floor(WATCHED_TTL_MS / 3), () => void this.refreshCoverage());
    await this.subscribeRecollections();
    this.started = true;
    this.log.info({ rules: this.rules.size }, "mirror started");
  }

  async stop(): Promise<void> {
    this.stopped = true;
    for (const t of this.timers) clearInterval(t);
    this.subscriber?.disconnect();
    await this.reconciling;
    await Promise.all(this.chains.values());
    await this.writeStatus();
    await this.kube.close();
    await this.branches.close();
    this.redis.disconnect();
  }

  /** Resolves once every write decided so far has reached its inbox. */
  async idle(): Promise<void> {
    while (this.reconciling) await this.reconciling;
    for (;;) {
      const pending = [...this.chains.values()];
      await Promise.all(pending);
      if (pending.every((p, i) => [...this.chains.values()][i] === p)) return;
    }
  }

  /** What /readyz reports. */
  async checks(): Promise<{ redis: boolean; started: boolean; unsyncedWatches: string[] }> {
    const redis = await this.redis.ping().then(
      (r) => r === "PONG",
      () => false,
    );
    // A kind known to be forbidden is listed again every resolve interval to see whether it was
    // granted since; that probe is no watch the mirror waits for.
    const probing = new Set(
      [...this.watches].flatMap(([key, w]) => (this.forbiddenKinds.has(key) ? [w.handle.informer.path] : [])),
    );
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
    return [...this.watches.values()].map((w) => w.handle.informer.path);
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
          this.log.error({ err: (err as Error).message }, "reconciling WatchRules failed");
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
    this.forgetCoverage();
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
    for (const [key, group] of byTarget) {
      const target = (group[0] as { st: RuleState }).st.target as ResolvedTarget;
      const initial = group.some((d) => d.kinds.some((k) => !this.collected.has(collectionKey(d.st, k))));
      let token: string | undefined;
      if (initial) {
        token = `${this.instance}:${++this.rounds}`;
        this.coverage.set(key, { token, target });
        await this.writeCoverage(target, token);
        this.marker(group[0] as { st: RuleState }, token, "started");
      }
      for (const d of group) for (const k of d.kinds) await this.snapshot(d.st, k);
      if (token) this.marker(group[0] as { st: RuleState }, token, "done");
    }
  }

  private marker(d: { st: RuleState }, token: string, phase: "started" | "done"): void {
    this.send(d.st, { changes: [], author: this.author(SWEEP_AUTHOR), initialSnapshots: { token, phase } });
  }

  private async writeCoverage(target: ResolvedTarget, token: string): Promise<void> {
    try {
      await this.redis.set(
        watchedTargetKey(this.o.redisPrefix, target.branchKey, target.namespace, target.name),
        token,
        "PX",
        WATCHED_TTL_MS,
      );
    } catch (err) {
      this.log.warn(
        {
          branch: target.branchKey,
          target: `${target.namespace}/${target.name}`,
          err: (err as Error).message,
        },
        "could not record the mirror's coverage of a GitTarget",
      );
    }
  }

  /** Keeps the coverage of every GitTarget a rule still mirrors alive (it expires when the mirror is gone). */
  private async refreshCoverage(): Promise<void> {
    if (this.stopped) return;
    for (const { token, target } of this.coverage.values()) await this.writeCoverage(target, token);
  }

  /** A GitTarget no rule mirrors any more is not covered: its coverage is left to expire. */
  private forgetCoverage(): void {
    const live = new Set(
      [...this.rules.values()].flatMap((r) => (r.target && r.kinds.size > 0 ? [coverageKey(r.target)] : [])),
    );
    for (const key of [...this.coverage.keys()]) if (!live.has(key)) this.coverage.delete(key);
  }

  /** The worker asks for a GitTarget's snapshots again (Git is no longer ahead, or the hold's bound passed). */
  private async subscribeRecollections(): Promise<void> {
    const sub = connectRedis(this.o.redisUrl);
    this.subscriber = sub;
    sub.on("error", () => {});
    sub.on("message", (_channel: string, raw: string) => {
      let m: { branchKey?: string; namespace?: string; name?: string };
      try {
        m = JSON.parse(raw);
      } catch {
        return;
      }
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
        (err: unknown) => this.log.warn({ err: (err as Error).message }, "collecting snapshots again failed"),
      );
    });
    await sub.subscribe(recollectChannel(this.o.redisPrefix));
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
      const w: WatchState = r ? await this.watchOf(r) : { state: "unserved" };
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

  /**
   * The watch of a kind, started if it is not running: synced, still syncing (its first list has
   * not landed within watchSyncTimeoutMs: its rules are reconciled again once it does), or
   * forbidden. Secrets are refused before any list; a list the API server refuses (403) is
   * remembered for resolveIntervalMs and its informer stopped, so it neither retries on its own
   * nor keeps the mirror unready.
   */
  private async watchOf(kind: ResolvedKind): Promise<WatchState> {
    const refused = kindRefusal(kind);
    if (refused) return { state: "forbidden", message: refused };
    const key = kindKey(kind);
    const known = this.forbiddenKinds.get(key);
    if (known && this.now() - known.at < (this.o.resolveIntervalMs ?? 10_000))
      return { state: "forbidden", message: known.message };
    let w = this.watches.get(key);
    const created = !w;
    if (!w) {
      const handle = await this.kube.objectInformer<KObject>(
        apiVersionOf(kind),
        kind.kind,
        undefined,
        (type, obj, prev) => this.onObject(kind, type, obj, prev),
      );
      if (!handle) return { state: "unserved" };
      const started: KindWatch = { kind, handle };
      w = started;
      this.watches.set(key, started);
      void handle.informer.whenSynced().then(() => {
        if (this.watches.get(key) === started) this.reconcileSoon();
      });
    }
    const informer = w.handle.informer;
    // Only a watch started now is waited for, and for a bounded time; a watch already running
    // is taken as it is (its sync, when it comes, reconciles its rules again).
    if (created) await bounded(informer.start(), this.o.watchSyncTimeoutMs ?? 5_000);
    if (informer.hasSynced()) {
      this.forbiddenKinds.delete(key);
      return { state: "synced" };
    }
    if (informer.lastError !== undefined && apiFailure(informer.lastError).code === 403) {
      const message = `the mirror may not list ${kind.resource}${kind.group ? `.${kind.group}` : ""} (403): a cluster administrator lets it with a ClusterRole labelled applygate.dev/aggregate-to-mirror=true`;
      if (!known) this.log.warn({ kind: key }, "the mirror may not watch a kind a WatchRule names");
      this.forbiddenKinds.set(key, { message, at: this.now() });
      this.watches.delete(key);
      await w.handle.release();
      return { state: "forbidden", message };
    }
    return { state: "syncing" };
  }

  private async releaseUnused(): Promise<void> {
    const used = new Set([...this.rules.values()].flatMap((r) => [...r.kinds.keys(), ...r.waiting.keys()]));
    for (const [key, w] of [...this.watches]) {
      if (used.has(key)) continue;
      this.watches.delete(key);
      await w.handle.release();
    }
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
      this.error(st, `reading the apply state of ${target.branchKey}: ${(err as Error).message}`);
      applied = undefined;
    }
    const w = this.watches.get(kindKey(kind));
    if (!w || st.target !== target) return;
    const collection = collectionKey(st, kind);
    // The cluster may still run an older commit than the tip the worker reads the snapshot at (a
    // push it has not applied, or not even seen, when this was read): the worker needs those
    // commits to tell the applier's state from an edit.
    const clusterCommits = clusterCommitsOf(this.sources(), target.namespace, target.name);
    const stamp: SnapshotStamp = {
      id: `s-${randomUUID()}`,
      epoch: applied?.epoch ?? null,
      gitAhead: applied?.gitAhead ?? false,
      initial: !this.collected.has(collection),
      ...(clusterCommits.length > 0 ? { appliedCommits: clusterCommits } : {}),
    };
    this.collected.add(collection);
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

  /** Judges one watched write for one rule; true when the rule selected the object. */
  private mirrorFor(
    st: RuleState,
    kind: ResolvedKind,
    type: InformerEvent,
    obj: KObject,
    previous: KObject | undefined,
    stamp?: SnapshotStamp,
  ): boolean {
    const target = st.target;
    const snap = stamp ? { snapshot: stamp } : {};
    if (!target || !st.rule.spec.kinds.some((k) => namesKind(k, kind))) return false;
    // An update that takes the object out of the selector is not a delete: Git keeps its file.
    // What the GitTarget may not hold is never looked at (the rule's status says so: outOfScope).
    if (!selects(st.rule, target.scope, kind, obj).selected) return false;
    const ref = refOf(kind, obj);
    const shown = `${kind.kind} ${ref.namespace ? `${ref.namespace}/` : ""}${ref.name}`;
    const owner = excludingOwner(obj, target.applier);
    if (owner) {
      st.excluded++;
      this.o.metrics?.outcome("excluded");
      st.statusDirty = true;
      const once = `${obj.metadata.uid ?? shown}@${target.namespace}/${target.name}`;
      if (!this.loggedExclusions.has(once)) {
        this.loggedExclusions.add(once);
        this.log.warn(
          {
            object: shown,
            owner: describeOwner(owner),
            target: `${target.namespace}/${target.name}`,
            branch: target.branchKey,
          },
          "another applier's object: excluded from the folder",
        );
      }
      return true;
    }
    const opts: SanitizeOptions = {
      controllerManagers: this.o.controllerManagers ?? DEFAULT_CONTROLLER_MANAGERS,
      ...(st.rule.spec.excludeFields ? { excludeFields: st.rule.spec.excludeFields } : {}),
    };
    if (type === "delete") {
      const s = sanitize(obj as Record<string, unknown>, opts);
      if (!s.ok) return true; // never mirrored, so there is no file to delete
      this.send(st, { changes: [{ op: "delete", ref }], author: this.author("unknown") });
      return true;
    }
    const clean = sanitize(obj as Record<string, unknown>, opts);
    if (!clean.ok) {
      // A Secret never gets here (its kind is never watched); refused all the same if one did.
      if (clean.reason === "secret") this.refuse(st, `${shown}: ${clean.message}`);
      else {
        st.excluded++;
        st.statusDirty = true;
        this.o.metrics?.outcome("excluded");
      }
      return true;
    }
    let base: Record<string, unknown> | undefined;
    if (previous) {
      const was = sanitize(previous as Record<string, unknown>, opts);
      // Nothing Git holds changed (a status write, server bookkeeping): no write.
      if (was.ok && stable(was.object) === stable(clean.object)) return true;
      if (was.ok) base = was.object;
    }
    // The write names its change: the object as this watch last saw it is its base, so a field
    // this write did not change (one a withheld late apply set, say) keeps Git's value.
    const change: WriteChange = {
      op: "upsert",
      object: clean.object as WriteChange & never,
      ...(base ? { base: base as WriteChange & never } : {}),
    };
    // What the worker could not store is refused here, counted on the rule, never queued.
    const problem = writeProblem([change]);
    if (problem) {
      this.refuse(st, `${shown}: ${problem.field}: ${problem.message}`);
      return true;
    }
    const who = authorshipOf(obj, target.applierManagers, previous);
    if (who.kind === "applier")
      this.send(st, {
        changes: [change],
        author: this.author(who.write.manager),
        applierAuthored: who.write,
        editedAt: who.write.writtenAt,
        ...snap,
      });
    else
      this.send(st, {
        changes: [change],
        author: this.author(who.manager),
        ...(who.editedAt ? { editedAt: who.editedAt } : {}),
        ...snap,
      });
    return true;
  }

  private author(manager: string) {
    return { name: manager, email: `${manager}@${this.o.authorDomain ?? "cluster.local"}` };
  }

  private send(
    st: RuleState,
    w: Pick<
      AcceptedWrite,
      "changes" | "author" | "editedAt" | "applierAuthored" | "sweep" | "snapshot" | "initialSnapshots"
    >,
  ): void {
    const target = st.target as ResolvedTarget;
    const write: AcceptedWrite = {
      ...w,
      id: `m-${randomUUID()}`,
      target: { namespace: target.namespace, name: target.name, ...(target.uid ? { uid: target.uid } : {}) },
      branchKey: target.branchKey,
      path: target.path,
      acceptedAt: new Date(this.now()).toISOString(),
    };
    const chain = (this.chains.get(target.branchKey) ?? Promise.resolve()).then(() =>
      this.deliver(st, write),
    );
    this.chains.set(target.branchKey, chain);
    void chain.finally(() => {
      if (this.chains.get(target.branchKey) === chain) this.chains.delete(target.branchKey);
    });
  }

  /** Hands a write to its inbox through the intake gate; a paused branch is asked again after it says. */
  private async deliver(st: RuleState, write: AcceptedWrite): Promise<void> {
    for (let tries = 0; !this.stopped || tries === 0; tries++) {
      try {
        const r = await acceptWrite(this.redis, this.o.redisPrefix, write, this.branches, (err) =>
          this.log.warn({ err: (err as Error).message, branch: write.branchKey }, "branch signal failed"),
        );
        if (r.accepted) {
          // A sweep or a marker is no mirrored object: counted nowhere on the rule.
          if (!write.sweep && !write.initialSnapshots) {
            st.mirrored++;
            this.o.metrics?.outcome("mirrored");
          }
          st.statusDirty = true;
          if (write.initialSnapshots) this.markers.push(write);
          else this.sent.push(write);
          this.log.debug(
            {
              branch: write.branchKey,
              write: write.id,
              author: write.author.name,
              applier: write.applierAuthored?.manager,
            },
            "watched write handed to the branch worker",
          );
          return;
        }
        await new Promise((r2) => setTimeout(r2, r.retryAfterSeconds * 1000).unref?.());
      } catch (err) {
        this.error(st, `handing a write to ${write.branchKey}: ${(err as Error).message}`);
        await new Promise((r2) => setTimeout(r2, 1000).unref?.());
      }
    }
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

  private statusOf(st: RuleState): WatchRuleStatus {
    const at = new Date(this.now()).toISOString();
    const cond = (type: string, ok: boolean, reason: string, message: string): Condition => {
      const old = st.rule.status?.conditions?.find((c) => c.type === type);
      const status = ok ? "True" : "False";
      return {
        type,
        status,
        reason,
        message,
        lastTransitionTime: old && old.status === status ? old.lastTransitionTime : at,
        ...(st.rule.metadata.generation !== undefined
          ? { observedGeneration: st.rule.metadata.generation }
          : {}),
      };
    };
    const forbidden = st.forbidden.length > 0;
    const kindsOk = st.unresolved.length === 0 && !forbidden;
    const ready = kindsOk && st.target !== undefined && st.rule.spec.suspend !== true;
    const notWatched = forbidden
      ? `the mirror may not watch: ${st.forbidden.join("; ")}`
      : `not served or not listed yet (retried): ${st.unresolved.join(", ")}`;
    const readyReason =
      st.targetProblem?.reason ??
      (st.rule.spec.suspend
        ? StatusReason.Suspended
        : forbidden
          ? StatusReason.KindForbidden
          : kindsOk
            ? StatusReason.Watching
            : StatusReason.KindsNotResolved);
    const readyMessage =
      st.targetProblem?.message ?? (kindsOk ? `watching ${st.kinds.size} kind(s)` : notWatched);
    const beyond = st.target ? outOfScope(st.rule, st.target.scope, [...st.kinds.values()]) : [];
    return {
      conditions: [
        cond("Ready", ready, readyReason, readyMessage),
        cond(
          "KindsResolved",
          kindsOk,
          kindsOk
            ? StatusReason.Resolved
            : forbidden
              ? StatusReason.KindForbidden
              : StatusReason.KindNotServed,
          kindsOk ? "" : notWatched,
        ),
      ],
      ...(st.rule.metadata.generation !== undefined
        ? { observedGeneration: st.rule.metadata.generation }
        : {}),
      resolvedKinds: [...st.kinds.values()],
      unresolvedKinds: st.unresolved,
      forbiddenKinds: st.forbidden,
      outOfScope: beyond,
      mirrored: st.mirrored,
      refused: st.refused,
      excluded: st.excluded,
      ...(st.lastError
        ? { lastError: st.lastError.message.slice(0, 4000), lastErrorAt: st.lastError.at }
        : {}),
    };
  }

  private async writeStatus(): Promise<void> {
    for (const st of this.rules.values()) {
      if (!st.statusDirty) continue;
      const status = this.statusOf(st);
      const text = stable({
        ...status,
        conditions: status.conditions?.map(({ lastTransitionTime: _, ...c }) => c),
      });
      st.statusDirty = false;
      if (text === st.lastStatus) continue;
      const ns = st.rule.metadata.namespace ?? "";
      try {
        await this.statusWriter.patch(RESOURCES.watchRule, ns, st.rule.metadata.name, status, undefined);
        st.lastStatus = text;
      } catch (err) {
        st.statusDirty = true;
        this.log.warn(
          { rule: st.key, err: (err as Error).message },
          "could not write the WatchRule's status",
        );
      }
    }
  }
}
