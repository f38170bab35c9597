/**
 * The fleet benchmark: one real worker replica (`applygate worker`, in its own process) owning N
 * branches of one repository, 10 appliers per branch (5 FluxClaims, 5 ArgoCDClaims, a GitTarget
 * naming each, one GitProvider for the repository), against the simulated API server, a private
 * `redis-server` and the real Git server. A scripted executor stands in for the sidecars: it takes
 * attempts from the attempts queues and reports Requested … Succeeded on `reports`, recording the
 * operation on the claim's status first, as a sidecar does.
 *
 * N comes from FLEET_N (comma-separated, default "1,10,1000": the goals are set at 1,000). Figures per N: API requests per
 * second while every branch is idle and per branch woken (the worker's identity only, from the API
 * server's audit log), worker RSS and heap, Redis memory per branch, push notice accepted → first
 * attempt sent (p50/p99, all idle and with 10 % of branches busy), and the time a second replica
 * takes to own every branch after the first is killed with SIGKILL. Each goal is printed beside
 * its figure. The bench talks to the worker only through its command line, the API and Redis.
 */
import { type ChildProcess, execFile, spawn } from "node:child_process";
import { randomBytes, randomUUID } from "node:crypto";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { Session } from "node:inspector";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { type Job, Queue, Worker } from "bullmq";
import { KubeObjects } from "../../queue/apply/index.js";
import {
  type Attempt,
  attemptsQueue,
  branchKey,
  normalizeRepoUrl,
  type PushNotice,
  QUEUES,
  type ReportPhase,
} from "../../queue/contract.js";
import { crdFiles } from "../../queue/crds/files.js";
import { enqueueNotice } from "../../queue/intake.js";
import { branchKeys, knownBranchesKey } from "../../queue/keys.js";
import { Kube } from "../../queue/kube/index.js";
import { silentLogger } from "../../queue/log.js";
import { connectRedis } from "../../queue/redis.js";
import {
  type ApiServer,
  type AuditEvent,
  auditTail,
  readAuditLog,
  startApiServer,
} from "../cluster/apiserver/index.js";
import { argocdApplicationCrd } from "../cluster/argosim/index.js";
import { serveGitApart } from "../git/apart.js";
import { gitOk } from "../git/cli.js";
import { type GitServer, startGitServer } from "../git/server.js";
import { restartableRedis } from "../redis/restartable.js";
import { reportPhase } from "../support/attempts.js";
import { percentile } from "../support/percentile.js";
import { until } from "../support/wait.js";
import type { Figure } from "./figure.js";

const NS = "fleet";
const APPLIERS = 10;
const WORKER_USER = "fleet-worker";
const EXECUTOR_USER = "fleet-executor";
const GROUP = "applygate.dev/v1alpha1";
const here = fileURLToPath(new URL(".", import.meta.url));
const cli = fileURLToPath(new URL("../../queue/cli/applygate.mjs", import.meta.url));
const probe = join(here, "fleet-probe.mjs");
const exec = promisify(execFile);

/** Settings of one run; the environment overrides the windows for a quick look. */
export interface FleetOptions {
  sizes: number[];
  /** Replicas owning the fleet together (each count a run of its own; 2: the branches are split). */
  replicas: number[];
  /** Seconds of idle steady state counted for the API rate. */
  steadySeconds: number;
  /** Branches woken one at a time for the latency figures (per phase). */
  samples: number;
  leaseMs: number;
}

export function fleetOptions(env: NodeJS.ProcessEnv = process.env): FleetOptions {
  return {
    sizes: (env.FLEET_N ?? "1,10,1000")
      .split(",")
      .map((s) => Number(s.trim()))
      .filter((n) => n > 0),
    replicas: (env.FLEET_REPLICAS ?? "1,2")
      .split(",")
      .map((s) => Number(s.trim()))
      .filter((n) => n > 0),
    steadySeconds: Number(env.FLEET_STEADY_SECONDS ?? 20),
    samples: Number(env.FLEET_SAMPLES ?? 40),
    leaseMs: Number(env.FLEET_LEASE_MS ?? 10_000),
  };
}

const branchName = (i: number) => `b${i}`;
const folder = (j: number) => `apps/a${j}`;
const isFlux = (j: number) => j < APPLIERS / 2;
const claimName = (i: number, j: number) => `c-${i}-${j}`;

/** Progress on stderr, so a long run shows where it is. */
const step = (what: string) => process.stderr.write(`fleet ${new Date().toISOString()} ${what}\n`);

/** A commit on `branch` of a served bare repository touching the given paths (no request counted). */
async function commitTo(
  bare: string,
  branch: string,
  paths: string[],
): Promise<{ before: string; after: string }> {
  const tmp = await mkdtemp(join(tmpdir(), "applygate-fleet-"));
  try {
    const env = { GIT_INDEX_FILE: join(tmp, "index") };
    const before = (await gitOk(["rev-parse", `refs/heads/${branch}`], { cwd: bare })).trim();
    await gitOk(["read-tree", before], { cwd: bare, env });
    for (const p of paths) {
      const file = join(tmp, "content");
      await writeFile(file, `${randomUUID()}\n`);
      const blob = (await gitOk(["hash-object", "-w", file], { cwd: bare })).trim();
      await gitOk(["update-index", "--add", "--cacheinfo", `100644,${blob},${p}`], { cwd: bare, env });
    }
    const tree = (await gitOk(["write-tree"], { cwd: bare, env })).trim();
    const after = (
      await gitOk(["commit-tree", tree, "-p", before, "-m", `edit ${paths.join(" ")}`], { cwd: bare })
    ).trim();
    await gitOk(["update-ref", `refs/heads/${branch}`, after, before], { cwd: bare });
    return { before, after };
  } finally {
    await rm(tmp, { recursive: true, force: true });
  }
}

/** Runs `fn` over `items` with at most `width` at once. */
async function pool<T>(items: T[], width: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(width, items.length) }, async () => {
      while (next < items.length) await fn(items[next++] as T);
    }),
  );
}

interface Child {
  proc: ChildProcess;
  memory(): Promise<{ rss: number; heapUsed: number; heapTotal: number }>;
  /** Starts a CPU profile of the replica (FLEET_PROFILE); `stop` writes it to `file`. */
  profile(what: "start" | "stop", file?: string): Promise<void>;
}

/**
 * Starts CPU profiles of the replica and of this process; the function returned stops both and
 * writes `<base>-worker.cpuprofile` and `<base>-bench.cpuprofile`.
 */
async function startupProfiles(worker: Child, base: string): Promise<() => Promise<void>> {
  const session = new Session();
  session.connect();
  const post = (method: string, params?: object) =>
    new Promise<unknown>((resolve, reject) =>
      session.post(method, params, (err, r) => (err ? reject(err) : resolve(r))),
    );
  await post("Profiler.enable");
  await post("Profiler.setSamplingInterval", { interval: 500 });
  await post("Profiler.start");
  await worker.profile("start");
  return async () => {
    await worker.profile("stop", `${base}-worker.cpuprofile`);
    const { profile } = (await post("Profiler.stop")) as { profile: unknown };
    await writeFile(`${base}-bench.cpuprofile`, JSON.stringify(profile));
    session.disconnect();
  };
}

function startReplica(o: {
  id: string;
  kubeconfig: string;
  redisUrl: string;
  prefix: string;
  cacheDir: string;
  leaseMs: number;
  /** Whether replicas balance branches between them (off for the takeover of every branch). */
  balance: boolean;
}): Child {
  const proc = spawn(
    process.execPath,
    ["--import", probe, cli, "worker", "--metrics-port", "0", "--fetch-interval", "1h"],
    {
      env: {
        ...process.env,
        KUBECONFIG: o.kubeconfig,
        REDIS_URL: o.redisUrl,
        APPLYGATE_REDIS_PREFIX: o.prefix,
        APPLYGATE_CACHE_DIR: o.cacheDir,
        APPLYGATE_REPLICA_ID: o.id,
        APPLYGATE_LEASE: `${o.leaseMs}ms`,
        APPLYGATE_BALANCE: String(o.balance),
        LOG_LEVEL: process.env.FLEET_LOG_LEVEL ?? "warn",
      },
      stdio: ["ignore", process.env.FLEET_LOG_LEVEL ? 2 : "ignore", "inherit", "ipc"],
    },
  );
  return {
    proc,
    async memory() {
      const heap = await new Promise<NodeJS.MemoryUsage>((resolve, reject) => {
        const t = setTimeout(() => reject(new Error("the worker did not answer the memory probe")), 10_000);
        proc.once("message", (m) => {
          clearTimeout(t);
          resolve((m as { memory: NodeJS.MemoryUsage }).memory);
        });
        proc.send("memory");
      });
      const status = await readFile(`/proc/${proc.pid}/status`, "utf8");
      const rss = Number(/VmRSS:\s+(\d+) kB/.exec(status)?.[1] ?? Number.NaN) * 1024;
      return { rss, heapUsed: heap.heapUsed, heapTotal: heap.heapTotal };
    },
    async profile(what, file) {
      await new Promise<void>((resolve, reject) => {
        const t = setTimeout(() => reject(new Error("the worker did not answer the profile probe")), 30_000);
        const on = (m: unknown) => {
          if ((m as { profile?: string }).profile !== (what === "start" ? "started" : "stopped")) return;
          clearTimeout(t);
          proc.off("message", on);
          resolve();
        };
        proc.on("message", on);
        proc.send({ profile: what, file });
      });
    },
  };
}

/** The cluster, the repository and the Redis one run at size N needs. */
async function fleetWorld(n: number) {
  const dir = await mkdtemp(join(tmpdir(), "applygate-fleet-"));
  const auditLog = join(dir, "audit.jsonl");
  const api: ApiServer = await startApiServer({
    auditLog,
    bookmarkIntervalMs: 1000,
    watchCacheSize: 100_000,
  });
  for (const f of crdFiles()) await api.installCrdFile(f);
  await api.installCrdFile(
    fileURLToPath(new URL("../cluster/crds/flux-kustomization.yaml", import.meta.url)),
  );
  await api.installCrdFile(argocdApplicationCrd("3.5"));
  // Argo CD always serves AppProjects and has a `default` project; FLEET_NO_APPPROJECT=1 measures
  // a cluster without the CRD (the worker knows the kind absent and reads no project).
  const withProjects = process.env.FLEET_NO_APPPROJECT !== "1";
  if (withProjects)
    await api.installCrdFile(
      fileURLToPath(new URL("../cluster/crds/argocd-appproject.yaml", import.meta.url)),
    );
  const adminToken = randomBytes(16).toString("hex");
  api.addUser("fleet-admin", adminToken, "all");
  const workerToken = randomBytes(16).toString("hex");
  api.addUser(WORKER_USER, workerToken, "all");
  api.addUser(EXECUTOR_USER, randomBytes(16).toString("hex"), "all");
  const kubeconfig = join(dir, "kubeconfig");
  // client-node talks plain http only with insecure-skip-tls-verify set (see test/cluster/kubeconfig.ts).
  await writeFile(
    kubeconfig,
    JSON.stringify({
      apiVersion: "v1",
      kind: "Config",
      clusters: [{ name: "sim", cluster: { server: api.url, "insecure-skip-tls-verify": true } }],
      users: [{ name: WORKER_USER, user: { token: workerToken } }],
      contexts: [{ name: "sim", context: { cluster: "sim", user: WORKER_USER, namespace: NS } }],
      "current-context": "sim",
    }),
    { mode: 0o600 },
  );

  // The repository is made by the Git server in this process, then served by one of its own:
  // this process's event loop is busy with the API server, the executor and polling.
  const seed: GitServer = await startGitServer({ root: join(dir, "git") });
  const files = Object.fromEntries(
    Array.from({ length: APPLIERS }, (_, j) => [`${folder(j)}/README.md`, `a${j}\n`]),
  );
  const repoPath = new URL(await seed.createRepo("fleet", files)).pathname;
  const bare = join(seed.root, "fleet.git");
  const initial = (await seed.tip("fleet")) as string;
  await seed.close();
  const git = await serveGitApart(join(dir, "git"));
  const url = `${git.url}${repoPath}`;
  const refs = Array.from({ length: n }, (_, i) => `create refs/heads/${branchName(i)} ${initial}\n`).join(
    "",
  );
  const refsFile = join(dir, "refs");
  await writeFile(refsFile, refs);
  await exec("sh", ["-c", 'git update-ref --stdin < "$0"', refsFile], { cwd: bare });

  const apply = async (text: string) => api.applyYaml(text);
  await apply(JSON.stringify({ apiVersion: "v1", kind: "Namespace", metadata: { name: NS } }));
  if (withProjects) {
    await apply(JSON.stringify({ apiVersion: "v1", kind: "Namespace", metadata: { name: "argocd" } }));
    await apply(
      JSON.stringify({
        apiVersion: "argoproj.io/v1alpha1",
        kind: "AppProject",
        metadata: { name: "default", namespace: "argocd" },
        spec: { sourceRepos: ["*"], destinations: [{ server: "*", namespace: "*" }] },
      }),
    );
  }
  await apply(
    JSON.stringify({
      apiVersion: GROUP,
      kind: "GitProvider",
      metadata: { name: "gp", namespace: NS },
      spec: { url, type: "gitea", webhookSecretRef: { name: "hook" } },
    }),
  );
  const status = async (plural: string, name: string, body: unknown) => {
    const res = await fetch(
      `${api.url}/apis/applygate.dev/v1alpha1/namespaces/${NS}/${plural}/${name}/status`,
      {
        method: "PATCH",
        headers: { "Content-Type": "application/merge-patch+json", Authorization: `Bearer ${adminToken}` },
        body: JSON.stringify(body),
      },
    );
    if (!res.ok) throw new Error(`status of ${plural}/${name}: ${res.status} ${await res.text()}`);
  };
  const pairs = Array.from(
    { length: n * APPLIERS },
    (_, k) => [Math.floor(k / APPLIERS), k % APPLIERS] as const,
  );
  await pool(pairs, 8, async ([i, j]) => {
    const name = claimName(i, j);
    const applier = isFlux(j)
      ? {
          apiVersion: "kustomize.toolkit.fluxcd.io/v1",
          kind: "Kustomization",
          metadata: { name, namespace: NS },
          spec: {
            interval: "100h",
            prune: true,
            path: `./${folder(j)}`,
            sourceRef: { kind: "GitRepository", name: "repo" },
          },
        }
      : {
          apiVersion: "argoproj.io/v1alpha1",
          kind: "Application",
          metadata: { name, namespace: NS },
          spec: {
            project: "default",
            source: { repoURL: url, path: folder(j), targetRevision: branchName(i) },
            destination: { server: "https://kubernetes.default.svc", namespace: NS },
          },
        };
    const claim = isFlux(j)
      ? { kind: "FluxClaim", spec: { kustomizationRef: { name, namespace: NS } } }
      : { kind: "ArgoCDClaim", spec: { applicationRef: { name, namespace: NS } } };
    await apply(
      [
        applier,
        { apiVersion: GROUP, kind: claim.kind, metadata: { name, namespace: NS }, spec: claim.spec },
        {
          apiVersion: GROUP,
          kind: "GitTarget",
          metadata: { name, namespace: NS },
          spec: {
            providerRef: { name: "gp" },
            branch: branchName(i),
            path: folder(j),
            claimRef: { kind: claim.kind, name },
            commitWindow: { idleSeconds: 1, maxSeconds: 30 },
          },
        },
      ]
        .map((o) => JSON.stringify(o))
        .join("\n---\n"),
    );
    // Every applier has applied the branch's tip: the fleet starts idle.
    await status(isFlux(j) ? "fluxclaims" : "argocdclaims", name, { status: { lastAppliedCommit: initial } });
  });

  const redisServer = await restartableRedis();
  const prefix = `fleet-${randomBytes(4).toString("hex")}`;
  const redis = connectRedis(redisServer.url);
  const keys = Array.from({ length: n }, (_, i) =>
    branchKey({ namespace: NS, name: "gp" }, url, branchName(i)),
  );
  /** GitTargets whose status shows a publication (the worker's first report on each). */
  const reported = async () => {
    const res = await fetch(`${api.url}/apis/applygate.dev/v1alpha1/namespaces/${NS}/gittargets`, {
      headers: { Authorization: `Bearer ${adminToken}` },
    });
    const list = (await res.json()) as { items: Array<{ status?: { publication?: { commit?: string } } }> };
    return list.items.filter((t) => t.status?.publication?.commit).length;
  };
  return {
    reported,
    dir,
    api,
    git,
    url,
    bare,
    kubeconfig,
    auditLog,
    redisServer,
    redis,
    prefix,
    keys,
    async close() {
      redis.disconnect();
      await redisServer.remove();
      await git.close();
      await api.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

type World = Awaited<ReturnType<typeof fleetWorld>>;

/** The scripted executor: consumes both attempts queues and reports each attempt to Succeeded. */
function scriptedExecutor(world: World) {
  const connection = { url: world.redisServer.url, maxRetriesPerRequest: null };
  const reports = new Queue(QUEUES.reports, { connection, prefix: world.prefix });
  const objects = new KubeObjects(new Kube(world.api.kubeConfig(EXECUTOR_USER)), silentLogger());
  const sent = new Map<string, number[]>();
  const report = (a: Attempt, phase: ReportPhase) => reportPhase(objects, reports, a, phase);
  const workers = (["flux", "argocd"] as const).map(
    (kind) =>
      new Worker(
        attemptsQueue(kind),
        async (job: Job) => {
          const a = job.data as Attempt;
          const list = sent.get(`${a.branchKey} ${a.commit}`) ?? [];
          list.push(Date.parse(a.sentAt));
          sent.set(`${a.branchKey} ${a.commit}`, list);
          for (const p of ["Requested", "Running", "Settling", "Succeeded"] as const) await report(a, p);
        },
        { connection, prefix: world.prefix, concurrency: 16 },
      ),
  );
  return {
    /** When the first attempt for this commit of the branch was sent, once one was. */
    firstSent: (key: string, commit: string) => {
      const l = sent.get(`${key} ${commit}`);
      return l?.length ? Math.min(...l) : undefined;
    },
    async close() {
      for (const w of workers) await w.close(true);
      await reports.close();
    },
  };
}

/** Pushes a commit touching one Flux and one Argo CD folder of branch i and enqueues its push notice. */
async function wake(
  world: World,
  notices: Queue,
  i: number,
): Promise<{ key: string; after: string; noticedAt: number }> {
  const { before, after } = await commitTo(world.bare, branchName(i), [
    `${folder(0)}/edit.txt`,
    `${folder(APPLIERS - 1)}/edit.txt`,
  ]);
  const key = world.keys[i] as string;
  const notice: PushNotice = {
    type: "push",
    provider: { namespace: NS, name: "gp" },
    deliveryId: randomUUID(),
    repository: [normalizeRepoUrl(world.url)],
    branch: branchName(i),
    before,
    after,
    deleted: false,
    forced: false,
    receivedAt: new Date().toISOString(),
    branchKeys: [key],
  };
  const noticedAt = Date.now();
  await enqueueNotice(notices, notice);
  return { key, after, noticedAt };
}

async function leaseHolders(world: World): Promise<Array<string | null>> {
  const pipe = world.redis.pipeline();
  for (const k of world.keys) pipe.get(branchKeys(world.prefix, k).lease);
  return ((await pipe.exec()) ?? []).map(([, v]) => (v as string | null) ?? null);
}

async function usedMemory(world: World): Promise<number> {
  const info = await world.redis.info("memory");
  return Number(/used_memory:(\d+)/.exec(info)?.[1]);
}

/** Worker requests (not watches) in [from, to), and the watches it opened. */
/**
 * When each GitTarget's status was first written by `user` since `from` (ms since the epoch): the
 * answer time of its first successful status write, by namespace/name. Pure over the audit events.
 */
export function firstStatusWrites(events: AuditEvent[], user: string, from: number): Map<string, number> {
  const first = new Map<string, number>();
  for (const e of events) {
    const r = e.objectRef;
    if (e.user.username !== user || r?.resource !== "gittargets" || r.subresource !== "status") continue;
    if (e.verb !== "patch" && e.verb !== "update") continue;
    if (e.responseStatus.code < 200 || e.responseStatus.code > 299) continue;
    const at = Date.parse(e.stageTimestamp);
    const key = `${r.namespace}/${r.name}`;
    if (at >= from && !first.has(key)) first.set(key, at);
  }
  return first;
}

function workerRequests(world: World, from: number, to: number) {
  const events = readAuditLog(world.auditLog).filter((e) => e.user.username === WORKER_USER);
  const inWindow = events.filter((e) => {
    const t = Date.parse(e.requestReceivedTimestamp);
    return t >= from && t < to;
  });
  const verbs: Record<string, number> = {};
  for (const e of inWindow) {
    const r = e.objectRef;
    const what = `${e.verb} ${r?.resource ?? e.requestURI}${r?.subresource ? `/${r.subresource}` : ""}`;
    verbs[what] = (verbs[what] ?? 0) + 1;
  }
  const watches = inWindow.filter((e) => e.verb === "watch").length;
  return { requests: inWindow.length - watches, watches, verbs };
}

async function runSize(n: number, count: number, o: FleetOptions): Promise<Figure[]> {
  const started = Date.now();
  step(`N=${n} replicas=${count}: creating the cluster objects and branches`);
  const world = await fleetWorld(n);
  const setupSeconds = (Date.now() - started) / 1000;
  const figures: Figure[] = [];
  const fig = (name: string, value: number, unit: string, note: string) =>
    figures.push({
      bench: `fleet N=${n} replicas=${count}: ${name}`,
      value: Math.round(value * 100) / 100,
      unit,
      note,
    });
  const executor = scriptedExecutor(world);
  const notices = new Queue(QUEUES.notices, { connection: world.redis, prefix: world.prefix });
  const replicas: Child[] = [];
  try {
    await world.redis.sadd(knownBranchesKey(world.prefix), ...world.keys);
    const redisBefore = await usedMemory(world);
    const cache = (id: string) => join(world.dir, `cache-${id}`);
    const replica = (id: string) =>
      startReplica({
        id,
        ...world,
        redisUrl: world.redisServer.url,
        cacheDir: cache(id),
        leaseMs: o.leaseMs,
        // One replica with a standby measures the takeover of every branch: the standby must not
        // be handed half of them while it waits.
        balance: count > 1,
      });
    const ids = Array.from({ length: count }, (_, k) => `r${k + 1}`);
    for (const id of ids) replicas.push(replica(id));
    const first = replicas[0] as Child;
    const t0 = Date.now();
    const connectionsBefore = world.api.connectionsAccepted();
    // The requests from the start on (the setup's are many and none is the worker's).
    const newEvents = auditTail(world.auditLog, "end");
    step(`N=${n} replicas=${count}: replicas started`);
    // FLEET_PROFILE: the start-up (until every first status) is profiled apart from the wakes, in
    // the first replica and in this process, which serves the simulated API server.
    const profileDir = process.env.FLEET_PROFILE;
    const stopStartupProfiles = profileDir
      ? await startupProfiles(first, join(profileDir, `fleet-N${n}-r${count}-${t0}-startup`))
      : undefined;
    const ownedBy = async (owners: string[]) =>
      (await leaseHolders(world)).every((h) => owners.some((id) => h?.startsWith(`${id}:`)));
    await until(() => ownedBy(ids), "the replicas to own every branch", { timeoutMs: 900_000, everyMs: 250 });
    await until(
      async () => {
        const pipe = world.redis.pipeline();
        for (const k of world.keys) pipe.exists(branchKeys(world.prefix, k).decisions);
        return ((await pipe.exec()) ?? []).every(([, v]) => v === 1);
      },
      "decisions to start on every branch",
      { timeoutMs: 900_000, everyMs: 250 },
    );
    const takenSeconds = (Date.now() - t0) / 1000;
    // Replicas started together split the branches as their sweeps reach them; balancing then
    // evens them out: every replica within its fair share and slack (docs/design/balancing.md).
    if (count > 1) {
      const firstHolders = await leaseHolders(world);
      const first = ids.map((id) => firstHolders.filter((h) => h?.startsWith(`${id}:`)).length);
      const share = Math.ceil(n / count);
      const slack = Math.max(1, Math.floor(share / 10));
      let even: number[] = [];
      await until(
        async () => {
          const holders = await leaseHolders(world);
          even = ids.map((id) => holders.filter((h) => h?.startsWith(`${id}:`)).length);
          return even.reduce((a, b) => a + b, 0) === n && even.every((c) => c <= share + slack);
        },
        "the replicas to balance the branches",
        { timeoutMs: 900_000, everyMs: 250 },
      );
      fig(
        "branches balanced after start",
        (Date.now() - t0) / 1000,
        "s",
        `every replica within its share ${share} + ${slack}: ${even.join(" / ")} (${first.join(" / ")} when every branch was first owned with decisions)`,
      );
    }
    // Startup ends when every GitTarget shows its first publication status: those first writes
    // are no steady state. When is read from the audit log (the time each GitTarget's first status
    // write was answered), so the figure does not depend on how often the bench looks.
    const firstWrites = new Map<string, number>();
    await until(
      () => {
        for (const [k, at] of firstStatusWrites(newEvents(), WORKER_USER, t0))
          if (!firstWrites.has(k)) firstWrites.set(k, at);
        return firstWrites.size === n * APPLIERS;
      },
      "every GitTarget's first status write",
      { timeoutMs: 900_000, everyMs: 2_000 },
    );
    const settledSeconds = (Math.max(...firstWrites.values()) - t0) / 1000;
    // Whether the last ones came with the rest or trailed behind (a retry, a backoff).
    const firstWriteSeconds = [...firstWrites.values()].map((at) => (at - t0) / 1000).sort((a, b) => a - b);
    const firstWritesSpread = [50, 90, 99]
      .map((q) => `${q} % by ${percentile(firstWriteSeconds, q).toFixed(1)} s`)
      .join(", ");
    const startupConnections = world.api.connectionsAccepted() - connectionsBefore;
    await stopStartupProfiles?.();
    // A first write could carry the acceptance alone: wait for every publication too (a list of
    // every GitTarget is heavy at 10,000 of them: ask seldom).
    await until(
      async () => (await world.reported()) === n * APPLIERS,
      "every GitTarget's publication status",
      {
        timeoutMs: 900_000,
        everyMs: 2_000,
      },
    );
    const publishedSeconds = (Date.now() - t0) / 1000;
    fig(
      "every GitTarget's first status after start",
      settledSeconds,
      "s",
      `goal at 1,000 branches: ≤ 15 s, one or two replicas; the last GitTarget's first status write answered (audit log); ${firstWritesSpread}; every publication status seen by ${publishedSeconds.toFixed(1)} s (listed every 2 s); ${startupConnections} connections opened to the API server meanwhile (every client)`,
    );
    const split = ids.map((id) => `${id}`).join(", ");
    const shares = await (async () => {
      const holders = await leaseHolders(world);
      return ids.map((id) => holders.filter((h) => h?.startsWith(`${id}:`)).length);
    })();
    step(
      `N=${n} replicas=${count}: every branch owned with decisions after ${takenSeconds.toFixed(1)} s (${split}: ${shares.join(" / ")})`,
    );
    // Let the first listings and observations settle before counting the steady state.
    await new Promise((r) => setTimeout(r, 5000));

    const s0 = Date.now();
    await new Promise((r) => setTimeout(r, o.steadySeconds * 1000));
    const steady = workerRequests(world, s0, Date.now());
    const steadyRate = steady.requests / o.steadySeconds;
    fig(
      "API requests/s, all branches idle",
      steadyRate,
      "req/s",
      `goal: independent of N (watches only); verbs ${JSON.stringify(steady.verbs)} over ${o.steadySeconds} s; ${(steadyRate / n).toFixed(2)} req/s per branch`,
    );

    const mems = await Promise.all(replicas.map((r) => r.memory()));
    const rss = Math.max(...mems.map((m) => m.rss));
    const heap = Math.max(...mems.map((m) => m.heapUsed));
    const each =
      count > 1
        ? ` (largest of ${count}: ${mems.map((m) => (m.rss / 2 ** 20).toFixed(0)).join(" / ")} MiB)`
        : "";
    fig(
      "worker RSS",
      rss / 2 ** 20,
      "MiB",
      `goal at 1,000 branches / 10,000 appliers: ≤ 1024 MiB${each}; ${(rss / (n / count) / 1024).toFixed(1)} KiB per branch owned, ${(rss / ((n / count) * APPLIERS) / 1024).toFixed(1)} KiB per applier (whole process, baseline included)`,
    );
    fig(
      "worker heap used",
      heap / 2 ** 20,
      "MiB",
      `heapTotal ${(Math.max(...mems.map((m) => m.heapTotal)) / 2 ** 20).toFixed(1)} MiB${count > 1 ? `; each ${mems.map((m) => (m.heapUsed / 2 ** 20).toFixed(0)).join(" / ")} MiB` : ""}`,
    );
    const redisAfter = await usedMemory(world);
    fig(
      "Redis memory per branch",
      (redisAfter - redisBefore) / n / 1024,
      "KiB",
      `used_memory ${((redisAfter - redisBefore) / 2 ** 20).toFixed(2)} MiB over the seeded set, private redis-server`,
    );

    // Decision latency: push notice accepted → first attempt sent, one branch woken at a time.
    // Each wake is also split where the worker records the tip it read (`…:tip`): before it, the
    // notice's way to the branch worker and the read of the remote (Git); after it, the decision,
    // the flush and the queueing of the attempt.
    const segments = { read: [] as number[], decide: [] as number[], gitFetch: [] as number[] };
    // Git's own share: after each wake, the git CLI fetches the same branch from the same server
    // into a scratch repository, timed beside the worker's read of the tip.
    const probe = join(world.dir, `fetch-probe-${count}.git`);
    await gitOk(["init", "--bare", "-q", probe]);
    const latency = async (candidates: number[]) => {
      const out: number[] = [];
      for (const i of candidates) {
        const w = await wake(world, notices, i);
        const tipKey = branchKeys(world.prefix, w.key).tip;
        let readAt: number | undefined;
        const sent = await until(
          async () => {
            if (readAt === undefined && (await world.redis.get(tipKey)) === w.after) readAt = Date.now();
            return executor.firstSent(w.key, w.after);
          },
          `an attempt for branch ${i}`,
          { timeoutMs: 60_000, everyMs: 2 },
        );
        out.push(sent - w.noticedAt);
        readAt ??= sent;
        // FLEET_TRACE=1: one line per wake, to find a slow one in the worker's log (FLEET_LOG_LEVEL).
        if (process.env.FLEET_TRACE === "1")
          step(
            `wake ${w.key} ${w.after.slice(0, 8)} noticed ${new Date(w.noticedAt).toISOString()} tip read +${readAt - w.noticedAt} ms sent +${sent - w.noticedAt} ms`,
          );
        segments.read.push(Math.min(readAt, sent) - w.noticedAt);
        segments.decide.push(Math.max(0, sent - readAt));
        const f0 = Date.now();
        await gitOk(["fetch", "-q", world.url, `refs/heads/${branchName(i)}`], { cwd: probe });
        segments.gitFetch.push(Date.now() - f0);
      }
      return out;
    };
    const segmentNote = () => {
      const r = `notice → tip read p50 ${percentile(segments.read, 50)} / p99 ${percentile(segments.read, 99)} ms`;
      const d = `tip read → attempt sent p50 ${percentile(segments.decide, 50)} / p99 ${percentile(segments.decide, 99)} ms`;
      const g = `git fetch of the same branch from the same server p50 ${percentile(segments.gitFetch, 50)} / p99 ${percentile(segments.gitFetch, 99)} ms`;
      segments.read.length = 0;
      segments.decide.length = 0;
      segments.gitFetch.length = 0;
      return `${r}; ${d} (tip read seen by polling Redis every 2 ms); beside it, ${g}`;
    };
    const sample = (from: number[]) => from.slice(0, Math.min(o.samples, from.length));
    const all = Array.from({ length: n }, (_, i) => i);
    if (profileDir) await first.profile("start");
    step(`N=${n}: idle latency`);
    const w0 = Date.now();
    const idle = await latency(sample(all));
    const w1 = Date.now();
    const woken = workerRequests(world, w0, w1);
    const perWake = (woken.requests - steadyRate * ((w1 - w0) / 1000)) / idle.length;
    fig(
      "API requests per branch woken",
      perWake,
      "req",
      `over the steady rate; ${idle.length} wakes, verbs ${JSON.stringify(woken.verbs)}`,
    );
    const idleSplit = segmentNote();
    fig(
      "notice → attempt sent p50, all idle",
      percentile(idle, 50),
      "ms",
      `${idle.length} wakes; ${idleSplit}`,
    );
    fig(
      "notice → attempt sent p99, all idle",
      percentile(idle, 99),
      "ms",
      `goal at 1,000 branches: < 100 ms; ${idle.length} wakes; ${idleSplit}`,
    );

    // 10 % of branches busy: each gets a commit and notice again as soon as its last one was answered.
    const busyCount = Math.floor(n / 10);
    if (busyCount > 0) {
      const busy = all.slice(n - busyCount);
      let stop = false;
      let busyWakes = 0;
      const rotate = (async () => {
        while (!stop)
          await pool(busy, Math.min(busy.length, 8), async (i) => {
            if (stop) return;
            const w = await wake(world, notices, i);
            await until(() => stop || executor.firstSent(w.key, w.after), `busy branch ${i}`, {
              timeoutMs: 120_000,
              everyMs: 20,
            });
            busyWakes++;
          });
      })();
      step(`N=${n}: latency with 10% busy`);
      const b0 = Date.now();
      const busyLatency = await latency(sample(all.slice(0, n - busyCount)));
      const busySeconds = (Date.now() - b0) / 1000;
      stop = true;
      await rotate;
      const note = `${busyCount} busy branches woken ${(busyWakes / busySeconds).toFixed(1)}/s in all, 8 at a time; ${busyLatency.length} wakes measured; ${segmentNote()}`;
      fig("notice → attempt sent p50, 10% busy", percentile(busyLatency, 50), "ms", note);
      fig(
        "notice → attempt sent p99, 10% busy",
        percentile(busyLatency, 99),
        "ms",
        `goal at 1,000 branches: < 100 ms; ${note}`,
      );
    }

    if (profileDir)
      await first.profile("stop", join(profileDir, `fleet-N${n}-r${count}-${Date.now()}.cpuprofile`));

    // Takeover: with one replica a second one waits beside it; the first is killed with SIGKILL and
    // the others take its branches.
    if (count === 1) {
      replicas.push(replica("r2"));
      await (replicas[1] as Child).memory(); // it answers once its modules are loaded
      await new Promise((r) => setTimeout(r, 3000));
    }
    const survivors = count === 1 ? ["r2"] : ids.slice(1);
    const moved = (await leaseHolders(world)).filter((h) => h?.startsWith("r1:")).length;
    step(`N=${n} replicas=${count}: killing the first replica (${moved} branches)`);
    const killedAt = Date.now();
    first.proc.kill("SIGKILL");
    await until(() => ownedBy(survivors), "the other replica to own every branch", {
      timeoutMs: 900_000,
      everyMs: 100,
    });
    fig(
      "takeover after kill -9",
      (Date.now() - killedAt) / 1000,
      "s",
      `goal at 1,000 branches: ≤ 15 s (within the lease); lease ${o.leaseMs / 1000} s; ${moved} branches moved`,
    );
    fig(
      "setup",
      setupSeconds,
      "s",
      `cluster objects and branches created; the replicas owned every branch with decisions after ${takenSeconds.toFixed(1)} s (${shares.join(" / ")}), every GitTarget showed its first status after ${settledSeconds.toFixed(1)} s`,
    );
    return figures;
  } finally {
    for (const r of replicas)
      if (r.proc.exitCode === null && r.proc.signalCode === null) r.proc.kill("SIGKILL");
    await executor.close();
    await notices.close();
    await world.close();
  }
}

export async function run(o: FleetOptions = fleetOptions()): Promise<Figure[]> {
  const figures: Figure[] = [];
  for (const n of o.sizes)
    for (const count of o.replicas) {
      const f = await runSize(n, count, o);
      // Printed as each run ends, so a long run shows its figures early.
      for (const x of f) process.stderr.write(`${JSON.stringify(x)}\n`);
      figures.push(...f);
    }
  return figures;
}
