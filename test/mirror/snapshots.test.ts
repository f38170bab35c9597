/**
 * Snapshots while Git is ahead, and the initial-snapshot barrier, through the real pieces: the
 * mirror under its own ServiceAccount and the RBAC the manifests grant, a worker replica with
 * decisions on, real Redis (BullMQ, the published apply state, the recollection channel), the real
 * Git server, the simulated API server, and a scripted executor standing in for the sidecar that
 * applies a commit's ConfigMap to the cluster when told to.
 *
 * - A GitTarget the mirror covers is asked for nothing before its initial snapshots are published:
 *   a push observed while they are being collected waits, and the apply that follows carries the
 *   edit the snapshot brought.
 * - A snapshot collected while a pushed commit is not applied yet (Git ahead) is discarded instead
 *   of reverting the push; once the apply ends, the mirror collects again and Git keeps the push.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import * as k8s from "@kubernetes/client-node";
import { type Job, Queue, Worker } from "bullmq";
import type { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parse } from "yaml";
import { createDecisions, type Decisions, KubeObjects } from "../../queue/apply/index.js";
import { type AcceptedWrite, type Attempt, attemptsQueue, branchKey, QUEUES } from "../../queue/contract.js";
import { crdFiles } from "../../queue/crds/files.js";
import { notDueBecause } from "../../queue/decide/index.js";
import { RECOLLECT_AGAIN_MS } from "../../queue/decide/snapshots.js";
import { objectYaml } from "../../queue/git/layout.js";
import { acceptWrite } from "../../queue/intake.js";
import { branchKeys, knownBranchesKey, recollectChannel, watchedTargetKey } from "../../queue/keys.js";
import { ClusterCache } from "../../queue/worker/cluster-cache.js";
import { KubeDirectory, KubeStatusSink } from "../../queue/worker/kube.js";
import type { Replica } from "../../queue/worker/replica.js";
import { Mirror } from "../../sidecar/mirror/mirror.js";
import { type ApiServer, startApiServer } from "../cluster/apiserver/index.js";
import { gitOk } from "../git/cli.js";
import { type GitServer, startGitServer } from "../git/server.js";
import { deployedIdentities } from "../playground/identities.js";
import { type IsolatedRedis, isolatedRedis } from "../redis/isolated.js";
import { reportPhase } from "../support/attempts.js";
import { CLAIM_KEY, FOLDER, GROUP, log, NS } from "../worker/decisions-world.js";
import { claimAppliedAt, fluxSite } from "../worker/flux-site.js";
import { foreignCommit } from "../worker/foreign.js";
import { testReplica, waitFor } from "../worker/harness.js";

/** A write of GitTarget `site` on branch `key` as the watch plane hands it, accepted now. */
const mirrorWrite = (key: string, id: string, over: Partial<AcceptedWrite> = {}): AcceptedWrite => ({
  id,
  target: { namespace: NS, name: "site" },
  branchKey: key,
  path: FOLDER,
  acceptedAt: new Date().toISOString(),
  author: { name: "applygate-mirror", email: "applygate-mirror@cluster.local" },
  changes: [],
  ...over,
});
const CM_FILE = `${FOLDER}/core/configmap/${NS}/app.yaml`;
const merge = k8s.setHeaderOptions("Content-Type", k8s.PatchStrategy.MergePatch);
const yaml = (...objs: object[]) => objs.map((o) => JSON.stringify(o)).join("\n---\n");
const cmObject = (value: string) => ({
  apiVersion: "v1",
  kind: "ConfigMap",
  metadata: { name: "app", namespace: NS },
  data: { a: value },
});

let api: ApiServer;
let git: GitServer;
let redis: IsolatedRedis;
let key: string;
let bare: string;
let replica: Replica;
let decisions: Decisions;
let mirror: Mirror | undefined;
let cache: ClusterCache;
let exec: Worker;
let reports: Queue;
let core: k8s.CoreV1Api;
let targetUid: string;
const cacheDirs: string[] = [];
const attempts: Attempt[] = [];
const stale: string[] = [];
/** Attempts the executor holds (the apply runs) until the test lets them end. */
let holdNext = false;
const held: Array<() => Promise<void>> = [];

const valueIn = async (rev: string) => {
  const text = await gitOk(["show", `${rev}:${CM_FILE}`], { cwd: bare }).catch(() => undefined);
  return text ? (parse(text) as { data?: { a?: string } }).data?.a : undefined;
};
const gitValue = async () => valueIn("refs/heads/main");
const liveValue = async () => (await core.readNamespacedConfigMap({ name: "app", namespace: NS })).data?.a;
const setLive = async (value: string, fieldManager = "kubectl-edit") =>
  core.patchNamespacedConfigMap(
    { name: "app", namespace: NS, body: { data: { a: value } }, fieldManager },
    merge,
  );
const driver = () => decisions.drivers.get(key);
/** Once settled, somebody pushes `value`; its apply is held by the executor: Git is ahead. */
const pushHeldApply = async (value: string) => {
  await waitFor("settled", () => settled());
  await waitFor("the inbox empty", inboxEmpty);
  // No apply of an earlier case still held: the one held next is this push's.
  expect(held.length, "an apply still held from an earlier case").toBe(0);
  holdNext = true;
  const pushed = await foreignCommit(bare, CM_FILE, objectYaml(cmObject(value)));
  replica.branch(key)?.observeSoon();
  await waitFor("the apply of the push running", () => held.length === 1);
  return pushed;
};
/** Lets the held apply run to its end. */
const releaseHeld = async () => {
  const release = held.shift();
  expect(release, "the push's apply is held").toBeDefined();
  await release?.();
};
/** The rule changes (`field` left out): the first write the mirror hands after it, a snapshot's. */
const snapshotOnRuleChange = async (m: Mirror, field: string) => {
  const sentBefore = m.sent.length;
  await excludeFromRule(field);
  await waitFor("the snapshot handed", () => m.sent.length > sentBefore);
  return m.sent[sentBefore];
};
/** A write of another snapshot than `snap`'s, handed from position `from` on. */
const anotherSnapshot = (m: Mirror, from: number, snap: AcceptedWrite | undefined) =>
  m.sent.slice(from).find((w) => w.snapshot && w.snapshot.id !== snap?.snapshot?.id);
/** Changes the WatchRule (a field it leaves out): the mirror takes a snapshot of what it selects. */
const excludeFromRule = (field: string) =>
  api
    .kubeConfig()
    .makeApiClient(k8s.CustomObjectsApi)
    .patchNamespacedCustomObject(
      {
        ...GROUP,
        plural: "watchrules",
        namespace: NS,
        name: "cms",
        body: { spec: { excludeFields: [field] } },
      },
      merge,
    );
const inboxEmpty = async () => (await redis.client.xlen(branchKeys(redis.prefix, key).inbox)) === 0;

beforeAll(async () => {
  api = await startApiServer({ bookmarkIntervalMs: 100 });
  for (const f of crdFiles()) await api.installCrdFile(f);
  await api.installCrdFile(
    fileURLToPath(new URL("../cluster/crds/flux-kustomization.yaml", import.meta.url)),
  );
  git = await startGitServer();
  const url = await git.createRepo("site", {
    [`${FOLDER}/README.md`]: "dev\n",
    [CM_FILE]: objectYaml(cmObject("1")),
  });
  bare = join(git.root, "site.git");
  const initial = (await git.tip("site")) as string;
  redis = await isolatedRedis("snapshots");
  key = branchKey({ namespace: NS, name: "gp" }, url, "main");
  const kc = api.kubeConfig();
  core = kc.makeApiClient(k8s.CoreV1Api);
  const custom = kc.makeApiClient(k8s.CustomObjectsApi);
  const deployed = deployedIdentities();
  await api.applyYaml(
    yaml(
      ...["applygate-system", NS].map((name) => ({
        apiVersion: "v1",
        kind: "Namespace",
        metadata: { name },
      })),
    ),
  );
  await api.applyYaml(yaml(...deployed.rbac));
  const site = fluxSite(url);
  await api.applyYaml(yaml(site.kustomization, site.claim, site.provider, site.target, { ...cmObject("1") }));
  await claimAppliedAt(custom, initial);
  const target = (await custom.getNamespacedCustomObject({
    ...GROUP,
    plural: "gittargets",
    namespace: NS,
    name: "site",
  })) as { metadata: { uid: string } };
  targetUid = target.metadata.uid;

  // The sidecar's part: record the operation on the claim, apply the commit's ConfigMap to the
  // cluster (as kustomize-controller), and report each phase.
  cache = new ClusterCache(kc, log());
  const status = new KubeStatusSink(cache.kube, log(), Date.now, 8, cache);
  const directory = new KubeDirectory(cache, { log: log(), status });
  const objects = new KubeObjects(cache.kube, log(), {}, cache);
  const connection = { url: redis.url, maxRetriesPerRequest: null };
  reports = new Queue(QUEUES.reports, { connection, prefix: redis.prefix });
  const report = (a: Attempt, phase: "Requested" | "Running" | "Succeeded") =>
    reportPhase(objects, reports, a, phase);
  const apply = async (a: Attempt) => {
    const value = await valueIn(a.commit);
    if (value !== undefined && value !== (await liveValue())) await setLive(value, "kustomize-controller");
    await report(a, "Succeeded");
  };
  exec = new Worker(
    attemptsQueue("flux"),
    async (job: Job) => {
      const a = job.data as Attempt;
      attempts.push(a);
      await report(a, "Requested");
      await report(a, "Running");
      if (!holdNext) return apply(a);
      holdNext = false;
      held.push(() => apply(a));
    },
    { connection, prefix: redis.prefix, concurrency: 4 },
  );
  const cacheDir = await mkdtemp(join(tmpdir(), "applygate-snapshots-"));
  cacheDirs.push(cacheDir);
  decisions = createDecisions({
    redisUrl: redis.url,
    prefix: redis.prefix,
    objects,
    directory,
    log: log(),
    changes: cache,
    // Only a safety net: the watch plane's markers tell the worker what it needs at once.
    listIntervalMs: 600_000,
    metrics: { collision() {}, echo() {}, staleSnapshot: (outcome) => stale.push(outcome), attemptLost() {} },
  });
  replica = testReplica(redis, { directory, cacheDir, log: log(), status, attach: decisions.attach });
  await redis.client.sadd(knownBranchesKey(redis.prefix), key);
  await replica.start();
  await waitFor("the branch taken with decisions on", () => driver()?.state.observed);
}, 60_000);

afterAll(async () => {
  await mirror?.stop();
  await replica?.stop();
  await decisions?.close();
  await cache?.close();
  await exec?.close(true);
  await reports?.close();
  await api?.close();
  await git?.close();
  await redis?.cleanup();
  for (const d of cacheDirs) await rm(d, { recursive: true, force: true });
});

const settled = () => {
  const a = driver()?.state.appliers[CLAIM_KEY];
  return (
    a !== undefined &&
    a.operation === null &&
    Object.values(a.pending.byTarget).every((k) => k.length === 0) &&
    a.pending.all.length === 0
  );
};

async function startMirror(): Promise<Mirror> {
  const sa = deployedIdentities().serviceAccounts.mirror;
  const m = new Mirror({
    kubeConfig: api.kubeConfig(api.addServiceAccount(sa.namespace, sa.name)),
    redisUrl: redis.url,
    redisPrefix: redis.prefix,
    log: log(),
    resolveIntervalMs: 100,
    statusIntervalMs: 50,
  });
  await m.start();
  return m;
}

describe("the watch plane's snapshots and the barrier, through the mirror, the worker and Redis", () => {
  it("a GitTarget the mirror covers is asked for nothing until its initial snapshots are published", {
    timeout: 90_000,
  }, async () => {
    await waitFor("the start settled", () => settled());
    // An edit made while no mirror runs: the cluster holds 2, Git 1.
    await setLive("2");
    await api.applyYaml(
      yaml({
        apiVersion: "applygate.dev/v1alpha1",
        kind: "WatchRule",
        metadata: { name: "cms", namespace: NS },
        spec: { targetRef: { name: "site" }, kinds: [{ group: "", version: "v1", kind: "ConfigMap" }] },
      }),
    );
    // The watch plane covers the GitTarget and starts a round of initial snapshots, as the mirror
    // does first (coverage in Redis, then the `started` marker); its snapshot is not in yet.
    const token = "before:1";
    await redis.client.set(watchedTargetKey(redis.prefix, key, NS, "site"), token, "PX", 30_000);
    const branches = new Queue(QUEUES.branches, { connection: redis.client, prefix: redis.prefix });
    const marker = mirrorWrite(key, "m-started", { initialSnapshots: { token, phase: "started" } });
    expect((await acceptWrite(redis.client, redis.prefix, marker, branches)).accepted).toBe(true);
    await branches.close();
    await waitFor("the coverage known", () => driver()?.state.targets[targetUid]?.watch === token);

    // A push lands meanwhile: a ForeignCommit is pending, and it waits for the snapshots.
    const foreign = await foreignCommit(bare, `${FOLDER}/from-git.txt`, "git side\n");
    replica.branch(key)?.observeSoon();
    await waitFor("the push observed", () => driver()?.state.tip === foreign);
    await driver()?.idle();
    expect(notDueBecause(driver()!.state, CLAIM_KEY, Date.now())).toBe("barrier");
    const before = attempts.length;

    // The mirror starts: its own round, its snapshot (the edit made while none ran), then `done`.
    mirror = await startMirror();
    await waitFor("the snapshot's edit in Git", async () => (await gitValue()) === "2");
    await waitFor("the apply after the snapshots", () => attempts.length > before);
    const [apply] = attempts.slice(before);
    expect(apply?.targets.map((t) => t.reason)).toEqual(["ForeignCommit"]);
    // The apply carries both sides: the push and the edit the snapshot brought, never 1 again.
    expect(await valueIn(apply!.commit)).toBe("2");
    await waitFor("settled again", () => settled());
    expect(await liveValue()).toBe("2");
    expect(mirror.markers.map((m) => m.initialSnapshots?.phase)).toEqual(["started", "done"]);
  });

  it("a snapshot collected while a push is not applied yet is discarded, and collected again after the apply", {
    timeout: 90_000,
  }, async () => {
    const m = mirror as Mirror;
    // Somebody pushes 9; its apply runs (held by the executor): Git is ahead of the cluster.
    const pushed = await pushHeldApply("9");
    const ahead = JSON.parse((await redis.client.get(branchKeys(redis.prefix, key).applyState)) ?? "{}");
    expect(ahead.gitAhead).toBe(true);

    // The rule changes while the apply runs: the mirror takes a snapshot, which holds the old 2.
    const snap = await snapshotOnRuleChange(m, "data.unused");
    expect(snap?.snapshot).toMatchObject({ gitAhead: true, initial: false });
    // The stamp names the commits the cluster may still run (the claim's).
    expect(snap?.snapshot?.appliedCommits?.length).toBeGreaterThan(0);
    await waitFor("its write left the inbox", inboxEmpty);
    // Git keeps the push: the snapshot did not revert it.
    expect(await gitValue()).toBe("9");
    expect(stale).toEqual(["discarded"]);
    expect(await redis.client.get(`${redis.prefix}:write:${snap!.id}:published`)).toBeNull();

    // The apply ends: Git is no longer ahead, and the worker asks the mirror to collect again.
    const sentAfterDiscard = m.sent.length;
    await releaseHeld();
    await waitFor("the cluster runs the push", async () => (await liveValue()) === "9");
    const again = await waitFor("collected again", () => anotherSnapshot(m, sentAfterDiscard, snap));
    expect(again?.snapshot).toMatchObject({ gitAhead: false, initial: false });
    expect(again?.snapshot?.appliedCommits?.length).toBeGreaterThan(0);
    await waitFor("the fresh snapshot settled", inboxEmpty);
    await waitFor("settled", () => settled());
    expect(await gitValue()).toBe("9");
    expect(stale).toEqual(["discarded"]);
    // No commit after the push: neither snapshot changed anything in Git.
    expect(await git.tip("site")).toBe(pushed);
  });

  it("an ask to collect again that the mirror did not hear is asked again, and answered", {
    timeout: 90_000,
  }, async () => {
    const m = mirror as Mirror;
    const pushed = await pushHeldApply("10");
    const discardedBefore = stale.filter((v) => v === "discarded").length;
    const snap = await snapshotOnRuleChange(m, "data.other");
    await waitFor(
      "its write discarded",
      () => stale.filter((v) => v === "discarded").length > discardedBefore,
    );

    // The mirror stops listening (as while its Redis connection is re-established): the first ask
    // after the apply reaches nobody.
    const sub = (m as unknown as { subscriber: Redis }).subscriber;
    await sub.unsubscribe(recollectChannel(redis.prefix));
    // The test hears the asks itself: the mirror listens again only once the first ask went out
    // (the worker records the ask before it publishes it).
    const listener = redis.client.duplicate();
    let asks = 0;
    listener.on("message", () => asks++);
    await listener.subscribe(recollectChannel(redis.prefix));
    const hold = () => driver()?.state.targets[targetUid]?.snapshots;
    const sentAfterDiscard = m.sent.length;
    await releaseHeld();
    const firstAsk = await waitFor("the first ask", () => hold()?.recollectAskedAt);
    await waitFor("the first ask published", () => asks > 0);
    listener.disconnect();
    await sub.subscribe(recollectChannel(redis.prefix));
    await waitFor(
      "collected again, on the repeated ask",
      () => anotherSnapshot(m, sentAfterDiscard, snap),
      2 * RECOLLECT_AGAIN_MS + 15_000,
    );
    expect(hold()?.recollectAskedAt ?? Number.POSITIVE_INFINITY).toBeGreaterThanOrEqual(
      firstAsk + RECOLLECT_AGAIN_MS,
    );
    await waitFor("the hold ended", () => hold()?.since === null);
    await waitFor("settled", () => settled());
    expect(await gitValue()).toBe("10");
    expect(await git.tip("site")).toBe(pushed);
  });

  it("a new owner of the branch lifts the barrier for a done marker the last owner read before the writes ahead of it were published (soak --mirror seed 9101)", {
    timeout: 90_000,
  }, async () => {
    await waitFor("settled", () => settled());
    await waitFor("the inbox empty", inboxEmpty);
    // The mirror's rounds are played by hand here, so the run of the mirror started above stops.
    await mirror?.stop();
    mirror = undefined;
    const token = "handover:1";
    await redis.client.set(watchedTargetKey(redis.prefix, key, NS, "site"), token, "PX", 60_000);
    const branches = new Queue(QUEUES.branches, { connection: redis.client, prefix: redis.prefix });
    const write = (id: string, over: Partial<AcceptedWrite>) => mirrorWrite(key, id, over);
    const hand = async (w: AcceptedWrite) =>
      expect((await acceptWrite(redis.client, redis.prefix, w, branches)).accepted).toBe(true);
    await hand(write("m-h-started", { initialSnapshots: { token, phase: "started" } }));
    await waitFor("the round known", () => driver()?.state.targets[targetUid]?.watch === token);
    // Git is down: the round's write stays pending behind the `done` marker.
    git.faults.setDown(true);
    await hand(
      write("m-h-edit", {
        author: { name: "kubectl-edit", email: "kubectl-edit@cluster.local" },
        changes: [{ op: "upsert", object: cmObject("8") as never }],
      }),
    );
    await hand(write("m-h-done", { initialSnapshots: { token, phase: "done" } }));
    await waitFor(
      "the done marker read, its writes not published",
      () => replica.branch(key)?.snapshot().snapshotMarks === 1,
    );
    await branches.close();
    expect(driver()?.state.targets[targetUid]?.initialSnapshotsAt).not.toBe(token);

    // The owner stops before the publication; another takes the branch, and Git comes back.
    await replica.stop();
    const cacheDir = await mkdtemp(join(tmpdir(), "applygate-snapshots-"));
    cacheDirs.push(cacheDir);
    const status = new KubeStatusSink(cache.kube, log(), Date.now, 8, cache);
    replica = testReplica(redis, {
      directory: new KubeDirectory(cache, { log: log(), status }),
      cacheDir,
      log: log(),
      status,
      attach: decisions.attach,
    });
    await replica.start();
    git.faults.setDown(false);
    await waitFor("the edit published by the new owner", async () => (await gitValue()) === "8");
    // The mark came with the inbox: the GitTarget is past the barrier for this round.
    await waitFor(
      "the round's initial snapshots published",
      () => driver()?.state.targets[targetUid]?.initialSnapshotsAt === token,
    );
    await waitFor("the inbox empty", inboxEmpty);
  });
});
