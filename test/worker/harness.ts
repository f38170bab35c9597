/**
 * Shared pieces of the branch worker's tests: a real Git server, an isolated Redis namespace,
 * writes as the gateway accepts them, and helpers to wait on outcomes.
 */
import { randomUUID } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Queue } from "bullmq";
import { type AcceptedWrite, branchKey, QUEUES } from "../../queue/contract.js";
import type { ScopeGrant } from "../../queue/crds/index.js";
import type { BranchSpec } from "../../queue/directory.js";
import { BareRepo } from "../../queue/git/repo.js";
import { acceptWrite } from "../../queue/intake.js";
import { branchKeys, writePublishedKey } from "../../queue/keys.js";
import { createLogger, silentLogger } from "../../queue/log.js";
import { scopeOf } from "../../queue/scope.js";
import { BranchWorker, type BranchWorkerOptions } from "../../queue/worker/branch-worker.js";
import { BranchLease } from "../../queue/worker/lease.js";
import { Replica, type ReplicaOptions } from "../../queue/worker/replica.js";
import { gitOk } from "../git/cli.js";
import { type GitServer, startGitServer } from "../git/server.js";
import { type IsolatedRedis, isolatedRedis } from "../redis/isolated.js";
import { type Probe, untilWith } from "../support/wait.js";

export const TARGET = { namespace: "team", name: "site" };
/** The GitProvider the harness's branch belongs to (its key begins with it). */
export const HARNESS_PROVIDER = { namespace: "team", name: "gp" };
export const FOLDER = "clusters/dev";
export const WEB_GRANT: ScopeGrant = {
  apiVersion: "applygate.dev/v1alpha1",
  kind: "ScopeGrant",
  metadata: { name: "team-web" },
  spec: { targets: [TARGET], namespaces: ["web"] },
};

export function configMapWrite(
  key: string,
  name: string,
  value: string,
  extra: Partial<AcceptedWrite> = {},
): AcceptedWrite {
  return {
    id: randomUUID(),
    target: TARGET,
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
}

export function fileOf(name: string): string {
  return `${FOLDER}/core/configmap/web/${name}.yaml`;
}

/**
 * A replica as the tests beside a simulated cluster run one, the decisions attached: a 3 s lease,
 * its branches polled every 50 ms and their remote fetched hourly (never within a test).
 */
export function testReplica(
  redis: { url: string; prefix: string },
  parts: Pick<ReplicaOptions, "directory" | "cacheDir" | "log" | "status" | "attach"> &
    Partial<Pick<ReplicaOptions, "replicaId" | "sweepMs" | "baselineConcurrency">>,
): Replica {
  return new Replica({
    redisUrl: redis.url,
    prefix: redis.prefix,
    ...parts,
    leaseMs: 3000,
    branch: { fetchIntervalMs: 3_600_000, pollMs: 50 },
  });
}

const until = untilWith({ timeoutMs: 30_000, everyMs: 20 });
export const waitFor = <T>(what: string, probe: Probe<T>, timeoutMs?: number): Promise<T> =>
  until(probe, what, timeoutMs);

export interface Harness {
  server: GitServer;
  redis: IsolatedRedis;
  url: string;
  key: string;
  spec: BranchSpec;
  branches: Queue;
  dir: string;
  accept(write: AcceptedWrite): Promise<boolean>;
  published(id: string): Promise<string | null>;
  inboxLength(): Promise<number>;
  /** Commit subjects on the server's branch, newest first. */
  log(): Promise<string[]>;
  file(path: string): Promise<string | undefined>;
  newWorker(opts?: Partial<BranchWorkerOptions> & { replica?: string }): Promise<BranchWorker>;
  close(): Promise<void>;
}

export async function harness(
  files: Record<string, string> = { "README.md": "hi\n" },
  window = { idleMs: 30, maxMs: 200 },
  /** A repository served elsewhere (another process) instead of by this harness's server. */
  external?: { url: string },
): Promise<Harness> {
  const server = await startGitServer();
  const redis = await isolatedRedis("worker");
  const url = external?.url ?? (await server.createRepo("site", files));
  const key = branchKey(HARNESS_PROVIDER, url, "main");
  const spec: BranchSpec = {
    key,
    remote: { url },
    branch: "main",
    // The writes hold ConfigMaps in namespace web: a ScopeGrant gives the target that namespace.
    targets: [{ ...TARGET, path: FOLDER, window, scope: scopeOf(TARGET, [WEB_GRANT]) }],
  };
  const branches = new Queue(QUEUES.branches, { connection: redis.client, prefix: redis.prefix });
  const dir = await mkdtemp(join(tmpdir(), "applygate-worker-"));
  const workers: BranchWorker[] = [];
  const bare = join(server.root, "site.git");
  return {
    server,
    redis,
    url,
    key,
    spec,
    branches,
    dir,
    async accept(write) {
      return (await acceptWrite(redis.client, redis.prefix, write, branches)).accepted;
    },
    published: (id) => redis.client.get(writePublishedKey(redis.prefix, id)),
    inboxLength: () => redis.client.xlen(branchKeys(redis.prefix, key).inbox),
    async log() {
      const out = await gitOk(["log", "--format=%s", "main"], { cwd: bare });
      return out.trim().split("\n").filter(Boolean);
    },
    async file(path) {
      try {
        return await gitOk(["show", `main:${path}`], { cwd: bare });
      } catch {
        return undefined;
      }
    },
    async newWorker(opts = {}) {
      const { replica = "r1", ...rest } = opts;
      const lease = new BranchLease(redis.client, redis.prefix, key, replica, 10_000);
      if (!(await lease.acquire())) throw new Error("lease is held");
      const repo = await BareRepo.open(join(dir, `${replica}.git`));
      const w = new BranchWorker({
        spec,
        redis: redis.client,
        prefix: redis.prefix,
        lease,
        repo,
        log: process.env.APPLYGATE_TEST_LOG
          ? createLogger({ level: process.env.APPLYGATE_TEST_LOG, pretty: false })
          : silentLogger(),
        pollMs: 50,
        ...rest,
      });
      workers.push(w);
      w.start();
      // What a replica does for the branches it owns: keep the lease.
      const renew = setInterval(() => void lease.renew().catch(() => {}), 2000);
      void w.done.then(() => clearInterval(renew));
      return w;
    },
    async close() {
      for (const w of workers) await w.stop();
      // One turn of the event loop, so callbacks the stops queued run before the connections close.
      await new Promise((r) => setTimeout(r, 0));
      await branches.close();
      await server.close();
      await redis.cleanup();
      await rm(dir, { recursive: true, force: true });
    },
  };
}
