/**
 * `npm run bench -- publish`: what publication costs.
 * 1. 100 pending writes (one commit each) committed and pushed on a repository of 10,000 files,
 *    beside the git CLI doing the same edits (add, commit each, one push) in the same run.
 * 2. Sustained writes per second accepted for one branch while its worker gathers them into
 *    commit windows and publishes, and the end-to-end rate until all are published.
 */
import { randomUUID } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Queue } from "bullmq";
import { type AcceptedWrite, branchKey, QUEUES } from "../../queue/contract.js";
import type { BranchSpec } from "../../queue/directory.js";
import { objectPath, objectYaml } from "../../queue/git/layout.js";
import { BareRepo } from "../../queue/git/repo.js";
import { acceptWrite } from "../../queue/intake.js";
import { writePublishedKey } from "../../queue/keys.js";
import { silentLogger } from "../../queue/log.js";
import { scopeOf } from "../../queue/scope.js";
import { BranchWorker } from "../../queue/worker/branch-worker.js";
import { BranchLease } from "../../queue/worker/lease.js";
import { gitOk } from "../git/cli.js";
import { startGitServer } from "../git/server.js";
import { isolatedRedis } from "../redis/isolated.js";
import type { Figure } from "./figure.js";

/** The bench writes ConfigMaps across namespaces ns-0..ns-99: a ScopeGrant gives the target every namespace. */
const SITE = { namespace: "team", name: "site" };
const BENCH_PROVIDER = { namespace: "team", name: "gp" };
const SITE_SCOPE = scopeOf(SITE, [
  {
    apiVersion: "applygate.dev/v1alpha1",
    kind: "ScopeGrant",
    metadata: { name: "bench" },
    spec: { targets: [SITE], namespaces: ["*"] },
  },
]);

const FOLDER = "clusters/dev";
const FILES = 10_000;
const WRITES = 100;

function configMap(i: number, value: string) {
  return {
    apiVersion: "v1",
    kind: "ConfigMap",
    metadata: { name: `cm-${i}`, namespace: `ns-${i % 100}` },
    data: { value },
  };
}

function write(key: string, i: number, value: string, save: boolean): AcceptedWrite {
  return {
    id: randomUUID(),
    target: { namespace: "team", name: "site" },
    branchKey: key,
    path: FOLDER,
    acceptedAt: new Date().toISOString(),
    author: { name: "Bench", email: "bench@example.com" },
    changes: [{ op: "upsert", object: configMap(i, value) }],
    save,
  };
}

async function startWorker(
  spec: BranchSpec,
  prefix: string,
  redis: Awaited<ReturnType<typeof isolatedRedis>>,
  dir: string,
  autoPublish: boolean,
) {
  const lease = new BranchLease(redis.client, prefix, spec.key, "bench", 60_000);
  await lease.acquire();
  const repo = await BareRepo.open(join(dir, "worker.git"));
  const worker = new BranchWorker({
    spec,
    redis: redis.client,
    prefix,
    lease,
    repo,
    log: silentLogger(),
    pollMs: 20,
    autoPublish,
  });
  worker.start();
  return worker;
}

export async function run(): Promise<Figure[]> {
  const figures: Figure[] = [];
  const server = await startGitServer();
  const redis = await isolatedRedis("bench");
  const dir = await mkdtemp(join(tmpdir(), "applygate-bench-"));
  const branches = new Queue(QUEUES.branches, { connection: redis.client, prefix: redis.prefix });
  try {
    // --- 1. 100 pending writes on a 10,000-file repository, against the git CLI.
    const files: Record<string, string> = {};
    for (let i = 0; i < FILES; i++) {
      const obj = configMap(i, "seed");
      files[
        objectPath(FOLDER, {
          apiVersion: "v1",
          kind: "ConfigMap",
          namespace: obj.metadata.namespace,
          name: obj.metadata.name,
        })
      ] = objectYaml(obj);
    }
    const url = await server.createRepo("big", files);
    const key = branchKey(BENCH_PROVIDER, url, "main");
    const spec: BranchSpec = {
      key,
      remote: { url },
      branch: "main",
      targets: [{ ...SITE, path: FOLDER, window: { idleMs: 60_000, maxMs: 60_000 }, scope: SITE_SCOPE }],
    };
    const worker = await startWorker(spec, redis.prefix, redis, dir, false);
    await worker.flush(); // baseline: the clone, not measured
    const writes = Array.from({ length: WRITES }, (_, n) => write(key, n * 97, `ours-${n}`, true));
    for (const w of writes) await acceptWrite(redis.client, redis.prefix, w, branches);
    while (worker.snapshot().retainedWrites < WRITES) await new Promise((r) => setTimeout(r, 10));
    let t = performance.now();
    const result = await worker.flush();
    const ours = performance.now() - t;
    if (!result.ok) throw new Error(`flush failed: ${result.cause}`);
    if (!(await redis.client.get(writePublishedKey(redis.prefix, writes[WRITES - 1]!.id))))
      throw new Error("not published");
    await worker.stop();

    const work = join(dir, "cli");
    await gitOk(["clone", "-q", url, work]);
    t = performance.now();
    for (let n = 0; n < WRITES; n++) {
      const i = n * 97;
      const obj = configMap(i, `cli-${n}`);
      const path = objectPath(FOLDER, {
        apiVersion: "v1",
        kind: "ConfigMap",
        namespace: obj.metadata.namespace,
        name: obj.metadata.name,
      });
      await writeFile(join(work, path), objectYaml(obj));
      await gitOk(["add", path], { cwd: work });
      await gitOk(["commit", "-q", "-m", `edit ${n}`], { cwd: work });
    }
    await gitOk(["pull", "-q", "--rebase", "origin", "main"], { cwd: work });
    await gitOk(["push", "-q", "origin", "HEAD:main"], { cwd: work });
    const cli = performance.now() - t;
    figures.push({
      bench: "publish: 100 pending writes, 10,000-file repository (commit each + one push)",
      value: Math.round(ours),
      unit: "ms",
      baseline: Math.round(cli),
      ratio: Number((ours / cli).toFixed(2)),
      note: "baseline: git CLI add+commit per write, one pull --rebase and push; ratio <= 2 is the target",
    });

    // --- 2. Sustained writes per second for one branch with commit windows.
    const url2 = await server.createRepo("busy", { "README.md": "busy\n" });
    const key2 = branchKey(BENCH_PROVIDER, url2, "main");
    const spec2: BranchSpec = {
      key: key2,
      remote: { url: url2 },
      branch: "main",
      targets: [{ ...SITE, path: FOLDER, window: { idleMs: 200, maxMs: 1000 }, scope: SITE_SCOPE }],
    };
    const w2 = await startWorker(spec2, redis.prefix, redis, join(dir, "w2"), true);
    const total = 5000;
    const stream = Array.from({ length: total }, (_, n) => write(key2, n % 500, `v${n}`, false));
    t = performance.now();
    const concurrency = 32;
    let next = 0;
    await Promise.all(
      Array.from({ length: concurrency }, async () => {
        while (next < total) {
          const w = stream[next++] as AcceptedWrite;
          const r = await acceptWrite(redis.client, redis.prefix, w, branches);
          if (!r.accepted) throw new Error("refused");
        }
      }),
    );
    const acceptMs = performance.now() - t;
    const last = stream[total - 1] as AcceptedWrite;
    while (!(await redis.client.get(writePublishedKey(redis.prefix, last.id))))
      await new Promise((r) => setTimeout(r, 20));
    const allMs = performance.now() - t;
    await w2.stop();
    figures.push({
      bench: "publish: writes accepted per second, one branch, commit windows (idle 200 ms, max 1 s)",
      value: Math.round(total / (acceptMs / 1000)),
      unit: "writes/s",
      note: `${total} writes, ${concurrency} concurrent intake calls; target 1000 writes/s`,
    });
    figures.push({
      bench: "publish: writes published per second end to end, one branch",
      value: Math.round(total / (allMs / 1000)),
      unit: "writes/s",
      note: `${total} writes from first accept until the last was published (includes the final window's idle time)`,
    });
  } finally {
    await branches.close();
    await server.close();
    await redis.cleanup();
    await rm(dir, { recursive: true, force: true });
  }
  return figures;
}
