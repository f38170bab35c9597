/**
 * The world every sidecar test runs in, whatever the applier kind: the simulated API server over
 * HTTP with our CRDs (and the kind's), a real Git server, Redis under a key prefix of its own, one
 * clock, one patience for every wait, the sidecar as deployed (startSidecar) fed through the
 * queues a branch worker uses, and the objects every claim stands on (a GitProvider, a GitTarget
 * naming the claim). The per-kind harnesses (test/sidecar-flux, test/sidecar-argocd,
 * test/sidecar-webhook) add only what differs: their simulator, their appliers and claims.
 */
import { randomBytes, randomUUID } from "node:crypto";
import { type KubeConfig, PatchStrategy, setHeaderOptions } from "@kubernetes/client-node";
import { Queue } from "bullmq";
import { queueSender } from "../../queue/apply/index.js";
import {
  type AcceptedWrite,
  type ApplierWriteReport,
  type Attempt,
  type PhaseReport,
  QUEUES,
  type Report,
  type ReportPhase,
} from "../../queue/contract.js";
import { crdFiles } from "../../queue/crds/files.js";
import { API_VERSION } from "../../queue/crds/index.js";
import { acceptWrite } from "../../queue/intake.js";
import { type ClaimType, claimStatusOf, type KObject, Kube, RESOURCES } from "../../queue/kube/index.js";
import { type Logger, silentLogger } from "../../queue/log.js";
import { bullConnection } from "../../queue/redis.js";
import { BranchLease } from "../../queue/worker/lease.js";
import { recordTip } from "../../queue/worker/tip-record.js";
import type { ReportExtra, ReportFn, WindowOpening } from "../../sidecar/applier-kind.js";
import { findCondition } from "../../sidecar/claims/conditions.js";
import { memoryEvents } from "../../sidecar/events.js";
import type { SidecarApplier } from "../../sidecar/kinds.js";
import { type Sidecar, type SidecarOptions, startSidecar } from "../../sidecar/main.js";
import type { Reporter } from "../../sidecar/reporter.js";
import type { WatchedKindsDeps, WatchedKindsObserver } from "../../sidecar/window-observer.js";
import { type ApiServer, startApiServer } from "../cluster/apiserver/index.js";
import { type GitServer, startGitServer } from "../git/server.js";
import { type IsolatedRedis, isolatedRedis } from "../redis/isolated.js";
import { makeAttempt } from "./attempts.js";
import { untilWith } from "./wait.js";

/** The patience of every wait in the sidecar tests. */
export const until = untilWith({ timeoutMs: 30_000, everyMs: 20, retryErrors: true });

/** A ConfigMap's YAML with one data key. */
export const configMapYaml = (name: string, key: string, value: string) =>
  `apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ${name}\ndata:\n  ${key}: "${value}"\n`;

export interface Reported {
  phase: ReportPhase;
  extra: ReportExtra;
}

/** An executor's report function that keeps what it is told, in order. */
export function recorder(): { report: ReportFn; reports: Reported[]; phases: () => ReportPhase[] } {
  const reports: Reported[] = [];
  return {
    reports,
    report: async (phase, extra = {}) => {
      reports.push({ phase, extra });
    },
    phases: () => reports.map((r) => r.phase),
  };
}

type Ref = { namespace: string; name: string };

/** An attempt as a branch worker sends it: a fresh token, branch main, sent now. */
export function attemptFor(o: {
  claim: Attempt["claim"];
  applier: Attempt["applier"];
  repository: string;
  branchKey: string;
  commit: string;
  targets: Attempt["targets"];
  token?: string;
}): Attempt {
  return makeAttempt({
    token: o.token ?? `op-${randomBytes(4).toString("hex")}`,
    claim: o.claim,
    applier: o.applier,
    branchKey: o.branchKey,
    repository: o.repository,
    branch: "main",
    commit: o.commit,
    targets: o.targets,
    sentAt: new Date().toISOString(),
  });
}

/** The GitProvider `repo` of `url` in `namespace`, which GitTargets there name. */
export async function createProvider(
  kube: Kube,
  namespace: string,
  url: string,
  type: "gitea" | "github" = "gitea",
): Promise<void> {
  await kube.apply(RESOURCES.gitProvider, {
    apiVersion: API_VERSION,
    kind: "GitProvider",
    metadata: { name: "repo", namespace },
    spec: { url, type, webhookSecretRef: { name: "hook" } },
  });
}

/**
 * A GitTarget `name` in `namespace` (folder `path` of provider `repo`, branch main) naming the
 * claim: what an attempt's target is. Returns its uid.
 */
export async function createTarget(
  kube: Kube,
  o: { namespace: string; name: string; path: string; claim: { kind: string; name: string } },
): Promise<string> {
  const t = await kube.apply<KObject>(RESOURCES.gitTarget, {
    apiVersion: API_VERSION,
    kind: "GitTarget",
    metadata: { name: o.name, namespace: o.namespace },
    spec: { providerRef: { name: "repo" }, branch: "main", path: o.path, claimRef: o.claim },
  });
  return t.metadata.uid ?? "";
}

/** A claim's condition of `type`, as its status says now. */
export async function claimCondition(kube: Kube, t: ClaimType, ref: Ref, type: string) {
  const claim = await kube.get<KObject>(t, ref.namespace, ref.name);
  return findCondition(claimStatusOf(claim)?.conditions, type);
}

/** Waits until the claim's condition of `type` satisfies `ok`; answers it. */
export function claimConditionReaches(
  kube: Kube,
  t: ClaimType,
  ref: Ref,
  type: string,
  ok: (c: NonNullable<Awaited<ReturnType<typeof claimCondition>>>) => boolean,
) {
  return until(async () => {
    const c = await claimCondition(kube, t, ref, type);
    return c !== undefined && ok(c) && c;
  }, `${type} of ${t.kind} ${ref.namespace}/${ref.name}`);
}

/** Waits until the claim is in control of its applier (InControl=True), as its reconciler makes it. */
export const inControl = (kube: Kube, t: ClaimType, ref: Ref) =>
  claimConditionReaches(kube, t, ref, "InControl", (c) => c.status === "True");

/** The branch worker's side of the queues: it sends attempts and reads the phase reports. */
export interface WorkerQueues {
  /** Queues the attempt on its kind's queue as the branch worker does (job id = token, one try). */
  send(attempt: Attempt): Promise<Attempt>;
  /** The phase reports of `token`, in the order they were queued. */
  reports(token: string): Promise<PhaseReport[]>;
  phases(token: string): Promise<ReportPhase[]>;
  /** Waits until `token` is reported `phase`; answers its phases so far. */
  reported(token: string, phase: ReportPhase): Promise<ReportPhase[]>;
  /** The applier's own writes reported in the apply window of `token`. */
  applierWrites(token: string): Promise<ApplierWriteReport[]>;
}

/** What the branch worker owning a branch leaves in Redis for the sidecar's last checks. */
export interface BranchOwner {
  /** Records `tip` as the branch's tip, under the owner's lease (fenced), as a flush does. */
  record(tip: string): Promise<void>;
  /**
   * An API edit's write to the GitTarget `target` (folder `path`), upserting the ConfigMap
   * `configMap`, accepted into the branch's inbox as the gateway accepts it: answers its entry id.
   */
  acceptEdit(o: { target: Ref; path: string; configMap: string }): Promise<string>;
}

export interface WorldOptions {
  /** CRD files beyond ours: the applier's own. */
  crds?: string[];
  /** Namespaces made at the start. */
  namespaces?: string[];
  /** Redis keys are prefixed with `test-<label>-…`. */
  label?: string;
}

export interface SidecarWorld {
  api: ApiServer;
  /** The admin's kubeconfig, and a client with it. */
  kc: KubeConfig;
  kube: Kube;
  git: GitServer;
  redis: IsolatedRedis;
  log: Logger;
  /** Events a kind built in the test records (a started sidecar records them on the API server). */
  events: ReturnType<typeof memoryEvents>;
  /** The clock the world's sidecar parts read. */
  now: () => Date;
  queues: WorkerQueues;
  /**
   * A window observer (`Observer`: the Argo CD or the webhook one) of ConfigMaps on the world's
   * client, log and clock, reporting to `reporter`: started; the caller stops it.
   */
  startObserver<O extends WatchedKindsObserver<WindowOpening>>(
    Observer: new (d: WatchedKindsDeps) => O,
    reporter: Reporter,
  ): Promise<O>;
  /** Somebody's edit of a ConfigMap's data through the API, as `kubectl edit` makes it (manager kubectl-edit). */
  editConfigMap(namespace: string, name: string, data: Record<string, string>): Promise<void>;
  /** Takes the branch's lease, as the replica owning it does. */
  branchOwner(branchKey: string): Promise<BranchOwner>;
  /**
   * startSidecar against this world's API server (as the admin unless `kubeConfig` says who) and
   * Redis, with the world's log and clock; stopped with the world.
   */
  startSidecar<K extends SidecarApplier>(
    o: Omit<SidecarOptions<K>, "kubeConfig" | "redisUrl" | "redisPrefix"> & { kubeConfig?: KubeConfig },
  ): Promise<Sidecar>;
  /** Runs `close` when the world stops, before what the world itself started (last added, first run). */
  onStop(close: () => Promise<unknown> | unknown): void;
  stop(): Promise<void>;
}

export async function startSidecarWorld(o: WorldOptions = {}): Promise<SidecarWorld> {
  const api = await startApiServer({ bookmarkIntervalMs: 50 });
  for (const f of [...crdFiles(), ...(o.crds ?? [])]) await api.installCrdFile(f);
  const kc = api.kubeConfig();
  const kube = new Kube(kc);
  for (const name of o.namespaces ?? []) await kube.core.createNamespace({ body: { metadata: { name } } });
  const git = await startGitServer();
  const redis = await isolatedRedis(o.label ?? "sidecar");
  const closers: (() => Promise<unknown> | unknown)[] = [];
  const sender = queueSender(redis.url, redis.prefix);
  const reportsQueue = new Queue(QUEUES.reports, {
    connection: bullConnection(redis.url),
    prefix: redis.prefix,
  });
  const queued = async (token: string) =>
    (await reportsQueue.getJobs(["waiting", "active", "completed", "delayed"]))
      .sort((a, b) => Number(a.id) - Number(b.id))
      .map((j) => j.data as Report)
      .filter((r) => r.token === token);
  const reports = async (token: string) =>
    (await queued(token)).filter((r): r is PhaseReport => r.type === "phase");
  const phases = async (token: string) => (await reports(token)).map((r) => r.phase);
  let branches: Queue | undefined;
  const world: SidecarWorld = {
    api,
    kc,
    kube,
    git,
    redis,
    log: silentLogger(),
    events: memoryEvents(),
    now: () => new Date(),
    queues: {
      async send(attempt) {
        await sender.send(attempt);
        return attempt;
      },
      reports,
      phases,
      applierWrites: async (token) =>
        (await queued(token)).filter((r): r is ApplierWriteReport => r.type === "applierWrite"),
      reported: (token, phase) =>
        until(async () => {
          const seen = await phases(token);
          return seen.includes(phase) && seen;
        }, `${token} reported ${phase}`),
    },
    async startObserver(Observer, reporter) {
      const observer = new Observer({
        kube,
        reporter,
        log: world.log,
        now: world.now,
        kinds: [{ apiVersion: "v1", kind: "ConfigMap" }],
      });
      await observer.start();
      return observer;
    },
    async editConfigMap(namespace, name, data) {
      await kube.core.patchNamespacedConfigMap(
        { namespace, name, body: { data }, fieldManager: "kubectl-edit" },
        setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
      );
    },
    async branchOwner(branchKey) {
      const lease = new BranchLease(redis.client, redis.prefix, branchKey, "worker", 30_000);
      if (!(await lease.acquire())) throw new Error(`the lease of ${branchKey} is held`);
      return {
        record: (tip) => recordTip(redis.client, redis.prefix, branchKey, lease.token as string, tip),
        async acceptEdit({ target, path, configMap }) {
          branches ??= new Queue(QUEUES.branches, {
            connection: bullConnection(redis.url),
            prefix: redis.prefix,
          });
          const write: AcceptedWrite = {
            id: `w-${randomUUID()}`,
            target,
            branchKey,
            path,
            acceptedAt: new Date().toISOString(),
            author: { name: "Ada", email: "ada@example.com" },
            changes: [
              {
                op: "upsert",
                object: { apiVersion: "v1", kind: "ConfigMap", metadata: { name: configMap } },
              },
            ],
          };
          const r = await acceptWrite(redis.client, redis.prefix, write, branches);
          if (!r.accepted) throw new Error(`the edit of ${configMap} was not accepted`);
          return r.entryId;
        },
      };
    },
    async startSidecar(s) {
      const sidecar = await startSidecar({
        log: world.log,
        now: world.now,
        ...s,
        kubeConfig: s.kubeConfig ?? kc,
        redisUrl: redis.url,
        redisPrefix: redis.prefix,
      });
      world.onStop(() => sidecar.stop());
      return sidecar;
    },
    onStop(close) {
      closers.push(close);
    },
    async stop() {
      for (const close of closers.reverse()) await close();
      await sender.close();
      await reportsQueue.close();
      await branches?.close();
      await kube.close();
      await git.close();
      await api.close();
      await redis.cleanup();
    },
  };
  return world;
}

/**
 * Waits until a started sidecar's claim watch holds the newest version of the claim it read or
 * wrote (`Kube.isCurrent`): from then on a pass decides on the cached claim without a read.
 */
export async function claimWatchCaughtUp(kube: Kube, type: ClaimType, ref: Ref): Promise<void> {
  const h = kube.informer<KObject>(type, {});
  try {
    await until(
      async () => kube.isCurrent(type, h.informer.get(ref.name, ref.namespace)),
      `the sidecar's watch of ${type.kind} ${ref.namespace}/${ref.name} to hold its newest version`,
    );
  } finally {
    await h.release();
  }
}
