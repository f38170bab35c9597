/**
 * The decisions shell end to end: a worker replica with decisions on, real Redis (BullMQ), the real
 * Git server, the simulated API server holding the GitTarget, FluxClaim and Kustomization, and a
 * scripted executor on `attempts-flux` standing in for the sidecar: it records the operation on
 * the claim's status and reports each phase on `reports`, as the sidecar does.
 */
import { randomUUID } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import * as k8s from "@kubernetes/client-node";
import { type Job, Queue, Worker } from "bullmq";
import { afterAll, afterEach, describe, expect, it } from "vitest";
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
import { Kube, RESOURCES } from "../../queue/kube/index.js";
import { createLogger, silentLogger } from "../../queue/log.js";
import type { BranchWorker } from "../../queue/worker/branch-worker.js";
import { type Clock, ManualClock } from "../../queue/worker/clock.js";
import { ClusterCache } from "../../queue/worker/cluster-cache.js";
import { KubeDirectory, KubeStatusSink } from "../../queue/worker/kube.js";
import { Replica } from "../../queue/worker/replica.js";
import {
  completeOperation,
  RecordRefused,
  recordOperation,
  updateOperation,
} from "../../sidecar/operation-record.js";
import { redisFreshnessCheck, staleBecause } from "../../sidecar/tip-check.js";
import { type ApiServer, readAuditLog, startApiServer } from "../cluster/apiserver/index.js";
import { gitOk } from "../git/cli.js";
import { type GitServer, startGitServer } from "../git/server.js";
import { startStatusHost } from "../git/status-host.js";
import { type IsolatedRedis, isolatedRedis } from "../redis/isolated.js";
import { reportPhase } from "../support/attempts.js";
import { gpgKey, hasGpg, type SshSigner, sshKey, stopGpgAgents } from "../support/signing.js";
import { foreignCommit } from "./foreign.js";
import { waitFor } from "./harness.js";

const NS = "team";
const FOLDER = "clusters/dev";
const CLAIM_KEY = `FluxClaim/${NS}/claim`;
const GROUP = { group: "applygate.dev", version: "v1alpha1" };
const log = () =>
  process.env.APPLYGATE_TEST_LOG
    ? createLogger({ level: process.env.APPLYGATE_TEST_LOG, pretty: false })
    : silentLogger();

type Script = (attempt: Attempt, ex: Executor) => Promise<void>;

interface Executor {
  /** Records the phase on the claim's status (as the sidecar does first), then reports it. */
  report(attempt: Attempt, phase: ReportPhase, reason?: string): Promise<number>;
  send(report: Report): Promise<void>;
}

interface World {
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

const succeed: Script = async (a, ex) => {
  for (const p of ["Requested", "Running", "Settling", "Succeeded"] as const) await ex.report(a, p);
};

/** Waits until the worker's cache holds the claim with the annotation (its listing reads from there). */
async function annotated(w: World, annotation: string): Promise<void> {
  await waitFor("the annotated claim in the worker's cache", async () => {
    const c = await w.objects.get("FluxClaim", NS, "claim");
    return (
      (c?.metadata as { annotations?: Record<string, string> } | undefined)?.annotations?.[annotation] !==
      undefined
    );
  });
}

/** An Approval of the world's claim, given by ada (the API server would admit it only from her). */
async function approve(w: World, name: string, spec: Record<string, unknown>): Promise<void> {
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

async function world(o: {
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
  const merge = k8s.setHeaderOptions("Content-Type", k8s.PatchStrategy.MergePatch);
  await kc.makeApiClient(k8s.CoreV1Api).createNamespace({ body: { metadata: { name: NS } } });
  if (o.providerToken)
    await kc.makeApiClient(k8s.CoreV1Api).createNamespacedSecret({
      namespace: NS,
      body: { metadata: { name: "creds" }, stringData: { token: o.providerToken } },
    });

  await custom.createNamespacedCustomObject({
    group: "kustomize.toolkit.fluxcd.io",
    version: "v1",
    plural: "kustomizations",
    namespace: NS,
    body: {
      apiVersion: "kustomize.toolkit.fluxcd.io/v1",
      kind: "Kustomization",
      metadata: { name: "apps", namespace: NS },
      spec: {
        interval: "100h",
        prune: true,
        path: `./${FOLDER}`,
        sourceRef: { kind: "GitRepository", name: "repo" },
      },
    },
  });
  await custom.createNamespacedCustomObject({
    ...GROUP,
    plural: "fluxclaims",
    namespace: NS,
    body: {
      apiVersion: "applygate.dev/v1alpha1",
      kind: "FluxClaim",
      metadata: { name: "claim", namespace: NS },
      spec: { kustomizationRef: { name: "apps", namespace: NS }, ...o.claimSpec },
    },
  });
  if (o.appliedInitial)
    await custom.patchNamespacedCustomObjectStatus(
      {
        ...GROUP,
        plural: "fluxclaims",
        namespace: NS,
        name: "claim",
        body: { status: { lastAppliedCommit: initial } },
      },
      merge,
    );
  await custom.createNamespacedCustomObject({
    ...GROUP,
    plural: "gitproviders",
    namespace: NS,
    body: {
      apiVersion: "applygate.dev/v1alpha1",
      kind: "GitProvider",
      metadata: { name: "gp", namespace: NS },
      spec: {
        url,
        type: "gitea",
        webhookSecretRef: { name: "hook" },
        ...(o.providerToken ? { credentialsSecretRef: { name: "creds" } } : {}),
        ...o.providerSpec,
      },
    },
  });
  const target = (await custom.createNamespacedCustomObject({
    ...GROUP,
    plural: "gittargets",
    namespace: NS,
    body: {
      apiVersion: "applygate.dev/v1alpha1",
      kind: "GitTarget",
      metadata: { name: "site", namespace: NS },
      spec: {
        providerRef: { name: "gp" },
        branch: "main",
        path: FOLDER,
        claimRef: { kind: "FluxClaim", name: "claim" },
        commitWindow: { idleSeconds: o.windowSeconds ?? 1, maxSeconds: 30 },
      },
    },
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
  const status = new KubeStatusSink(kc, log(), Date.now, 8, cache);
  // The test's Git server and status hosts speak plain http: the operator's flag lets the token go.
  const directory = new KubeDirectory(cache, { log: log(), status }, { allowHttpCredentials: true });
  const objects = new KubeObjects(kc, log(), {}, cache);
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
        },
      });
      const replica = new Replica({
        redisUrl: redis.url,
        prefix: redis.prefix,
        directory,
        cacheDir,
        log: log(),
        status,
        leaseMs: 3000,
        attach: decisions.attach,
        branch: { fetchIntervalMs: 3_600_000, pollMs: 50 },
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
      const write: AcceptedWrite = {
        id: randomUUID(),
        target: { namespace: NS, name: "site" },
        branchKey: key,
        path: FOLDER,
        acceptedAt: new Date().toISOString(),
        author: { name: "Ada", email: "ada@example.com" },
        changes: [
          {
            op: "upsert",
            object: {
              apiVersion: "v1",
              kind: "ConfigMap",
              metadata: { name, namespace: "web" },
              data: { value },
            },
          },
        ],
        ...extra,
      };
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
async function secondTarget(
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
    body: {
      apiVersion: "kustomize.toolkit.fluxcd.io/v1",
      kind: "Kustomization",
      metadata: { name: "extra", namespace: ns },
      spec: {
        interval: "100h",
        prune: true,
        path: `./${path}`,
        sourceRef: { kind: "GitRepository", name: "repo2" },
      },
    },
  });
  await w.custom.createNamespacedCustomObject({
    ...GROUP,
    plural: "fluxclaims",
    namespace: ns,
    body: {
      apiVersion: "applygate.dev/v1alpha1",
      kind: "FluxClaim",
      metadata: { name: "claim2", namespace: ns },
      spec: { kustomizationRef: { name: "extra", namespace: ns }, ...o.claimSpec },
    },
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

const show = (w: World, rev: string, path: string) =>
  gitOk(["show", `${rev}:${path}`], { cwd: w.bare }).catch(() => undefined);
const isAncestor = (w: World, a: string, b: string) =>
  gitOk(["merge-base", "--is-ancestor", a, b], { cwd: w.bare }).then(
    () => true,
    () => false,
  );
const cm = (name: string) => `${FOLDER}/core/configmap/web/${name}.yaml`;
/** The applier has nothing pending and nothing out: no further attempt can come without news. */
const settled = (w: World) => {
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
async function appliedAndEnded(w: World) {
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
async function settledAsEcho(w: World, echo: { id: string }, tip: string | undefined) {
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

const phaseReport = (
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

function gate() {
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
async function takeoverBeforeRecord(w: World, o: { reportEnd: boolean }) {
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
        const op = (await get(kind, namespace, name))?.status?.operation as
          | { token?: string; phase?: string }
          | undefined;
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

describe("decisions shell: the branch worker decides and sends applies", () => {
  let w: World;
  afterEach(async () => {
    await w.close();
  });
  afterAll(stopGpgAgents);

  it("two edits a few seconds apart with a foreign push between them: one apply, of a tip holding both sides", {
    timeout: 60_000,
  }, async () => {
    // The window closes only on the second edit's save (its idle time is longer than the test),
    // so how long the foreign push takes on a loaded machine cannot split the two edits.
    w = await world({ appliedInitial: true, windowSeconds: 30 });
    await w.startReplica();
    await waitFor("baseline", () => w.driver().state.observed);
    const first = await w.accept("a", "1");
    // The gaps are the case itself: edits seconds apart, the foreign push between them.
    await new Promise((r) => setTimeout(r, 1000));
    // Somebody pushes straight to the repository: no notice reaches the worker.
    const foreign = await foreignCommit(w.bare, `${FOLDER}/from-git.txt`, "git side\n");
    await new Promise((r) => setTimeout(r, 1000));
    const second = await w.accept("a", "2", { save: true });
    const tip = await waitFor("both edits published", () => w.published(second.id));
    expect(await w.published(first.id)).toBe(tip);
    await waitFor("the apply succeeded", async () => (await w.claim()).status?.lastAppliedCommit === tip);
    await waitFor("nothing left to decide", () => settled(w));

    expect(w.attempts).toHaveLength(1);
    const [attempt] = w.attempts as [Attempt];
    expect(attempt.commit).toBe(tip);
    expect(attempt.targets).toEqual([
      { uid: w.targetUid, namespace: NS, name: "site", reason: "ForeignCommit" },
    ]);
    // The applied commit holds both sides: the foreign commit and the later API edit.
    expect(await isAncestor(w, foreign, tip)).toBe(true);
    expect(await show(w, tip, `${FOLDER}/from-git.txt`)).toBe("git side\n");
    expect(await show(w, tip, cm("a"))).toContain('value: "2"');
    expect(await w.git.tip("site")).toBe(tip);
  });

  it("asks nothing before the first observation; the baseline converges once; a converge of the last applied commit asks nothing", {
    timeout: 60_000,
  }, async () => {
    w = await world({ appliedInitial: false });
    w.git.faults.setDown(true);
    await w.startReplica();
    // The GitTarget names the claim (a converge is pending), but the remote cannot be read yet.
    await waitFor("targets listed", () => w.driver().state.targets[w.targetUid]?.claim === CLAIM_KEY);
    // The worker tried to read the remote and was answered 503: still nothing observed, nothing asked.
    await waitFor("a read of the remote, refused", () => w.git.counts().advertisement > 0);
    expect(w.driver().state.observed).toBe(false);
    expect(w.driver().state.appliers[CLAIM_KEY]?.pending.byTarget[w.targetUid]).toContain("Converge");
    expect(w.attempts).toHaveLength(0);

    w.git.faults.setDown(false);
    await waitFor(
      "the converge applied",
      async () => (await w.claim()).status?.lastAppliedCommit === w.initial,
    );
    await waitFor("nothing left to decide", () => settled(w));
    expect(w.attempts.map((a) => [a.commit, a.targets.map((t) => t.reason)])).toEqual([
      [w.initial, ["CatchUp"]],
    ]);

    // A new start converges again, but the applier already applied the tip: nothing is asked.
    await w.stopReplica();
    await w.startReplica();
    await waitFor("baseline after the restart", () => w.driver().state.observed);
    await w.driver().idle();
    expect(settled(w)).toBe(true);
    expect(w.attempts).toHaveLength(1);
  });

  it("a Failed operation gives its reasons back and is retried after the backoff", {
    timeout: 60_000,
  }, async () => {
    w = await world({ appliedInitial: true });
    await w.startReplica();
    await waitFor("baseline", () => w.driver().state.observed);
    let failedAt = 0;
    w.scripts.push(async (a, ex) => {
      await ex.report(a, "Requested");
      failedAt = await ex.report(a, "Failed");
    });
    const foreign = await foreignCommit(w.bare, `${FOLDER}/f.txt`, "1\n");
    // What a push notice does: it is only a hint to look at the remote.
    w.worker().observeSoon();
    await waitFor("the retry applied", async () => (await w.claim()).status?.lastAppliedCommit === foreign);
    expect(w.attempts).toHaveLength(2);
    const [first, retry] = w.attempts as [Attempt, Attempt];
    expect(first.targets.map((t) => t.reason)).toEqual(["ForeignCommit"]);
    expect(retry.targets.map((t) => t.reason)).toEqual(["ForeignCommit"]);
    expect(retry.commit).toBe(foreign);
    expect(retry.token).not.toBe(first.token);
    // Backoff after a first failure is 2 s.
    expect(Date.parse(retry.sentAt) - failedAt).toBeGreaterThanOrEqual(1900);
  });

  it("a Stale attempt is decided again at once, at the tip as it is then", { timeout: 60_000 }, async () => {
    w = await world({ appliedInitial: true });
    await w.startReplica();
    await waitFor("baseline", () => w.driver().state.observed);
    let later = "";
    w.scripts.push(async (a, ex) => {
      // The executor's recheck finds the branch moved on: the attempt is stale.
      later = await foreignCommit(w.bare, `${FOLDER}/g.txt`, "2\n");
      await ex.report(a, "Stale");
    });
    const foreign = await foreignCommit(w.bare, `${FOLDER}/f.txt`, "1\n");
    w.worker().observeSoon();
    await waitFor("the retry applied", async () => (await w.claim()).status?.lastAppliedCommit === later);
    await waitFor("nothing left to decide", () => settled(w));
    expect(w.attempts.map((a) => a.commit)).toEqual([foreign, later]);
    expect(w.attempts[1]?.targets.map((t) => t.reason)).toEqual(["ForeignCommit"]);
    // No backoff was started by the stale attempt.
    expect(w.driver().state.appliers[CLAIM_KEY]?.failures).toBe(0);
  });

  it("an edit accepted after the flush mark, before the executor's write: the attempt ends Stale and the next, sent at once, carries the edit", {
    timeout: 60_000,
  }, async () => {
    // Windows close only on a flush: the worker publishes the edit for the restale's flush alone.
    w = await world({ appliedInitial: true, windowSeconds: 30 });
    await w.startReplica();
    await waitFor("baseline", () => w.driver().state.observed);
    const freshness = redisFreshnessCheck(w.redis.client, w.redis.prefix);
    let edit: AcceptedWrite | undefined;
    /** What the sidecar does just before its write: Stale when not fresh, else it applies. */
    const asSidecar: Script = async (a, ex) => {
      await ex.report(a, "Requested");
      const stale = staleBecause(await freshness(a), a);
      if (stale) {
        await ex.report(a, "Stale", stale.reason);
        return;
      }
      for (const p of ["Running", "Settling", "Succeeded"] as const) await ex.report(a, p);
    };
    w.scripts.push(async (a, ex) => {
      // The user edits after the flush took its mark, before the applier started.
      edit = await w.accept("a", "mine");
      await asSidecar(a, ex);
    }, asSidecar);
    const foreign = await foreignCommit(w.bare, `${FOLDER}/f.txt`, "1\n");
    w.worker().observeSoon();
    const tip = await waitFor("the edit published", () => (edit ? w.published(edit.id) : null));
    await waitFor("the apply succeeded", async () => (await w.claim()).status?.lastAppliedCommit === tip);
    await waitFor("nothing left to decide", () => settled(w));

    expect(w.attempts.map((a) => a.commit)).toEqual([foreign, tip]);
    const [first, second] = w.attempts as [Attempt, Attempt];
    expect(first.editsAfter?.folders).toEqual([FOLDER]);
    // The applied commit holds the edit: the older one never ran over it.
    expect(await isAncestor(w, foreign, tip)).toBe(true);
    expect(await show(w, tip, cm("a"))).toContain("mine");
    expect(second.targets.map((t) => t.reason)).toEqual(["ForeignCommit"]);
    // It rechecked too (within the budget) and found nothing new; no backoff was started.
    expect(second.editsAfter?.folders).toEqual([FOLDER]);
    expect(w.driver().state.appliers[CLAIM_KEY]?.failures).toBe(0);
    expect(w.driver().state.appliers[CLAIM_KEY]?.restaleSince).toBeNull();
  });

  it("continuous editing never starves an apply: 5 s after the chain's first restale the attempts go without the recheck", {
    timeout: 60_000,
  }, async () => {
    w = await world({ appliedInitial: true, windowSeconds: 30 });
    await w.startReplica();
    await waitFor("baseline", () => w.driver().state.observed);
    const freshness = redisFreshnessCheck(w.redis.client, w.redis.prefix);
    const seen: string[] = [];
    // An edit lands before every attempt's write.
    const editing: Script = async (a, ex) => {
      await w.accept("a", `edit-${w.attempts.length}`);
      await ex.report(a, "Requested");
      const f = await freshness(a);
      seen.push(f);
      const stale = staleBecause(f, a);
      if (stale) return void (await ex.report(a, "Stale", stale.reason));
      for (const p of ["Running", "Settling", "Succeeded"] as const) await ex.report(a, p);
    };
    for (let i = 0; i < 200; i++) w.scripts.push(editing);
    await foreignCommit(w.bare, `${FOLDER}/f.txt`, "1\n");
    w.worker().observeSoon();
    await waitFor("an apply succeeded", async () => {
      const applied = (await w.claim()).status?.lastAppliedCommit;
      return applied !== undefined && applied !== w.initial;
    });
    // Every attempt with the recheck found the edit made before it; the one that applied had none.
    const last = w.attempts.at(-1) as Attempt;
    expect(seen.at(-1)).toBe("current");
    expect(seen.slice(0, -1).every((f) => f === "edited")).toBe(true);
    expect(w.attempts.slice(0, -1).every((a) => a.editsAfter !== undefined)).toBe(true);
    expect(last.editsAfter).toBeUndefined();
    expect((await w.claim()).status?.lastAppliedCommit).toBe(last.commit);
    // It went no sooner than the budget after the first restale (which came after the first send).
    const first = Date.parse((w.attempts[0] as Attempt).sentAt);
    expect(Date.parse(last.sentAt) - first).toBeGreaterThanOrEqual(5_000);
  });

  it("a restart restores the operation out from the claim and reasons from Redis; the baseline is a converge, never a ForeignCommit", {
    timeout: 60_000,
  }, async () => {
    w = await world({ appliedInitial: true });
    await w.startReplica();
    await waitFor("baseline", () => w.driver().state.observed);
    let release!: () => void;
    const gate = new Promise<void>((r) => {
      release = r;
    });
    w.scripts.push(async (a, ex) => {
      await ex.report(a, "Requested");
      await ex.report(a, "Running");
      await gate;
      await ex.report(a, "Settling");
      await ex.report(a, "Succeeded");
    });
    const f1 = await foreignCommit(w.bare, `${FOLDER}/f.txt`, "1\n");
    w.worker().observeSoon();
    await waitFor("the operation running", async () => {
      const op = (await w.claim()).status?.operation as { phase?: string } | undefined;
      return op?.phase === "Running";
    });
    await w.stopReplica();
    const saved = await w.redis.client.get(branchKeys(w.redis.prefix, w.key).decisions);
    expect(JSON.parse(saved as string).appliers[CLAIM_KEY].operation.token).toBe(w.attempts[0]?.token);

    // While no worker runs, somebody pushes: the next start must not answer it with a ForeignCommit.
    const f2 = await foreignCommit(w.bare, `${FOLDER}/g.txt`, "2\n");
    await w.startReplica();
    await waitFor("baseline after the restart", () => w.driver().state.observed);
    await w.driver().idle();
    const a = w.driver().state.appliers[CLAIM_KEY];
    expect(a?.operation?.token).toBe(w.attempts[0]?.token);
    expect(a?.pending.all).toEqual(["Converge"]);
    expect(Object.values(a?.pending.byTarget ?? {}).flat()).not.toContain("ForeignCommit");
    expect(w.attempts).toHaveLength(1);

    release();
    await waitFor("the converge applied", async () => (await w.claim()).status?.lastAppliedCommit === f2);
    await waitFor("nothing left to decide", () => settled(w));
    expect(w.attempts.map((x) => [x.commit, x.targets.map((t) => t.reason)])).toEqual([
      [f1, ["ForeignCommit"]],
      [f2, ["CatchUp"]],
    ]);
  });

  it("a takeover follows the attempt the last owner sent, recorded on the claim just after the new owner read it: no second attempt for its commit, its end report taken, one operation in the claim's history", {
    timeout: 60_000,
  }, async () => {
    w = await world({ appliedInitial: true });
    const race = await takeoverBeforeRecord(w, { reportEnd: true });
    race.end();
    await waitFor("the apply succeeded", async () => (await w.claim()).status?.lastAppliedCommit === race.f1);
    await waitFor("nothing left to decide", () => settled(w));
    await w.driver().idle();
    // Its end report was taken as the attempt for f1: nothing else was sent or refused.
    expect(w.driver().state.appliers[CLAIM_KEY]?.lastAppliedCommit).toBe(race.f1);
    expect(w.attempts.map((x) => x.token)).toEqual([race.first.token]);
    expect(race.ends).toEqual([`${race.first.token} Succeeded`]);
    const history = (await w.claim()).status?.history as Array<{ token: string; commit: string }>;
    expect(history.map((h) => [h.token, h.commit])).toEqual([[race.first.token, race.f1]]);
  });

  it("an end report of the last owner's attempt that never comes: the claim's record, still showing the end at the next listing, ends it", {
    timeout: 60_000,
  }, async () => {
    // Listings every 200 ms: the record's end is seen twice without waiting for a change.
    w = await world({ appliedInitial: true, listIntervalMs: 200 });
    const race = await takeoverBeforeRecord(w, { reportEnd: false });
    race.end();
    await waitFor("the operation ended from its record", () => settled(w));
    expect(w.driver().state.appliers[CLAIM_KEY]?.lastAppliedCommit).toBe(race.f1);
    expect(w.attempts.map((x) => x.token)).toEqual([race.first.token]);
    expect(race.ends).toEqual([`${race.first.token} Succeeded`]);
  });

  it("an applier write newer than an edit in the apply window makes a Repair due", {
    timeout: 60_000,
  }, async () => {
    w = await world({ appliedInitial: true });
    await w.startReplica();
    await waitFor("baseline", () => w.driver().state.observed);
    let release!: () => void;
    const gate = new Promise<void>((r) => {
      release = r;
    });
    // Set once the attempt is out: the edit happens inside the window the send opened, however
    // long the flush before it took on a loaded machine.
    let editedAt = new Date(0);
    // The operation ends only once the claim shows repairPending (it is written in the background).
    let end!: () => void;
    const ended = new Promise<void>((r) => {
      end = r;
    });
    w.scripts.push(async (a, ex) => {
      await ex.report(a, "Requested");
      await ex.report(a, "Running");
      await gate;
      // The window observer saw kustomize-controller write the edited object after the edit.
      await ex.send({
        type: "applierWrite",
        token: a.token,
        claim: a.claim,
        branchKey: a.branchKey,
        object: { apiVersion: "v1", kind: "ConfigMap", namespace: "web", name: "a" },
        manager: "kustomize-controller",
        writtenAt: new Date(editedAt.getTime() + 2000).toISOString(),
        resourceVersion: "42",
        observedAt: new Date().toISOString(),
      });
      await ended;
      await ex.report(a, "Settling");
      await ex.report(a, "Succeeded");
    });
    w.scripts.push(succeed);
    await foreignCommit(w.bare, `${FOLDER}/f.txt`, "1\n");
    w.worker().observeSoon();
    await waitFor("the operation out", () => w.attempts.length === 1);
    editedAt = new Date(Math.ceil(Date.now() / 1000) * 1000);
    // An API edit while the apply runs: decided into the window the attempt opened.
    const edit = await w.accept("a", "mine", { save: true, editedAt: editedAt.toISOString() });
    const tip = await waitFor("the edit published", () => w.published(edit.id));
    release();
    await waitFor("repairPending shown", async () => (await w.claim()).status?.repairPending === true);
    end();
    await waitFor("the repair applied", async () => (await w.claim()).status?.lastAppliedCommit === tip);
    await waitFor("nothing left to decide", () => settled(w));
    expect(w.attempts).toHaveLength(2);
    expect(w.attempts[1]?.targets.map((t) => t.reason)).toEqual(["Repair"]);
    expect(w.attempts[1]?.commit).toBe(tip);
    expect(w.collisions).toEqual([{ kind: "flux" }]);
    await waitFor("repairPending cleared", async () => (await w.claim()).status?.repairPending === false);
  });
  it("an apply's own write that reached the inbox within the grace after its operation ended, read by the next owner after a handover past the grace, is the applier's echo: settled without a commit", {
    timeout: 60_000,
  }, async () => {
    const clock = new ManualClock(Date.parse("2026-12-01T13:00:00Z"));
    w = await world({ appliedInitial: true, clock });
    const window = await appliedAndEnded(w);
    expect(window?.token).toBe(w.attempts[0]?.token);
    await w.stopReplica();

    // The apply's own write, made in the second the operation ended, reaches the inbox 4 s after
    // the end, inside the 10 s grace, while no owner runs; the next owner takes the branch 12 s
    // after the end (a killed owner's lease ran out first) and reads it then.
    const end = window?.completedAt as number;
    const writtenAt = new Date(Math.floor(end / 1000) * 1000).toISOString();
    clock.advance(12_000);
    const echo = await w.accept("a", "applied", {
      acceptedAt: new Date(end + 4_000).toISOString(),
      // As the watch plane hands it: the GitTarget's uid, the applier's manager and its time.
      target: { namespace: NS, name: "site", uid: w.targetUid },
      applierAuthored: { manager: "kustomize-controller", writtenAt, resourceVersion: "42" },
    });
    const tip = await w.git.tip("site");
    await w.startReplica();
    await settledAsEcho(w, echo, tip);
  });

  it("an apply's own write with no GitTarget uid, read by a new owner before its first listing of the GitTargets landed, is judged against the GitTarget: the applier's echo, settled without a commit", {
    timeout: 60_000,
  }, async () => {
    const clock = new ManualClock(Date.parse("2026-12-01T13:00:00Z"));
    w = await world({ appliedInitial: true, clock });
    const end = (await appliedAndEnded(w))?.completedAt as number;
    await w.stopReplica();

    // The apply's own write reaches the inbox 2 s after its operation ended, naming its GitTarget
    // by namespace and name only (no uid), while no owner runs.
    const writtenAt = new Date(Math.floor(end / 1000) * 1000).toISOString();
    clock.advance(2_000);
    const echo = await w.accept("a", "applied", {
      acceptedAt: new Date(end + 2_000).toISOString(),
      target: { namespace: NS, name: "site" },
      applierAuthored: { manager: "kustomize-controller", writtenAt, resourceVersion: "42" },
    });
    const tip = await w.git.tip("site");
    // The next owner's first listing of the GitTargets waits until its branch worker has read the
    // write from the inbox and handed it to the judge.
    let release = () => {};
    const listed = new Promise<void>((r) => {
      release = r;
    });
    const get = w.objects.get.bind(w.objects);
    w.objects.get = async (kind, namespace, name) => {
      if (kind === "GitTarget") await listed;
      return get(kind, namespace, name);
    };
    const started = w.startReplica();
    await waitFor("the write handed to the judge", () => (w.worker()?.judgingCount ?? 0) > 0);
    release();
    await started;
    await settledAsEcho(w, echo, tip);
  });

  it("the folder barrier: a branch whose tip lacks the GitTarget's folder sends its applier nothing, for any reason, until a published write creates the folder", {
    timeout: 60_000,
  }, async () => {
    w = await world({ appliedInitial: false, folderInGit: false });
    await w.startReplica();
    await waitFor("baseline", () => w.driver().state.observed);
    // Somebody pushes elsewhere on the branch: a ForeignCommit joins the baseline converge.
    const foreign = await foreignCommit(w.bare, "clusters/other/more.txt", "more\n");
    w.worker().observeSoon();
    await waitFor("the foreign commit observed", () => w.driver().state.tip === foreign);
    await w.driver().idle();
    expect(w.driver().state.appliers[CLAIM_KEY]?.pending.all).toEqual(
      expect.arrayContaining(["Converge", "ForeignCommit"]),
    );
    expect(w.driver().state.nextFlushId, "no flush was asked for").toBe(0);
    expect(w.attempts).toHaveLength(0);

    // The first write creates the folder: once it is published, one attempt for the tip holding it.
    const edit = await w.accept("a", "1", { save: true });
    const tip = await waitFor("the write published", () => w.published(edit.id));
    await waitFor("the apply succeeded", async () => (await w.claim()).status?.lastAppliedCommit === tip);
    await waitFor("nothing left to decide", () => settled(w));
    expect(w.attempts.map((a) => [a.commit, a.targets.map((t) => t.reason)])).toEqual([
      [tip, ["ForeignCommit"]],
    ]);
    expect(await show(w, tip, cm("a"))).toContain('value: "1"');
  });

  it("a GitTarget created after the worker took the branch gets its status and its converge at once, without a restart", {
    timeout: 60_000,
  }, async () => {
    w = await world({ appliedInitial: true });
    await w.startReplica();
    await waitFor("baseline", () => w.driver().state.observed);
    await waitFor("nothing left to decide", () => settled(w));
    const extra = await secondTarget(w, "clusters/extra");
    const read = async () =>
      (await w.custom.getNamespacedCustomObject({
        ...GROUP,
        plural: "gittargets",
        namespace: NS,
        name: "extra",
      })) as GitTarget;
    await waitFor("its status written", async () => (await read()).status?.publication?.commit === w.initial);
    const attempt = await waitFor("its converge sent", () =>
      w.attempts.find((a) => a.claim.name === "claim2"),
    );
    expect(attempt.commit).toBe(w.initial);
    expect(attempt.targets).toEqual([
      { uid: extra.metadata.uid, namespace: NS, name: "extra", reason: "CatchUp" },
    ]);
    await waitFor("its converge applied", () => {
      const a = w.driver().state.appliers[`FluxClaim/${NS}/claim2`];
      return a?.lastAppliedCommit === w.initial && a.operation === null;
    });
    // The first GitTarget's applier, already at the tip, was asked nothing.
    expect(w.attempts).toHaveLength(1);
  });

  it("an idle branch reads the cluster from the caches: after the start, no list or get of GitProviders, GitTargets, ScopeGrants, claims, ApplierGrants or Secrets, only watches", {
    timeout: 60_000,
  }, async () => {
    // A short safety-net period: many listings of the branch in the idle time below.
    w = await world({ appliedInitial: true, listIntervalMs: 100 });
    await w.startReplica();
    await waitFor("baseline", () => w.driver().state.observed);
    await waitFor("nothing left to decide", () => settled(w));
    const cached = [
      "gitproviders",
      "gittargets",
      "scopegrants",
      "fluxclaims",
      "argocdclaims",
      "appliergrants",
      "secrets",
    ];
    const reads = () =>
      readAuditLog(w.auditLog).filter(
        (e) => (e.verb === "list" || e.verb === "get") && cached.includes(e.objectRef?.resource ?? ""),
      );
    const before = reads().length;
    let listings = 0;
    const listed = (w.driver() as unknown as { o: { list: () => Promise<unknown> } }).o;
    const list = listed.list;
    listed.list = () => {
      listings++;
      return list();
    };
    await waitFor("ten listings of the idle branch", () => listings >= 10);
    expect(reads().slice(before)).toEqual([]);
    const watches = readAuditLog(w.auditLog).filter((e) => e.verb === "watch");
    expect(watches.length).toBeGreaterThan(0);
  });

  it("a GitTarget naming a GitProvider in another namespace that does not admit it is refused: no writes, no applier, Accepted=False; admitted, it is taken at once", {
    timeout: 60_000,
  }, async () => {
    w = await world({ appliedInitial: true });
    const TEAM = "team-b";
    await w.api
      .kubeConfig()
      .makeApiClient(k8s.CoreV1Api)
      .createNamespace({ body: { metadata: { name: TEAM } } });
    await w.startReplica();
    await waitFor("baseline", () => w.driver().state.observed);
    await waitFor("nothing left to decide", () => settled(w));
    const foreign = await secondTarget(w, "clusters/extra", { namespace: TEAM, providerNamespace: NS });
    const uid = foreign.metadata.uid as string;
    const read = async () =>
      (await w.custom.getNamespacedCustomObject({
        ...GROUP,
        plural: "gittargets",
        namespace: TEAM,
        name: "extra",
      })) as GitTarget;
    const condition = async (type: string) => (await read()).status?.conditions?.find((c) => c.type === type);
    await waitFor("Accepted=False", async () => (await condition("Accepted"))?.status === "False");
    for (const type of ["Accepted", "Ready"])
      expect(await condition(type)).toMatchObject({
        status: "False",
        reason: "ProviderNamespaceNotAllowed",
        message: `GitProvider ${NS}/gp does not admit namespace ${TEAM} (spec.accessFrom.namespaces)`,
      });
    expect((await read()).status?.publication).toBeUndefined();

    // A write that got past the door anyway is settled as refused, never published.
    const write: AcceptedWrite = {
      id: randomUUID(),
      target: { namespace: TEAM, name: "extra" },
      branchKey: w.key,
      path: "clusters/extra",
      acceptedAt: new Date().toISOString(),
      author: { name: "Eve", email: "eve@example.com" },
      changes: [
        {
          op: "upsert",
          object: { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "x", namespace: TEAM }, data: {} },
        },
      ],
      save: true,
    };
    const branches = new Queue(QUEUES.branches, {
      connection: { url: w.redis.url, maxRetriesPerRequest: null },
      prefix: w.redis.prefix,
    });
    expect((await acceptWrite(w.redis.client, w.redis.prefix, write, branches)).accepted).toBe(true);
    await branches.close();
    const settledAs = await waitFor("the write settled", () => w.published(write.id));
    expect(settledAs).toMatch(/^refused: ProviderNamespaceNotAllowed/);
    expect(
      await show(w, (await w.git.tip("site")) as string, "clusters/extra/core/configmap/team-b/x.yaml"),
    ).toBe(undefined);
    // No applier attached: the decisions never list it, and its claim is sent nothing.
    await w.driver().idle();
    expect(w.driver().state.targets[uid]).toBeUndefined();
    expect(w.attempts).toHaveLength(0);

    // The provider admits the namespace: the worker takes the GitTarget at its next listing.
    await w.custom.patchNamespacedCustomObject(
      {
        ...GROUP,
        plural: "gitproviders",
        namespace: NS,
        name: "gp",
        body: { spec: { accessFrom: { namespaces: [TEAM] } } },
      },
      k8s.setHeaderOptions("Content-Type", k8s.PatchStrategy.MergePatch),
    );
    await waitFor("Accepted=True", async () => (await condition("Accepted"))?.status === "True");
    const attempt = await waitFor("its converge sent", () =>
      w.attempts.find((a) => a.claim.name === "claim2"),
    );
    expect(attempt.targets).toEqual([{ uid, namespace: TEAM, name: "extra", reason: "CatchUp" }]);
    await waitFor(
      "its publication status written",
      async () => (await read()).status?.publication?.commit !== undefined,
    );
    expect(await condition("Ready")).toMatchObject({ status: "True", reason: "Published" });
  });

  it("change windows: a foreign push outside the claim's window waits with OutsideChangeWindow and the next opening; at the opening the worker wakes and applies once; an override lets one apply through", {
    timeout: 60_000,
  }, async () => {
    const clock = new ManualClock(Date.parse("2026-12-01T13:00:00Z"));
    w = await world({
      appliedInitial: true,
      clock,
      claimSpec: { changeWindows: [{ kind: "allow", schedule: "0 10 * * *", duration: "2h" }] },
    });
    await w.startReplica();
    await waitFor("baseline", () => w.driver().state.observed);
    const gate = async () =>
      (
        (await w.claim()).status?.conditions as
          | { type: string; reason: string; message: string }[]
          | undefined
      )?.find((c) => c.type === "ApplyAllowed");
    await waitFor(
      "the claim shows the window closed",
      async () => (await gate())?.reason === "OutsideChangeWindow",
    );
    expect((await w.claim()).status?.governance).toEqual({
      changeWindow: { open: false, nextOpening: "2026-12-02T10:00:00.000Z" },
    });

    await foreignCommit(w.bare, `${FOLDER}/from-git.txt`, "git side\n");
    w.worker().observeSoon();
    await waitFor("the ForeignCommit pending", () =>
      w.driver().state.appliers[CLAIM_KEY]?.pending.all.includes("ForeignCommit"),
    );
    await w.driver().idle();
    expect(w.attempts).toHaveLength(0);

    // A second before the opening, still nothing; at the opening, the wake sends one apply.
    clock.advance(Date.parse("2026-12-02T09:59:59Z") - clock.now());
    await w.driver().idle();
    expect(w.attempts).toHaveLength(0);
    clock.advance(1000);
    await waitFor("the apply at the opening", () => w.attempts.length === 1);
    expect(w.attempts[0]?.targets.map((t) => t.reason)).toEqual(["ForeignCommit"]);
    expect(w.attempts[0]?.override).toBeUndefined();
    await waitFor(
      "the claim shows the window open",
      async () => (await gate())?.reason === "InsideChangeWindow",
    );
    await waitFor("nothing left to decide", () => settled(w));

    // Past the window, a person overrides it for one apply.
    clock.advance(3 * 3_600_000);
    await waitFor("closed again", async () => (await gate())?.reason === "OutsideChangeWindow");
    await foreignCommit(w.bare, `${FOLDER}/from-git-2.txt`, "git side 2\n");
    w.worker().observeSoon();
    await waitFor("the second ForeignCommit pending", () =>
      w.driver().state.appliers[CLAIM_KEY]?.pending.all.includes("ForeignCommit"),
    );
    // An annotation, which whoever may edit the claim can set, overrides nothing.
    await w.custom.patchNamespacedCustomObject(
      {
        ...GROUP,
        plural: "fluxclaims",
        namespace: NS,
        name: "claim",
        body: { metadata: { annotations: { "applygate.dev/change-window-override": "INC-7 hotfix" } } },
      },
      k8s.setHeaderOptions("Content-Type", k8s.PatchStrategy.MergePatch),
    );
    await annotated(w, "applygate.dev/change-window-override");
    await w.driver().idle();
    expect(w.attempts).toHaveLength(1);
    await approve(w, "inc-7", { changeWindowOverride: "INC-7 hotfix" });
    await waitFor("the overridden apply", () => w.attempts.length === 2);
    expect(w.attempts[1]?.override).toEqual({ changeWindow: "INC-7 hotfix", by: "ada" });
    await waitFor("nothing left to decide", () => settled(w));
    await waitFor("the override recorded as used", async () => {
      const used = (
        (await w.claim()).status?.governance as { overrideUsed?: { value: string; token: string } }
      )?.overrideUsed;
      return used?.value === "INC-7 hotfix" && used.token === w.attempts[1]?.token;
    });
    // Used once: a third push waits for the next opening.
    await foreignCommit(w.bare, `${FOLDER}/from-git-3.txt`, "git side 3\n");
    w.worker().observeSoon();
    await waitFor("the third ForeignCommit pending", () =>
      w.driver().state.appliers[CLAIM_KEY]?.pending.all.includes("ForeignCommit"),
    );
    await w.driver().idle();
    expect(w.attempts).toHaveLength(2);
  });

  it("manual approval: a foreign push waits with AwaitingApproval while API edits still reach Git; once a person approves its SHA, one apply runs, of the tip holding both", {
    timeout: 60_000,
  }, async () => {
    w = await world({ appliedInitial: true, claimSpec: { approval: { manual: true } } });
    await w.startReplica();
    await waitFor("baseline", () => w.driver().state.observed);
    const governance = async () =>
      (await w.claim()).status?.governance as
        | { awaitingApproval?: { commit: string; missing: string[] }[] }
        | undefined;
    const reason = async () =>
      ((await w.claim()).status?.conditions as { type: string; reason: string }[] | undefined)?.find(
        (c) => c.type === "ApplyAllowed",
      )?.reason;
    await waitFor("nothing to approve at the start", async () => (await reason()) === "Approved");

    const foreign = await foreignCommit(w.bare, `${FOLDER}/from-git.txt`, "git side\n");
    w.worker().observeSoon();
    await waitFor("the claim waits for approval of the foreign commit", async () =>
      (await governance())?.awaitingApproval?.some(
        (a) => a.commit === foreign && a.missing.includes("Manual"),
      ),
    );
    expect(await reason()).toBe("AwaitingApproval");

    // API edits keep reaching Git meanwhile, and still no apply.
    const edit = await w.accept("a", "1", { save: true });
    const tip = await waitFor("the edit published", () => w.published(edit.id));
    expect(await isAncestor(w, foreign, tip)).toBe(true);
    await waitFor(
      "the read of the new tip",
      () => w.driver().state.appliers[CLAIM_KEY]?.foreignRead?.tip === tip,
    );
    await w.driver().idle();
    expect(w.attempts).toHaveLength(0);
    expect((await governance())?.awaitingApproval?.map((a) => a.commit)).toEqual([foreign]);

    // An annotation on the claim, which whoever may edit it can set, approves nothing.
    await w.custom.patchNamespacedCustomObject(
      {
        ...GROUP,
        plural: "fluxclaims",
        namespace: NS,
        name: "claim",
        body: { metadata: { annotations: { [`approve.applygate.dev/${foreign}`]: "eve: self-approved" } } },
      },
      k8s.setHeaderOptions("Content-Type", k8s.PatchStrategy.MergePatch),
    );
    await annotated(w, `approve.applygate.dev/${foreign}`);
    await w.driver().idle();
    expect(w.attempts).toHaveLength(0);
    expect(await reason()).toBe("AwaitingApproval");

    await approve(w, "cab-12", { commit: foreign, note: "CAB-12" });
    await waitFor("the approved apply", () => w.attempts.length === 1);
    expect(w.attempts[0]?.commit).toBe(tip);
    expect(w.attempts[0]?.approvals).toEqual([{ commit: foreign, sources: ["Manual"], by: ["ada"] }]);
    await waitFor("the apply succeeded", async () => (await w.claim()).status?.lastAppliedCommit === tip);
    await waitFor("nothing left to decide", () => settled(w));
    await waitFor("approved", async () => (await reason()) === "Approved");
    expect(w.attempts).toHaveLength(1);
  });

  it("one claim's approval setting the worker cannot use (a commit status with no repository, the URL naming none) holds that claim alone, with ApprovalUnreadable; another claim's approvals on the branch still flow", {
    timeout: 60_000,
  }, async () => {
    w = await world({
      appliedInitial: true,
      commitStatusPollMs: 200,
      claimSpec: { approval: { manual: true } },
    });
    await w.startReplica();
    await waitFor("baseline", () => w.driver().state.observed);
    await secondTarget(w, "clusters/extra", {
      claimSpec: { approval: { commitStatus: { context: "ci/approved", api: "gitea" } } },
    });
    const CLAIM2 = `FluxClaim/${NS}/claim2`;
    await waitFor("the second claim listed", () => w.driver().state.appliers[CLAIM2] !== undefined);
    const allowed = async (name: string) =>
      (
        (
          (await w.custom.getNamespacedCustomObject({
            ...GROUP,
            plural: "fluxclaims",
            namespace: NS,
            name,
          })) as {
            status?: { conditions?: { type: string; reason: string; message: string }[] };
          }
        ).status?.conditions ?? []
      ).find((c) => c.type === "ApplyAllowed");
    const awaiting = async () =>
      ((await w.claim()).status?.governance as { awaitingApproval?: { commit: string }[] } | undefined)
        ?.awaitingApproval;

    const foreign = await foreignCommit(w.bare, `${FOLDER}/from-git.txt`, "git side\n");
    w.worker().observeSoon();
    // The first claim's approval is read although the second's cannot be.
    await waitFor("the first claim waits for approval of the foreign commit", async () =>
      (await awaiting())?.some((a) => a.commit === foreign),
    );
    expect((await allowed("claim"))?.reason).toBe("AwaitingApproval");
    // The second claim says why it is held, and only it.
    await waitFor(
      "the second claim shows ApprovalUnreadable",
      async () => (await allowed("claim2"))?.reason === "ApprovalUnreadable",
    );
    expect((await allowed("claim2"))?.message).toContain("cannot tell owner and repository");

    await approve(w, "first", { commit: foreign });
    await waitFor("the approved apply of the first claim", () =>
      w.attempts.some((a) => a.claim.name === "claim"),
    );
    await waitFor("it succeeded", async () => (await w.claim()).status?.lastAppliedCommit === foreign);
    // Read again at the polls, still unreadable: the second claim never got an attempt.
    await waitFor("read again", () => {
      const r = w.driver().state.appliers[CLAIM2]?.foreignRead;
      return r?.unreadable !== undefined && r.tip === foreign;
    });
    expect(w.attempts.filter((a) => a.claim.name === "claim2")).toEqual([]);
    expect((await allowed("claim2"))?.reason).toBe("ApprovalUnreadable");
  });

  it("commit-status approval: a foreign push waits with AwaitingApproval (CommitStatus) while API edits reach Git; the context turns success on the host and one apply runs", {
    timeout: 60_000,
  }, async () => {
    const host = await startStatusHost({ api: "gitea", owner: "git", repo: "site", token: "s3cret" });
    try {
      w = await world({
        appliedInitial: true,
        providerToken: "s3cret",
        commitStatusPollMs: 100,
        providerSpec: { commitStatus: { apiURL: host.root, repository: "git/site" } },
        claimSpec: { approval: { commitStatus: { context: "ci/approved", api: "gitea" } } },
      });
      await w.startReplica();
      await waitFor("baseline", () => w.driver().state.observed);
      const awaiting = async () =>
        (
          (await w.claim()).status?.governance as {
            awaitingApproval?: { commit: string; missing: string[] }[];
          }
        )?.awaitingApproval;
      const foreign = await foreignCommit(w.bare, `${FOLDER}/from-git.txt`, "git side\n");
      w.worker().observeSoon();
      await waitFor("the claim waits for the commit status", async () =>
        (await awaiting())?.some((a) => a.commit === foreign && a.missing.includes("CommitStatus")),
      );
      host.setStatus(foreign, "ci/approved", "pending");
      const edit = await w.accept("a", "1", { save: true });
      const tip = await waitFor("the edit published", () => w.published(edit.id));
      await waitFor("read again while pending", () => host.requests.length >= 3);
      expect(w.attempts).toHaveLength(0);

      host.setStatus(foreign, "ci/approved", "success");
      await waitFor("the approved apply", () => w.attempts.length === 1);
      expect(w.attempts[0]?.commit).toBe(tip);
      expect(w.attempts[0]?.approvals).toEqual([{ commit: foreign, sources: ["CommitStatus"] }]);
      await waitFor("nothing left to decide", () => settled(w));
      expect(w.attempts).toHaveLength(1);
      expect(host.badRequests).toEqual([]);
    } finally {
      await host.close();
    }
  });

  it("commit-status reads use the GitProvider's current credentials: added to the running provider they are sent at the next read, removed they are not", {
    timeout: 60_000,
  }, async () => {
    const host = await startStatusHost({ api: "gitea", owner: "git", repo: "site", token: "s3cret" });
    try {
      w = await world({
        appliedInitial: true,
        commitStatusPollMs: 100,
        providerSpec: { commitStatus: { apiURL: host.root, repository: "git/site" } },
        claimSpec: { approval: { commitStatus: { context: "ci/approved", api: "gitea" } } },
      });
      await w.startReplica();
      await waitFor("baseline", () => w.driver().state.observed);
      const foreign = await foreignCommit(w.bare, `${FOLDER}/from-git.txt`, "git side\n");
      host.setStatus(foreign, "ci/approved", "success");
      w.worker().observeSoon();
      // No credentials yet: the host refuses the reads, and nothing is applied.
      await waitFor("reads refused without credentials", () =>
        host.badRequests.some((b) => b === "authorization undefined"),
      );
      expect(w.attempts).toHaveLength(0);

      // Credentials added to the running GitProvider: the next read carries them.
      const core = w.api.kubeConfig().makeApiClient(k8s.CoreV1Api);
      await core.createNamespacedSecret({
        namespace: NS,
        body: { metadata: { name: "creds" }, stringData: { token: "s3cret" } },
      });
      await w.custom.patchNamespacedCustomObject(
        {
          ...GROUP,
          plural: "gitproviders",
          namespace: NS,
          name: "gp",
          body: { spec: { credentialsSecretRef: { name: "creds" } } },
        },
        k8s.setHeaderOptions("Content-Type", k8s.PatchStrategy.MergePatch),
      );
      await waitFor("the approved apply", () => w.attempts.length === 1);
      expect(w.attempts[0]?.approvals).toEqual([{ commit: foreign, sources: ["CommitStatus"] }]);

      // Removed: later reads go out without them (and are refused).
      await core.deleteNamespacedSecret({ namespace: NS, name: "creds" });
      await waitFor("the worker sees them gone", async () => {
        const t = (await w.custom.getNamespacedCustomObject({
          ...GROUP,
          plural: "gittargets",
          namespace: NS,
          name: "site",
        })) as { status?: { conditions?: { type: string; reason: string }[] } };
        return t.status?.conditions?.some(
          (c) => c.type === "CredentialsAvailable" && c.reason === "SecretNotFound",
        );
      });
      const refusedBefore = host.badRequests.length;
      const second = await foreignCommit(w.bare, `${FOLDER}/from-git-2.txt`, "again\n");
      host.setStatus(second, "ci/approved", "success");
      w.worker().observeSoon();
      await waitFor("reads refused again", () =>
        host.badRequests.slice(refusedBefore).some((b) => b === "authorization undefined"),
      );
      expect(w.attempts).toHaveLength(1);
    } finally {
      await host.close();
    }
  });

  it("commit status report: the applied commit gets applygate/<namespace>/<claim> pending while the apply runs, then success", {
    timeout: 60_000,
  }, async () => {
    const host = await startStatusHost({ api: "gitea", owner: "git", repo: "site", token: "s3cret" });
    try {
      w = await world({
        appliedInitial: true,
        providerToken: "s3cret",
        providerSpec: { commitStatus: { apiURL: host.root, repository: "git/site" } },
        claimSpec: { commitStatusReport: { api: "gitea" } },
      });
      await w.startReplica();
      await waitFor("baseline", () => w.driver().state.observed);
      const foreign = await foreignCommit(w.bare, `${FOLDER}/from-git.txt`, "git side\n");
      w.worker().observeSoon();
      await waitFor(
        "the apply succeeded",
        async () => (await w.claim()).status?.lastAppliedCommit === foreign,
      );
      await waitFor("both statuses posted", () => host.posted.length === 2);
      expect(host.posted.map((p) => [p.sha, p.state, p.context])).toEqual([
        [foreign, "pending", `applygate/${NS}/claim`],
        [foreign, "success", `applygate/${NS}/claim`],
      ]);
      expect(host.badRequests).toEqual([]);
    } finally {
      await host.close();
    }
  });
  it("signature approval: a foreign commit signed by an untrusted SSH key waits with AwaitingApproval (SignatureUntrusted) while API edits reach Git; its key added to the Secret, one apply runs; an unsigned one waits (CommitUnsigned)", {
    timeout: 60_000,
  }, async () => {
    const keysDir = await mkdtemp(join(tmpdir(), "applygate-keys-"));
    const ada = sshKey(keysDir, "ed25519", "ada@release");
    const eve = sshKey(keysDir, "ecdsa", "eve@laptop");
    const sshSigning = (k: SshSigner) => ({ config: ["gpg.format=ssh", `user.signingkey=${k.keyPath}`] });
    // An OpenPGP key made by gpg when the machine has it (the pure tests cover both formats).
    const grace = hasGpg ? gpgKey(keysDir, "Grace <grace@example.test>") : undefined;
    w = await world({
      appliedInitial: true,
      claimSpec: { approval: { signature: { secretRef: { name: "release-keys" } } } },
    });
    const core = w.api.kubeConfig().makeApiClient(k8s.CoreV1Api);
    await core.createNamespacedSecret({
      namespace: NS,
      body: { metadata: { name: "release-keys" }, stringData: { authorized_keys: `${ada.publicKey}\n` } },
    });
    await w.startReplica();
    await waitFor("baseline", () => w.driver().state.observed);
    type Awaiting = { commit: string; missing: string[]; signature?: { reason: string; message: string } };
    const awaiting = async () =>
      ((await w.claim()).status?.governance as { awaitingApproval?: Awaiting[] } | undefined)
        ?.awaitingApproval;
    const condition = async () =>
      (
        (await w.claim()).status?.conditions as
          | { type: string; reason: string; message: string }[]
          | undefined
      )?.find((c) => c.type === "ApplyAllowed");

    const foreign = await foreignCommit(
      w.bare,
      `${FOLDER}/from-git.txt`,
      "git side\n",
      "main",
      sshSigning(eve),
    );
    w.worker().observeSoon();
    await waitFor("the claim waits: signed by a key not trusted", async () => {
      return (await awaiting())?.some(
        (a) => a.commit === foreign && a.signature?.reason === "SignatureUntrusted",
      );
    });
    expect((await condition())?.reason).toBe("AwaitingApproval");
    expect((await condition())?.message).toMatch(
      /\(Signature: signed by SSH key SHA256:\S+ \(ecdsa-sha2-nistp256\)/,
    );

    // API edits keep reaching Git meanwhile, and still no apply.
    const edit = await w.accept("a", "1", { save: true });
    const tip = await waitFor("the edit published", () => w.published(edit.id));
    await waitFor(
      "the read of the new tip",
      () => w.driver().state.appliers[CLAIM_KEY]?.foreignRead?.tip === tip,
    );
    await w.driver().idle();
    expect(w.attempts).toHaveLength(0);

    // Eve's key trusted: the Secret's watch tells the branch, the signatures are checked again.
    await core.patchNamespacedSecret(
      {
        namespace: NS,
        name: "release-keys",
        body: {
          stringData: {
            authorized_keys: `${ada.publicKey}\n${eve.publicKey}\n`,
            ...(grace ? { "grace.asc": grace.publicKey } : {}),
          },
        },
      },
      k8s.setHeaderOptions("Content-Type", k8s.PatchStrategy.MergePatch),
    );
    await waitFor("the approved apply", () => w.attempts.length === 1);
    expect(w.attempts[0]?.commit).toBe(tip);
    expect(w.attempts[0]?.approvals).toMatchObject([{ commit: foreign, sources: ["Signature"] }]);
    expect(w.attempts[0]?.approvals?.[0]?.signedBy).toMatch(/^SHA256:/);
    await waitFor("the apply succeeded", async () => (await w.claim()).status?.lastAppliedCommit === tip);
    await waitFor("nothing left to decide", () => settled(w));

    // An unsigned commit under one signed by Ada: every foreign commit must be signed.
    const unsigned = await foreignCommit(w.bare, `${FOLDER}/plain.txt`, "plain\n");
    const signed = await foreignCommit(
      w.bare,
      `${FOLDER}/signed.txt`,
      "signed\n",
      "main",
      grace
        ? {
            config: ["gpg.format=openpgp", `user.signingkey=${grace.fingerprint}`],
            env: { GNUPGHOME: grace.home },
          }
        : sshSigning(ada),
    );
    w.worker().observeSoon();
    await waitFor("the unsigned commit holds the signed tip", async () => {
      const list = await awaiting();
      return (
        list?.length === 1 && list[0]?.commit === unsigned && list[0]?.signature?.reason === "CommitUnsigned"
      );
    });
    expect(w.driver().state.appliers[CLAIM_KEY]?.foreignRead?.signatures?.[signed]).toMatchObject({
      ok: true,
      ...(grace ? { key: grace.fingerprint, signer: "Grace <grace@example.test>" } : {}),
    });
    await w.driver().idle();
    expect(w.attempts).toHaveLength(1);

    // After a restart it still holds: nothing is applied, the claim still names the unsigned commit.
    await w.stopReplica();
    await w.startReplica();
    await waitFor("the read for the tip after the restart", () => {
      const r = w.driver().state.appliers[CLAIM_KEY]?.foreignRead;
      return r?.tip === signed && r.signatures?.[unsigned]?.ok === false;
    });
    await w.driver().idle();
    expect(w.attempts).toHaveLength(1);
    expect((await awaiting())?.map((a) => a.commit)).toEqual([unsigned]);
  });

  it("signature approval by tag (mode Tag, tagPattern v*): an untagged foreign commit waits (CommitNotTagged); a lightweight tag, an untrusted key's tag and a trusted tag off the pattern approve nothing; a trusted signed tag pushed later, with no new commit, lets one apply run that names the tag", {
    timeout: 60_000,
  }, async () => {
    const keysDir = await mkdtemp(join(tmpdir(), "applygate-keys-"));
    const ada = sshKey(keysDir, "ed25519", "ada@release");
    const eve = sshKey(keysDir, "ed25519", "eve@laptop");
    w = await world({
      appliedInitial: true,
      claimSpec: {
        approval: { signature: { secretRef: { name: "release-keys" }, mode: "Tag", tagPattern: "v*" } },
      },
      commitStatusPollMs: 100,
    });
    const core = w.api.kubeConfig().makeApiClient(k8s.CoreV1Api);
    await core.createNamespacedSecret({
      namespace: NS,
      body: { metadata: { name: "release-keys" }, stringData: { authorized_keys: `${ada.publicKey}\n` } },
    });
    await w.startReplica();
    await waitFor("baseline", () => w.driver().state.observed);
    type Awaiting = { commit: string; missing: string[]; signature?: { reason: string; message: string } };
    const awaiting = async () =>
      ((await w.claim()).status?.governance as { awaitingApproval?: Awaiting[] } | undefined)
        ?.awaitingApproval;
    const waitsWith = (commit: string, reason: string, message?: RegExp) =>
      waitFor(`the claim waits: ${reason}`, async () =>
        (await awaiting())?.some(
          (a) =>
            a.commit === commit &&
            a.signature?.reason === reason &&
            (message === undefined || message.test(a.signature.message)),
        ),
      );
    // Tags pushed as another writer would: straight into the served repository.
    const tag = async (args: string[], signer?: SshSigner) =>
      gitOk(
        [
          ...(signer ? ["-c", "gpg.format=ssh", "-c", `user.signingkey=${signer.keyPath}`] : []),
          "tag",
          ...args,
        ],
        { cwd: w.bare },
      );

    const foreign = await foreignCommit(w.bare, `${FOLDER}/release.txt`, "release\n");
    w.worker().observeSoon();
    await waitsWith(foreign, "CommitNotTagged", /no annotated tag matching "v\*"/);

    await tag(["v0", foreign]);
    await waitsWith(foreign, "CommitUnsigned", /tag v0 is a lightweight tag/);
    await tag(["-s", "-m", "release by eve", "v0.9", foreign], eve);
    await waitsWith(foreign, "SignatureUntrusted", /^tag v0\.9: /);
    await tag(["-s", "-m", "nightly", "nightly-1", foreign], ada);
    // Every tag is read again while the commit waits: still nothing approves it.
    const reads = () => w.driver().state.appliers[CLAIM_KEY]?.foreignRead;
    await w.driver().idle();
    expect(reads()?.signatures?.[foreign]).toMatchObject({ ok: false, reason: "SignatureUntrusted" });
    expect(w.attempts).toHaveLength(0);

    // After a restart the tags are still read again while the commit waits.
    await w.stopReplica();
    await w.startReplica();
    await waitFor("the read kept or made again after the restart", () => reads()?.tip === foreign);
    await w.driver().idle();
    expect(w.attempts).toHaveLength(0);

    // The release manager tags the release: no new commit, the next read of the tags approves it.
    await tag(["-s", "-m", "release 1.0.0", "v1.0.0", foreign], ada);
    await waitFor("the approved apply", () => w.attempts.length === 1);
    expect(w.attempts[0]?.commit).toBe(foreign);
    const approvals = w.attempts[0]?.approvals;
    expect(approvals).toMatchObject([{ commit: foreign, sources: ["Signature"], tag: { name: "v1.0.0" } }]);
    expect(approvals?.[0]?.signedBy).toMatch(/^SHA256:/);
    expect(approvals?.[0]?.tag?.signedBy).toBe(approvals?.[0]?.signedBy);
    expect(approvals?.[0]?.by?.[0]).toContain("[tag v1.0.0]");
    await waitFor("the apply succeeded", async () => (await w.claim()).status?.lastAppliedCommit === foreign);
    await waitFor("nothing left to decide", () => settled(w));
    expect(w.attempts).toHaveLength(1);
  });
});
