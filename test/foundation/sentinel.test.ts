/**
 * Redis that survives losing a node. Real processes on loopback: a primary, a replica and three
 * sentinels (`redis-server --sentinel`), no persistence, so what survives is what replication
 * carried. Two gateways reach Redis only through `redis+sentinel://` (one acknowledging at once,
 * one with `redisWaitReplicas: 1`). Writes and push notices flow, the primary is killed with
 * SIGKILL, and:
 * - the gateway answers 503 while the sentinels elect the replica, and nothing but 503, then
 *   accepts again;
 * - every write and notice acknowledged while the replica had caught up is still there;
 * - a worker replica and a BullMQ consumer, both connected through the sentinels, go on: the
 *   worker publishes every write given to it before the kill and after the failover;
 * - the acknowledged writes asynchronous replication lost in a burst cut by the kill are counted;
 * - with the replica stopped, the WAIT gateway refuses to acknowledge (503) what the other one
 *   acknowledges (202) and the replica lacks;
 * - the lease and the compare-and-swap push keep an old owner from publishing over a new one, even
 *   when the failover lost the lease and rolled the fence counter back.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Queue, Worker } from "bullmq";
import type { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createGateway, type Gateway } from "../../gateway/app.js";
import { gatewaySettings } from "../../gateway/main.js";
import { loadConfig } from "../../queue/config.js";
import { branchKey, QUEUES } from "../../queue/contract.js";
import { BareRepo } from "../../queue/git/repo.js";
import { PushRejectedError } from "../../queue/git/smart-http.js";
import { acceptWrite } from "../../queue/intake.js";
import { branchKeys, writePublishedKey } from "../../queue/keys.js";
import { silentLogger } from "../../queue/log.js";
import { bullConnection, connectRedis, freePort, redisAnswers } from "../../queue/redis.js";
import { scopeOf } from "../../queue/scope.js";
import { BranchLease, fencedWrite } from "../../queue/worker/lease.js";
import { Replica } from "../../queue/worker/replica.js";
import { type GitServer, startGitServer } from "../git/server.js";
import { NS, SECRETS, signedGithubPush, URLS, webConfigMapWrite } from "../support/gateway.js";
import { fixtureGatewayOptions } from "../support/gateway-world.js";
import { until } from "../support/wait.js";
import { configMapWrite, FOLDER, TARGET, WEB_GRANT } from "../worker/harness.js";

const MASTER = "applygate";
const WRITES = `/v1/targets/${NS}/infra/writes`;
const BK = branchKey({ namespace: NS, name: "generic" }, URLS.generic, "main");
const bearer = { authorization: `Bearer ${SECRETS.intakeToken}`, "content-type": "application/json" };
const write = (n: number) => webConfigMapWrite("apps", { n: String(n) }, `write ${n}`);
const patience = { timeoutMs: 30_000, everyMs: 50 };

const children: ChildProcess[] = [];
function start(args: string[]): ChildProcess {
  const child = spawn("redis-server", args, { stdio: "ignore" });
  children.push(child);
  return child;
}
function kill(child: ChildProcess, signal: NodeJS.Signals = "SIGKILL"): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    child.once("exit", () => resolve());
    child.kill(signal);
  });
}

/** SENTINEL MASTER's flat reply as a record. */
async function masterInfo(sentinel: Redis): Promise<Record<string, string>> {
  const flat = (await sentinel.call("SENTINEL", "MASTER", MASTER)) as string[];
  const out: Record<string, string> = {};
  for (let i = 0; i + 1 < flat.length; i += 2) out[flat[i] as string] = flat[i + 1] as string;
  return out;
}

const percentile = (sorted: number[], p: number) =>
  sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] as number;

describe("Redis through Sentinel, primary killed", () => {
  let dir = "";
  let primaryPort = 0;
  let replicaPort = 0;
  let primary: ChildProcess;
  let replica: ChildProcess;
  let url = "";
  let gw: Gateway;
  let gwWait: Gateway;
  let consumer: Worker | undefined;
  let worker: Replica | undefined;
  const sentinels: Redis[] = [];
  const clients: Redis[] = [];
  const client = (u: string) => {
    const c = connectRedis(u);
    clients.push(c);
    return c;
  };
  const gits: GitServer[] = [];
  const gitServer = async () => {
    const g = await startGitServer();
    gits.push(g);
    return g;
  };
  const prefix = `sentinel-${process.pid}`;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "applygate-sentinel-"));
    primaryPort = await freePort();
    replicaPort = await freePort();
    const node = ["--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--daemonize", "no"];
    // Each node in a folder of its own: a replica's full sync writes the RDB it receives there.
    for (const d of ["primary", "replica"]) await mkdir(join(dir, d));
    primary = start(["--port", String(primaryPort), ...node, "--dir", join(dir, "primary")]);
    replica = start([
      "--port",
      String(replicaPort),
      ...node,
      "--dir",
      join(dir, "replica"),
      "--replicaof",
      "127.0.0.1",
      String(primaryPort),
    ]);
    const sentinelPorts = [await freePort(), await freePort(), await freePort()];
    for (const [i, port] of sentinelPorts.entries()) {
      const sdir = join(dir, `s${i}`);
      await mkdir(sdir);
      const conf = join(sdir, "sentinel.conf");
      await writeFile(
        conf,
        [
          `port ${port}`,
          "bind 127.0.0.1",
          `dir ${sdir}`,
          `sentinel monitor ${MASTER} 127.0.0.1 ${primaryPort} 2`,
          `sentinel down-after-milliseconds ${MASTER} 500`,
          `sentinel failover-timeout ${MASTER} 3000`,
          `sentinel parallel-syncs ${MASTER} 1`,
          "",
        ].join("\n"),
      );
      start([conf, "--sentinel"]);
    }
    for (const port of [primaryPort, replicaPort, ...sentinelPorts])
      await until(() => redisAnswers("127.0.0.1", port, 200), `redis on ${port} to answer`, patience);
    // Every sentinel knows the replica and the two other sentinels: a failover can be agreed.
    for (const port of sentinelPorts) {
      const s = client(`redis://127.0.0.1:${port}`);
      sentinels.push(s);
      await until(
        async () => {
          const m = await masterInfo(s);
          return m["num-slaves"] === "1" && m["num-other-sentinels"] === "2";
        },
        `sentinel ${port} to see the replica and its peers`,
        patience,
      );
    }
    url = `redis+sentinel://${sentinelPorts.map((p) => `127.0.0.1:${p}`).join(",")}/${MASTER}`;
    const options = fixtureGatewayOptions({ url, prefix }, { redisTimeoutMs: 1000 });
    gw = await createGateway(options);
    gwWait = await createGateway({ ...options, redisWaitReplicas: 1 });
    // The gateways asked the sentinels for the primary and connected: ready to accept.
    for (const g of [gw, gwWait])
      await until(
        async () => (await g.app.inject({ method: "GET", url: "/readyz" })).statusCode === 200,
        "the gateway to be ready",
        patience,
      );
  }, 60_000);

  afterAll(async () => {
    await gw?.close();
    await gwWait?.close();
    await consumer?.close(true);
    await worker?.stop();
    for (const c of clients) c.disconnect();
    await Promise.all(gits.map((g) => g.close()));
    // SIGCONT first: a stopped process does not act on SIGKILL's exit until continued.
    for (const c of children) c.kill("SIGCONT");
    await Promise.all(children.map((c) => kill(c)));
    await rm(dir, { recursive: true, force: true });
  });

  const post = async (g: Gateway, n: number) => {
    const r = await g.app.inject({ method: "POST", url: WRITES, headers: bearer, payload: write(n) });
    return { status: r.statusCode, id: r.statusCode === 202 ? (r.json().id as string) : undefined };
  };
  const push = async (delivery: string) => {
    const r = await gw.app.inject(signedGithubPush(delivery));
    return { status: r.statusCode, id: r.statusCode === 202 ? (r.json().id as string) : undefined };
  };
  /** Ids of the writes in the branch inbox of whichever node is primary now. */
  const inboxIds = async (redis: Redis) => {
    const entries = await redis.xrange(branchKeys(prefix, BK).inbox, "-", "+");
    return new Set(entries.map(([, f]) => JSON.parse(f[3] as string).id as string));
  };

  it("answers 503 only during the failover and keeps every acknowledged write the replica had", {
    timeout: 90_000,
  }, async () => {
    const direct = client(`redis://127.0.0.1:${primaryPort}`);
    // A BullMQ consumer of the notices, as the worker runs one, connected through the sentinels.
    const consumed = new Set<string>();
    consumer = new Worker(
      QUEUES.notices,
      async (job) => {
        consumed.add(job.id as string);
      },
      { connection: bullConnection(url), prefix },
    );
    consumer.on("error", () => {});
    // A worker replica connected through the sentinels, on a branch of a real Git server, under a
    // prefix of its own (it consumes notices too).
    const git = await gitServer();
    const repoUrl = await git.createRepo("worked", { "README.md": "hi\n" });
    const workedKey = branchKey({ namespace: "team", name: "gp" }, repoUrl, "main");
    const wprefix = `${prefix}-w`;
    const spec = {
      key: workedKey,
      remote: { url: repoUrl },
      branch: "main",
      targets: [
        { ...TARGET, path: FOLDER, window: { idleMs: 20, maxMs: 100 }, scope: scopeOf(TARGET, [WEB_GRANT]) },
      ],
    };
    worker = new Replica({
      redisUrl: url,
      prefix: wprefix,
      cacheDir: join(dir, "worker"),
      sweepMs: 500,
      directory: { branch: async (key) => (key === workedKey ? spec : undefined) },
      log: silentLogger(),
      branch: { pollMs: 50 },
    });
    await worker.start();
    const intake = client(url);
    const signals = new Queue(QUEUES.branches, { connection: intake, prefix: wprefix });
    signals.on("error", () => {});
    const workerWrites: string[] = [];
    const giveWorker = async (value: string) => {
      const w = configMapWrite(workedKey, `cm-${value}`, value);
      expect((await acceptWrite(intake, wprefix, w, signals)).accepted).toBe(true);
      workerWrites.push(w.id);
    };
    const allPublished = (ids: string[]) => async () => {
      for (const id of ids) if (!(await intake.get(writePublishedKey(wprefix, id)))) return false;
      return true;
    };
    for (let i = 0; i < 5; i++) await giveWorker(`before-${i}`);
    await until(allPublished(workerWrites), "the worker to publish the writes before the kill", patience);
    let n = 0;
    const replicatedWrites: string[] = [];
    const replicatedNotices: string[] = [];

    // The replica is in sync (it acknowledges the primary's offset) before the WAIT gateway is
    // asked to confirm anything: until then it rightly refuses, as a replica still syncing holds
    // nothing it could be promoted with.
    await until(
      async () => (await direct.wait(1, 1000)) === 1,
      "the replica to acknowledge the primary",
      patience,
    );

    // Steady traffic, timing the accept with and without WAIT 1.
    const timings: Record<"async" | "wait", number[]> = { async: [], wait: [] };
    for (let i = 0; i < 100; i++) {
      for (const [which, g] of [
        ["async", gw],
        ["wait", gwWait],
      ] as const) {
        const t0 = performance.now();
        const r = await post(g, n++);
        timings[which].push(performance.now() - t0);
        expect(r.status, `${which} write ${i}`).toBe(202);
        replicatedWrites.push(r.id as string);
      }
    }
    for (let i = 0; i < 5; i++) {
      const r = await push(`steady-${i}`);
      expect(r.status).toBe(202);
      replicatedNotices.push(r.id as string);
    }
    await until(
      () => replicatedNotices.every((id) => consumed.has(id)),
      "the notices to be consumed",
      patience,
    );
    // The replica holds all of it once it acknowledged the primary's offset.
    expect(await direct.wait(1, 5000)).toBe(1);

    // The replica stops: the plain gateway acknowledges what only the primary holds, the WAIT
    // gateway refuses to.
    replica.kill("SIGSTOP");
    const unreplicated = await post(gw, n++);
    expect(unreplicated.status).toBe(202);
    const refused = await post(gwWait, n++);
    expect(refused.status).toBe(503);
    replica.kill("SIGCONT");
    expect(await direct.wait(1, 5000)).toBe(1);
    replicatedWrites.push(unreplicated.id as string);
    // The sentinels saw the replica stop; it must be healthy to them again to be promoted.
    await until(
      async () => {
        for (const s of sentinels) {
          const [replicaInfo] = (await s.call("SENTINEL", "REPLICAS", MASTER)) as string[][];
          const flags = replicaInfo?.[(replicaInfo?.indexOf("flags") ?? -2) + 1] ?? "";
          if (flags.includes("down") || flags.includes("disconnected")) return false;
        }
        return true;
      },
      "every sentinel to see the replica up again",
      patience,
    );

    // A burst in flight when the primary dies. Times are when each request started and ended.
    const burst: string[] = [];
    const answers: { start: number; end: number; status: number }[] = [];
    let signalledAt = Number.POSITIVE_INFINITY;
    let exitedAt = Number.POSITIVE_INFINITY;
    const acceptedAfterExit = () => answers.filter((a) => a.start > exitedAt && a.status === 202).length;
    const writer = async () => {
      while (acceptedAfterExit() < 40) {
        const start = performance.now();
        const r = await post(gw, n++);
        answers.push({ start, end: performance.now(), status: r.status });
        if (r.status === 202) burst.push(r.id as string);
        // Pacing a writer the gateway refused (503 while the primary is away), not a wait: no
        // condition ends it, the next write is the one that finds out.
        else await new Promise((r) => setTimeout(r, 10));
      }
    };
    const writers = [writer(), writer(), writer(), writer()];
    await until(() => burst.length >= 200, "200 acknowledged writes in the burst", patience);
    signalledAt = performance.now();
    await kill(primary);
    exitedAt = performance.now();
    await Promise.all(writers);
    // Only "not acknowledged, retry" while the primary is gone: never an error.
    expect(new Set(answers.map((a) => a.status))).toEqual(new Set([202, 503]));
    for (const a of answers.filter((a) => a.status === 503)) expect(a.end).toBeGreaterThan(signalledAt);
    // Once the promoted replica accepted one request, every request started later is accepted.
    const back = Math.min(...answers.filter((a) => a.start > exitedAt && a.status === 202).map((a) => a.end));
    const later = answers.filter((a) => a.start > back);
    expect(later.length).toBeGreaterThan(0);
    expect(later.every((a) => a.status === 202)).toBe(true);
    const during = answers.filter((a) => a.status === 503).length;
    const outageMs = back - exitedAt;
    const notice = await push("after-failover");
    expect(notice.status).toBe(202);

    // The promoted replica, found through the sentinels.
    const now = client(url);
    expect(((await now.call("ROLE")) as unknown[])[0]).toBe("master");
    const present = await inboxIds(now);
    for (const id of replicatedWrites) expect(present.has(id), `write ${id}`).toBe(true);
    const notices = new Queue(QUEUES.notices, { connection: now, prefix });
    for (const id of [...replicatedNotices, notice.id as string])
      expect(await notices.getJob(id), `notice ${id}`).toBeDefined();
    await notices.close();
    // The consumer's blocking connection followed the failover too.
    await until(
      () => consumed.has(notice.id as string),
      "the notice sent after the failover to be consumed",
      patience,
    );
    // Everything acknowledged after the failover is there; what is missing was acknowledged by
    // the old primary and not yet replicated when it died.
    const lost = burst.filter((id) => !present.has(id));

    // The worker kept its branch (or took it again) through the failover and publishes on.
    for (let i = 0; i < 5; i++) await giveWorker(`after-${i}`);
    await until(allPublished(workerWrites), "the worker to publish every write, before and after", patience);
    await signals.close();
    for (const id of burst.slice(burst.length - 40)) expect(present.has(id), `write ${id}`).toBe(true);

    const sorted = (xs: number[]) => [...xs].sort((a, b) => a - b);
    const a = sorted(timings.async);
    const w = sorted(timings.wait);
    console.log(
      JSON.stringify({
        acceptMs: {
          async: { p50: percentile(a, 50), p99: percentile(a, 99) },
          wait1: { p50: percentile(w, 50), p99: percentile(w, 99) },
        },
        burst: { acknowledged: burst.length, lostToFailover: lost.length },
        failover: { answered503: during, msUntilAcceptingAgain: Math.round(outageMs) },
      }),
    );
  });

  it("an old owner cannot publish over a new one, even when the failover lost the lease", {
    timeout: 30_000,
  }, async () => {
    const redis = client(url);
    const key = "lease-across-failover";
    const k = branchKeys(prefix, key);
    const r1 = new BranchLease(redis, prefix, key, "r1", 10_000);
    expect(await r1.acquire()).toBe(true);
    // The worst a failover does to a lease: the promoted replica never got the acquire, so the
    // lease is gone and the fence counter is back where it was before r1 took it.
    await redis.del(k.lease);
    await redis.decr(k.fence);
    const r2 = new BranchLease(redis, prefix, key, "r2", 10_000);
    expect(await r2.acquire()).toBe(true);
    expect(r2.fence).toBe(r1.fence);
    // The fence number repeated, the token did not: every fenced write of r1 now writes nothing.
    expect(r2.token).not.toBe(r1.token);
    const mark = fencedWrite("redis.call('SET', KEYS[2], ARGV[2])");
    expect(await mark(redis, k.lease, r1.token as string, [`${k.lease}:mark`], ["r1"])).toBe(false);
    expect(await mark(redis, k.lease, r2.token as string, [`${k.lease}:mark`], ["r2"])).toBe(true);
    expect(await redis.get(`${k.lease}:mark`)).toBe("r2");
    expect(await r1.holds()).toBe(false);

    // And Git: had r1 passed its check before losing the branch, its push names the tip it read,
    // which r2's publication moved; the compare-and-swap refuses it.
    const git = await gitServer();
    const remote = { url: await git.createRepo("site", { "a.yaml": "a: 0\n" }) };
    const sig = { name: "applygate", email: "applygate@example.com", timestamp: 1_700_000_000 };
    const repos = await Promise.all(["r1", "r2"].map((r) => BareRepo.open(join(dir, `${r}.git`))));
    const [old, fresh] = repos as [BareRepo, BareRepo];
    const { tip } = await old.fetchBranch(remote, "main");
    await fresh.fetchBranch(remote, "main");
    const theirs = await fresh.commitChanges(tip, [{ path: "a.yaml", content: "a: 2\n" }], {
      message: "r2",
      author: sig,
    });
    await fresh.push(remote, "main", tip, theirs!.commit, theirs!.newOids);
    const ours = await old.commitChanges(tip, [{ path: "a.yaml", content: "a: 1\n" }], {
      message: "r1",
      author: sig,
    });
    const err = await old.push(remote, "main", tip, ours!.commit, ours!.newOids).catch((e) => e);
    expect(err).toBeInstanceOf(PushRejectedError);
    expect(await git.tip("site")).toBe(theirs!.commit);
  });
});

describe("--redis-wait-replicas", () => {
  const load = (argv: string[]) => loadConfig({ w: gatewaySettings.redisWaitReplicas }, argv, {}).config.w;
  it("defaults to acknowledging once the primary holds it, and names itself on bad input", () => {
    expect(load([])).toBe(0);
    expect(load(["--redis-wait-replicas", "2"])).toBe(2);
    expect(() => load(["--redis-wait-replicas", "one"])).toThrow(
      /^invalid setting --redis-wait-replicas \(APPLYGATE_REDIS_WAIT_REPLICAS\): expected a number of replicas/,
    );
  });
});
