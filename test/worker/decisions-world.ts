/**
 * The world of the decisions-shell tests: a worker replica with decisions on, real Redis (BullMQ),
 * the real Git server, the simulated API server holding the GitTarget, FluxClaim and
 * Kustomization, and a scripted executor on `attempts-flux` standing in for the sidecar: it
 * records the operation on the claim's status and reports each phase on `reports`, as the sidecar
 * does. The tests are decisions.test.ts (the flow) and decisions-governance.test.ts.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import * as k8s from "@kubernetes/client-node";
import { type Job, Queue, Worker } from "bullmq";
import { expect } from "vitest";
import { createDecisions, type Decisions, KubeObjects } from "../../queue/apply/index.js";
import {
  type AcceptedWrite,
  type Attempt,
  attemptsQueue,
  branchKey,
  QUEUES,
  type Report,
  type ReportPhase,
} from "../../queue/contract.js";
import { crdFiles } from "../../queue/crds/files.js";
import type { GitTarget } from "../../queue/crds/index.js";
import { notDueBecause } from "../../queue/decide/index.js";
import { acceptWrite } from "../../queue/intake.js";
import { branchKeys, knownBranchesKey, writePublishedKey } from "../../queue/keys.js";
import { claimOperationOf, Kube, RESOURCES } from "../../queue/kube/index.js";
import { createLogger, silentLogger } from "../../queue/log.js";
import type { BranchWorker } from "../../queue/worker/branch-worker.js";
import type { Clock } from "../../queue/worker/clock.js";
import { ClusterCache } from "../../queue/worker/cluster-cache.js";
import { KubeDirectory, KubeStatusSink } from "../../queue/worker/kube.js";
import type { Replica } from "../../queue/worker/replica.js";
import {
  completeOperation,
  RecordRefused,
  recordOperation,
  updateOperation,
} from "../../sidecar/operation-record.js";
import { type ApiServer, startApiServer } from "../cluster/apiserver/index.js";
import { gitOk } from "../git/cli.js";
import { type GitServer, startGitServer } from "../git/server.js";
import { type IsolatedRedis, isolatedRedis } from "../redis/isolated.js";
import { reportPhase } from "../support/attempts.js";
import { claimAppliedAt, fluxClaimHolding, fluxSite, kustomization } from "./flux-site.js";
import { foreignCommit } from "./foreign.js";
import { configMapWrite, FOLDER, TARGET, testReplica, waitFor } from "./harness.js";

// The harness's GitTarget namespace and folder: the writes configMapWrite makes are this world's.
export const NS = TARGET.namespace;
export { FOLDER };
export const CLAIM_KEY = `FluxClaim/${NS}/claim`;
export const GROUP = { group: "applygate.dev", version: "v1alpha1" };
export const log = () =>
  process.env.APPLYGATE_TEST_LOG
    ? createLogger({ level: process.env.APPLYGATE_TEST_LOG, pretty: false })
    : silentLogger();

export type Script = (attempt: Attempt, ex: Executor) => Promise<void>;

export interface Executor {
  /** Records the phase on the claim's status (as the sidecar does first), then reports it. */
  report(attempt: Attempt, phase: ReportPhase, reason?: string): Promise<number>;
  send(report: Report): Promise<void>;
}

export interface World {
  api: ApiServer;
  git: GitServer;
  redis: IsolatedRedis;
  url: string;
  key: string;
  bare: string;
  initial: string;
  targetUid: string;
  /** Every request the API server answered, one audit Event per line. */
  auditLog: string;
  custom: k8s.CustomObjectsApi;
  /** Where the decisions read GitTargets, claims and appliers (and write claims' status). */
  objects: KubeObjects;
  attempts: Attempt[];
  /** Late applies withheld, as the collision metric counts them. */
  collisions: { kind: string }[];
  /** Watched applier writes judged, as the echo metric counts them. */
  echoes: { kind: string; outcome: string }[];
  /** The applier kinds of the attempts the decisions ended AttemptLost, in order. */
  lost: string[];
  /** Scripts for the next attempts, in order; the default plays Requested … Succeeded. */
  scripts: Script[];
  startReplica(): Promise<{ replica: Replica; decisions: Decisions }>;
  stopReplica(): Promise<void>;
  decisions(): Decisions;
  worker(): BranchWorker;
  driver(): NonNullable<ReturnType<Decisions["drivers"]["get"]>>;
  accept(name: string, value: string, extra?: Partial<AcceptedWrite>): Promise<AcceptedWrite>;
  published(id: string): Promise<string | null>;
  claim(): Promise<{ status?: Record<string, unknown> }>;
  close(): Promise<void>;
}

export const succeed: Script = async (a, ex) => {
  for (const p of ["Requested", "Running", "Settling", "Succeeded"] as const) await ex.report(a, p);
};

/** Waits until the worker's cache holds the claim with the annotation (its listing reads from there). */
export async function annotated(w: World, annotation: string): Promise<void> {
  await waitFor("the annotated claim in the worker's cache", async () => {
    const c = await w.objects.get("FluxClaim", NS, "claim");
    return (
      (c?.metadata as { annotations?: Record<string, string> } | undefined)?.annotations?.[annotation] !==
      undefined
    );
  });
}

/** An Approval of the world's claim, given by ada (the API server would admit it only from her). */
export async function approve(w: World, name: string, spec: Record<string, unknown>): Promise<void> {
  await w.custom.createNamespacedCustomObject({
    ...GROUP,
    plural: "approvals",
    namespace: NS,
    body: {
      apiVersion: "applygate.dev/v1alpha1",
      kind: "Approval",
      metadata: { name },
      spec: { claimRef: { kind: "FluxClaim", name: "claim" }, approver: "ada", ...spec },
    },
  });
}

export async function world(o: {
  appliedInitial: boolean;
  windowSeconds?: number;
  /** The GitTarget's folder is in the initial commit (default); false: the branch holds others only. */
  folderInGit?: boolean;
  listIntervalMs?: number;
  /** The decisions' clock (the change windows read it); default the system clock. */
  clock?: Clock;
  /** More of the FluxClaim's spec (change windows, approval). */
  claimSpec?: Record<string, unknown>;
  /** The GitProvider's token (a credentials Secret), for the Git host's API. */
  providerToken?: string;
  /** More of the GitProvider's spec (its commit-status API). */
  providerSpec?: Record<string, unknown>;
  commitStatusPollMs?: number;
}): Promise<World> {
  const auditLog = join(await mkdtemp(join(tmpdir(), "applygate-audit-")), "audit.jsonl");
  const api = await startApiServer({ bookmarkIntervalMs: 100, auditLog });
  for (const f of crdFiles()) await api.installCrdFile(f);
  await api.installCrdFile(
    fileURLToPath(new URL("../cluster/crds/flux-kustomization.yaml", import.meta.url)),
  );
  const git = await startGitServer();
  const url = await git.createRepo(
    "site",
    o.folderInGit === false
      ? { "clusters/other/README.md": "other\n" }
      : { [`${FOLDER}/README.md`]: "dev\n", "clusters/extra/README.md": "extra\n" },
  );
  const initial = (await git.tip("site")) as string;
  const redis = await isolatedRedis("decisions");
  const key = branchKey({ namespace: NS, name: "gp" }, url, "main");
  const kc = api.kubeConfig();
  const custom = kc.makeApiClient(k8s.CustomObjectsApi);
  await kc.makeApiClient(k8s.CoreV1Api).createNamespace({ body: { metadata: { name: NS } } });
  if (o.providerToken)
    await kc.makeApiClient(k8s.CoreV1Api).createNamespacedSecret({
      namespace: NS,
      body: { metadata: { name: "creds" }, stringData: { token: o.providerToken } },
    });

  const site = fluxSite(url, {
    claimSpec: o.claimSpec,
    providerSpec: {
      ...(o.providerToken ? { credentialsSecretRef: { name: "creds" } } : {}),
      ...o.providerSpec,
    },
    windowSeconds: o.windowSeconds,
  });
  await custom.createNamespacedCustomObject({
    group: "kustomize.toolkit.fluxcd.io",
    version: "v1",
    plural: "kustomizations",
    namespace: NS,
    body: site.kustomization,
  });
  await custom.createNamespacedCustomObject({
    ...GROUP,
    plural: "fluxclaims",
    namespace: NS,
    body: site.claim,
  });
  if (o.appliedInitial) await claimAppliedAt(custom, initial);
  await custom.createNamespacedCustomObject({
    ...GROUP,
    plural: "gitproviders",
    namespace: NS,
    body: site.provider,
  });
  const target = (await custom.createNamespacedCustomObject({
    ...GROUP,
    plural: "gittargets",
    namespace: NS,
    body: site.target,
  })) as GitTarget;
  // The writes hold ConfigMaps in namespace web: a ScopeGrant gives the target that namespace.
  await custom.createClusterCustomObject({
    ...GROUP,
    plural: "scopegrants",
    body: {
      apiVersion: "applygate.dev/v1alpha1",
      kind: "ScopeGrant",
      metadata: { name: "team-web" },
      spec: { targets: [{ namespace: NS }], namespaces: ["web"] },
    },
  });
  // The worker's caches: a change (a new GitTarget) wakes the branch's listing at once.
  const cache = new ClusterCache(kc, log());
  const status = new KubeStatusSink(cache.kube, log(), Date.now, 8, cache);
  // The test's Git server and status hosts speak plain http: the operator's flag lets the token go.
  const directory = new KubeDirectory(cache, { log: log(), status }, { allowHttpCredentials: true });
  const objects = new KubeObjects(cache.kube, log(), {}, cache);
  const connection = { url: redis.url, maxRetriesPerRequest: null };
  const reports = new Queue(QUEUES.reports, { connection, prefix: redis.prefix });
  const branches = new Queue(QUEUES.branches, { connection, prefix: redis.prefix });
  const attempts: Attempt[] = [];
  const scripts: Script[] = [];
  const executor: Executor = {
    report: (a, phase, reason) => reportPhase(objects, reports, a, phase, reason),
    async send(r) {
      await reports.add(r.type, r);
    },
  };
  const exec = new Worker(
    attemptsQueue("flux"),
    async (job: Job) => {
      const a = job.data as Attempt;
      attempts.push(a);
      await (scripts.shift() ?? succeed)(a, executor);
    },
    { connection, prefix: redis.prefix, concurrency: 4 },
  );
  const cacheDirs: string[] = [];
  let running: { replica: Replica; decisions: Decisions } | undefined;

  const w: World = {
    api,
    git,
    redis,
    url,
    key,
    bare: join(git.root, "site.git"),
    initial,
    targetUid: target.metadata.uid as string,
    auditLog,
    custom,
    objects,
    attempts,
    collisions: [],
    echoes: [],
    lost: [],
    scripts,
    async startReplica() {
      const cacheDir = await mkdtemp(join(tmpdir(), "applygate-decisions-"));
      cacheDirs.push(cacheDir);
      const decisions = createDecisions({
        redisUrl: redis.url,
        prefix: redis.prefix,
        objects,
        directory,
        log: log(),
        changes: cache,
        keys: (namespace, name) => cache.secret(namespace, name),
        ...(o.clock ? { clock: o.clock } : {}),
        ...(o.commitStatusPollMs ? { commitStatusPollMs: o.commitStatusPollMs } : {}),
        // Only a safety net: every change must reach the branch through the watches.
        listIntervalMs: o.listIntervalMs ?? 600_000,
        metrics: {
          collision: (kind) => w.collisions.push({ kind }),
          echo: (kind, outcome) => w.echoes.push({ kind, outcome }),
          staleSnapshot() {},
          attemptLost: (kind) => w.lost.push(kind),
        },
      });
      const replica = testReplica(redis, {
        directory,
        cacheDir,
        log: log(),
        status,
        attach: decisions.attach,
      });
      await redis.client.sadd(knownBranchesKey(redis.prefix), key);
      await replica.start();
      running = { replica, decisions };
      await waitFor("the branch taken with decisions on", () => decisions.drivers.get(key));
      return running;
    },
    async stopReplica() {
      if (!running) return;
      await running.replica.stop();
      await running.decisions.close();
      running = undefined;
    },
    decisions: () => running?.decisions as Decisions,
    worker: () => running?.replica.branch(key) as BranchWorker,
    driver: () => running?.decisions.drivers.get(key) as ReturnType<World["driver"]>,
    async accept(name, value, extra = {}) {
      const write = configMapWrite(key, name, value, extra);
      expect((await acceptWrite(redis.client, redis.prefix, write, branches)).accepted).toBe(true);
      return write;
    },
    published: (id) => redis.client.get(writePublishedKey(redis.prefix, id)),
    async claim() {
      return (await custom.getNamespacedCustomObject({
        ...GROUP,
        plural: "fluxclaims",
        namespace: NS,
        name: "claim",
      })) as {
        status?: Record<string, unknown>;
      };
    },
    async close() {
      await w.stopReplica();
      await cache.close();
      await exec.close(true);
      await reports.close();
      await branches.close();
      await api.close();
      await git.close();
      await redis.cleanup();
      for (const d of cacheDirs) await rm(d, { recursive: true, force: true });
    },
  };
  return w;
}

/** A second Kustomization, FluxClaim and GitTarget writing `path`, made while the worker runs. */
export async function secondTarget(
  w: World,
  path: string,
  o: { namespace?: string; providerNamespace?: string; claimSpec?: Record<string, unknown> } = {},
): Promise<GitTarget> {
  const ns = o.namespace ?? NS;
  await w.custom.createNamespacedCustomObject({
    group: "kustomize.toolkit.fluxcd.io",
    version: "v1",
    plural: "kustomizations",
    namespace: ns,
    body: kustomization(ns, "extra", path, "repo2"),
  });
  await w.custom.createNamespacedCustomObject({
    ...GROUP,
    plural: "fluxclaims",
    namespace: ns,
    body: fluxClaimHolding(ns, "claim2", "extra", o.claimSpec),
  });
  return (await w.custom.createNamespacedCustomObject({
    ...GROUP,
    plural: "gittargets",
    namespace: ns,
    body: {
      apiVersion: "applygate.dev/v1alpha1",
      kind: "GitTarget",
      metadata: { name: "extra", namespace: ns },
      spec: {
        providerRef: { name: "gp", ...(o.providerNamespace ? { namespace: o.providerNamespace } : {}) },
        branch: "main",
        path,
        claimRef: { kind: "FluxClaim", name: "claim2" },
      },
    },
  })) as GitTarget;
}

export const show = (w: World, rev: string, path: string) =>
  gitOk(["show", `${rev}:${path}`], { cwd: w.bare }).catch(() => undefined);
export const isAncestor = (w: World, a: string, b: string) =>
  gitOk(["merge-base", "--is-ancestor", a, b], { cwd: w.bare }).then(
    () => true,
    () => false,
  );
export const cm = (name: string) => `${FOLDER}/core/configmap/web/${name}.yaml`;
/** The applier has nothing pending and nothing out: no further attempt can come without news. */
export const settled = (w: World) => {
  const a = w.driver()?.state.appliers[CLAIM_KEY];
  return (
    a !== undefined &&
    a.operation === null &&
    a.pending.all.length === 0 &&
    Object.values(a.pending.byTarget).every((k) => k.length === 0)
  );
};

/**
 * A foreign push applied through a running replica, its operation ended (its apply window closed,
 * kept): the window, for a test of what the next owner makes of the apply's own writes.
 */
export async function appliedAndEnded(w: World) {
  await w.startReplica();
  await waitFor("baseline", () => w.driver().state.observed);
  const f1 = await foreignCommit(w.bare, `${FOLDER}/f.txt`, "1\n");
  w.worker().observeSoon();
  await waitFor("the foreign push applied", async () => (await w.claim()).status?.lastAppliedCommit === f1);
  await waitFor("its operation ended", () => {
    const a = w.driver().state.appliers[CLAIM_KEY];
    return a?.operation === null && a.windows[0]?.completedAt != null;
  });
  return w.driver().state.appliers[CLAIM_KEY]?.windows[0];
}

/** The write was judged the applier's echo and settled: nothing published, Git as it was, no apply. */
export async function settledAsEcho(w: World, echo: { id: string }, tip: string | undefined) {
  await waitFor("the write judged", () => w.echoes.length > 0);
  expect(w.echoes).toEqual([{ kind: "flux", outcome: "not_mirrored" }]);
  await waitFor("its inbox entry settled", async () => {
    await w.driver().idle();
    return (
      w.worker().judgingCount === 0 &&
      (await w.redis.client.xlen(branchKeys(w.redis.prefix, w.key).inbox)) === 0
    );
  });
  expect(await w.published(echo.id)).toBeNull();
  expect(await w.git.tip("site")).toBe(tip);
  expect(await show(w, "main", cm("a"))).toBeUndefined();
  expect(w.attempts).toHaveLength(1);
}

export const phaseReport = (
  a: Attempt,
  phase: ReportPhase,
  extra: { reason?: string; commit?: string } = {},
): Report => ({
  type: "phase",
  token: a.token,
  claim: a.claim,
  branchKey: a.branchKey,
  phase,
  at: new Date().toISOString(),
  ...extra,
});

export function gate() {
  let open!: () => void;
  const opened = new Promise<void>((r) => {
    open = r;
  });
  return { open, opened };
}

/**
 * A foreign push's attempt taken by an executor that records it on the claim only once the next
 * owner read the claim (a Flux sidecar records it once its source fetched): the owner stops after
 * the send, and the next one reads the claim just before the record lands and decides only after
 * it is Running in the worker's cache (the race the soak found, made certain). The executor does
 * what the sidecar does with the record (sidecar/operation-record.ts): refused while another
 * operation is in flight, Running, then, once `end()` is called, completed with its history
 * entry; each phase reported, the end only with `reportEnd`. Every later attempt gets the same,
 * at once. Resolves once the new owner took its baseline and its decisions are at rest.
 */
export async function takeoverBeforeRecord(w: World, o: { reportEnd: boolean }) {
  await w.startReplica();
  await waitFor("baseline", () => w.driver().state.observed);
  const kube = new Kube(w.api.kubeConfig());
  const claim = { type: RESOURCES.fluxClaim, namespace: NS, name: "claim" };
  const ends: string[] = [];
  const asSidecar =
    (before: Promise<void>, end: Promise<void>): Script =>
    async (a, ex) => {
      await before;
      try {
        await recordOperation(kube, claim, {
          token: a.token,
          commit: a.commit,
          targets: a.targets.map((t) => ({ uid: t.uid, reason: t.reason })),
        });
      } catch (err) {
        if (!(err instanceof RecordRefused)) throw err;
        ends.push(`${a.token} RequestFailed ${err.reason}`);
        return ex.send(phaseReport(a, "RequestFailed", { reason: err.reason }));
      }
      await ex.send(phaseReport(a, "Requested"));
      await updateOperation(kube, claim, a.token, { phase: "Running", startedAt: new Date().toISOString() });
      await ex.send(phaseReport(a, "Running"));
      await end;
      await completeOperation(kube, claim, a.token, { phase: "Succeeded" });
      ends.push(`${a.token} Succeeded`);
      if (o.reportEnd) await ex.send(phaseReport(a, "Succeeded", { commit: a.commit }));
    };
  const recordGate = gate();
  const endGate = gate();
  w.scripts.push(asSidecar(recordGate.opened, endGate.opened));
  for (let i = 0; i < 10; i++) w.scripts.push(asSidecar(Promise.resolve(), Promise.resolve()));

  const f1 = await foreignCommit(w.bare, `${FOLDER}/f.txt`, "1\n");
  w.worker().observeSoon();
  await waitFor("the attempt taken", () => w.attempts.length === 1);
  const first = w.attempts[0] as Attempt;
  await w.stopReplica();

  const get = w.objects.get.bind(w.objects);
  let armed = true;
  w.objects.get = async (kind, namespace, name) => {
    const read = await get(kind, namespace, name);
    if (armed && kind === "FluxClaim") {
      armed = false;
      recordGate.open();
      await waitFor("the operation Running in the worker's cache", async () => {
        const op = claimOperationOf(await get(kind, namespace, name));
        return op?.token === first.token && op.phase === "Running";
      });
    }
    return read;
  };
  await w.startReplica();
  await waitFor("baseline after the takeover", () => w.driver().state.observed);
  await w.driver().idle();
  // The operation the last owner started is the one out; the baseline's converge waits for its end.
  expect(w.driver().state.appliers[CLAIM_KEY]?.operation?.token).toBe(first.token);
  expect(notDueBecause(w.driver().state, CLAIM_KEY, Date.now())).toBe("operation out");
  expect(w.attempts).toHaveLength(1);
  return { f1, first, ends, end: endGate.open };
}
