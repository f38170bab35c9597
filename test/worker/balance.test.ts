/**
 * Balancing between worker replicas, with real Redis and the real Git server: a replica started
 * after another took every branch ends with about half of them, a third with about a third, within
 * a bounded time; a branch is never owned by two replicas at once (the branch workers' lives and
 * the lease records say so), a busy branch never moves, and every write sent meanwhile is
 * published exactly once. BALANCE_N sets the number of branches (default 20).
 *
 * These are claims about hand-overs. A lease lapses when its renewals stop for two renewal periods:
 * the whole process or Redis paused, or Redis's clock jumped ahead (a VM restored from a snapshot
 * expires every lease in Redis at once). Then other replicas take the branch, and its old owner
 * stops at its next renewal: its worker outlives the lease by up to a renewal period, which
 * fencing makes harmless (test/worker/takeover.test.ts). The test samples pauses all along: a
 * lease lost without one fails it; one lost after one exempts that branch's hand-over claims
 * (never two workers at once, the busy branch stays, no more moves than the split needs), never
 * the fencing and publication claims.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Queue } from "bullmq";
import { afterEach, describe, expect, it } from "vitest";
import { type AcceptedWrite, branchKey, QUEUES } from "../../queue/contract.js";
import type { BranchSpec } from "../../queue/directory.js";
import { acceptWrite } from "../../queue/intake.js";
import { branchKeys, knownBranchesKey, writePublishedKey } from "../../queue/keys.js";
import { scopeOf } from "../../queue/scope.js";
import { WRITE_TRAILER } from "../../queue/worker/commit-content.js";
import { Replica } from "../../queue/worker/replica.js";
import { gitOk } from "../git/cli.js";
import { type GitServer, startGitServer } from "../git/server.js";
import { type IsolatedRedis, isolatedRedis } from "../redis/isolated.js";
import { capturingLogger } from "../support/log-lines.js";
import { failureContext } from "../support/print-failures.js";
import { until } from "../support/wait.js";
import { configMapWrite, FOLDER, TARGET, WEB_GRANT } from "./harness.js";

const N = Number(process.env.BALANCE_N ?? 20);
const LEASE_MS = 3000;
const SWEEP_MS = 500;
/** The replicas renew every lease each third of it: a pause this long is one renewal missed. */
const RENEW_MS = LEASE_MS / 3;

interface Life {
  replica: string;
  key: string;
  fence: number | undefined;
  start: number;
  end?: number;
}

const LOG_TITLE = "the replicas' log lines";

describe("balancing branches between replicas", () => {
  let git: GitServer | undefined;
  let r: IsolatedRedis | undefined;
  let dir: string | undefined;
  let branches: Queue | undefined;
  const replicas: Replica[] = [];
  let sampling = false;
  let writing = false;
  afterEach(async () => {
    failureContext.delete(LOG_TITLE);
    sampling = false;
    writing = false;
    for (const x of replicas.splice(0)) await x.stop();
    await branches?.close();
    await git?.close();
    await r?.cleanup();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it(
    `a second replica started after the first took ${N} branches gets half, a third a third; nothing owned twice, every write published once`,
    async () => {
      git = await startGitServer();
      r = await isolatedRedis("balance");
      dir = await mkdtemp(join(tmpdir(), "applygate-balance-"));
      const url = await git.createRepo("site", { [`${FOLDER}/README.md`]: "dev\n" });
      const bare = join(git.root, "site.git");
      const initial = (await git.tip("site")) as string;
      const names = Array.from({ length: N }, (_, i) => `b${i}`);
      for (const name of names) await gitOk(["update-ref", `refs/heads/${name}`, initial], { cwd: bare });
      const specs = new Map<string, BranchSpec>();
      for (const name of names) {
        const key = branchKey({ namespace: "team", name: "gp" }, url, name);
        specs.set(key, {
          key,
          remote: { url },
          branch: name,
          targets: [
            {
              ...TARGET,
              path: FOLDER,
              window: { idleMs: 30, maxMs: 200 },
              scope: scopeOf(TARGET, [WEB_GRANT]),
            },
          ],
        });
      }
      const keys = [...specs.keys()];
      await r.client.sadd(knownBranchesKey(r.prefix), ...keys);
      branches = new Queue(QUEUES.branches, { connection: r.client, prefix: r.prefix });

      // A busy branch (its attachment says an attempt is out): it must never move.
      const busy = keys[0] as string;
      const lives: Life[] = [];
      const redis = r;
      // Warnings kept (more with APPLYGATE_TEST_LOG), printed if the test fails; they name the leases lost.
      const lines: string[] = [];
      failureContext.set(LOG_TITLE, () => lines.map((l) => `${l}\n`).join(""));
      const start = (id: string) => {
        const { log } = capturingLogger({ replica: id }, lines);
        log.level = process.env.APPLYGATE_TEST_LOG ?? "warn";
        const replica = new Replica({
          replicaId: id,
          redisUrl: redis.url,
          prefix: redis.prefix,
          cacheDir: join(dir as string, id),
          leaseMs: LEASE_MS,
          sweepMs: SWEEP_MS,
          directory: { branch: async (k) => specs.get(k) },
          log,
          branch: { pollMs: 50 },
          attach: (ctx) => {
            const life: Life = {
              replica: id,
              key: ctx.key,
              fence: ctx.lease.fence,
              start: performance.now(),
            };
            return {
              hooks: {},
              quiet: () => ctx.key !== busy,
              start() {
                lives.push(life);
              },
              async stop() {
                life.end ??= performance.now();
              },
            };
          },
        });
        replicas.push(replica);
        return replica;
      };

      // The lease records, sampled all along: one holder per fence, fences only growing. The longest
      // pause seen between two samples, on the monotonic clock or as a step of the wall clock.
      const holders = new Map<string, Map<number, string>>();
      const lastFence = new Map<string, number>();
      sampling = true;
      const problems: string[] = [];
      let pausedMs = 0;
      const sampler = (async () => {
        let at = performance.now();
        let wall = Date.now();
        while (sampling) {
          const [nowAt, nowWall] = [performance.now(), Date.now()];
          pausedMs = Math.max(pausedMs, nowAt - at, Math.abs(nowWall - wall - (nowAt - at)));
          [at, wall] = [nowAt, nowWall];
          // A failed test's cleanup closes the connection under a sample: that sample is not a finding.
          const values = await redis.client
            .mget(...keys.map((k) => branchKeys(redis.prefix, k).lease))
            .catch(() => [] as Array<string | null>);
          values.forEach((v, i) => {
            if (!v) return;
            const key = keys[i] as string;
            const at = v.lastIndexOf(":");
            const holder = v.slice(0, at);
            const fence = Number(v.slice(at + 1));
            const byFence = holders.get(key) ?? new Map<number, string>();
            holders.set(key, byFence);
            const was = byFence.get(fence);
            if (was !== undefined && was !== holder)
              problems.push(`${key} fence ${fence}: ${was} and ${holder}`);
            byFence.set(fence, holder);
            if (fence < (lastFence.get(key) ?? 0)) problems.push(`${key}: fence went back to ${fence}`);
            lastFence.set(key, fence);
          });
          await new Promise((res) => setTimeout(res, 10));
        }
      })();

      const r1 = start("r1");
      await r1.start();
      await until(() => r1.owned().length === N, "the first replica to own every branch", {
        timeoutMs: 120_000,
        everyMs: 20,
      });

      // Writes to every branch, round robin, all through the hand-overs.
      const sent: AcceptedWrite[] = [];
      writing = true;
      const writer = (async () => {
        for (let i = 0; writing; i++) {
          const key = keys[i % N] as string;
          const w = configMapWrite(key, `cm-${i % 7}`, `v${i}`);
          const { accepted } = await acceptWrite(redis.client, redis.prefix, w, branches as Queue);
          if (accepted) sent.push(w);
          await new Promise((res) => setTimeout(res, 100));
        }
      })();

      const spread = (rs: Replica[]) => {
        const counts = rs.map((x) => x.owned().length);
        const share = Math.ceil(N / rs.length);
        const slack = Math.max(1, Math.floor(share / 10));
        // Every branch owned, none over its share and slack, none far under it.
        return (
          counts.reduce((a, b) => a + b, 0) === N &&
          counts.every((c) => c <= share + slack && c >= share - 2 * slack - 1) &&
          counts
        );
      };

      const t2 = performance.now();
      const r2 = start("r2");
      await r2.start();
      const two = await until(() => spread([r1, r2]), "the second replica to get about half", {
        timeoutMs: 60_000 + N * 500,
        everyMs: 20,
      });
      const splitTwo = performance.now() - t2;

      const t3 = performance.now();
      const r3 = start("r3");
      await r3.start();
      const three = await until(() => spread([r1, r2, r3]), "the third replica to get about a third", {
        timeoutMs: 60_000 + N * 500,
        everyMs: 20,
      });
      const splitThree = performance.now() - t3;
      process.stderr.write(
        `balance N=${N}: two replicas ${two.join("/")} after ${(splitTwo / 1000).toFixed(1)} s, three ${three.join("/")} after ${(splitThree / 1000).toFixed(1)} s\n`,
      );

      writing = false;
      await writer;
      expect(sent.length).toBeGreaterThan(20);
      await until(
        async () => {
          const got = await redis.client.mget(...sent.map((w) => writePublishedKey(redis.prefix, w.id)));
          return got.every((v) => v !== null);
        },
        "every write published",
        { timeoutMs: 60_000, everyMs: 100 },
      );
      sampling = false;
      await sampler;

      // Exactly once in Git: each write's trailer on its branch once.
      const byBranch = new Map<string, Set<string>>();
      for (const w of sent) byBranch.set(w.branchKey, (byBranch.get(w.branchKey) ?? new Set()).add(w.id));
      for (const [key, ids] of byBranch) {
        const spec = specs.get(key) as BranchSpec;
        const text = await gitOk(["log", "--format=%B", spec.branch], { cwd: bare });
        const counts = new Map<string, number>();
        for (const line of text.split("\n"))
          if (line.startsWith(`${WRITE_TRAILER}: `)) {
            const id = line.slice(WRITE_TRAILER.length + 2).trim();
            counts.set(id, (counts.get(id) ?? 0) + 1);
          }
        for (const id of ids) expect(counts.get(id), `${spec.branch} ${id}`).toBe(1);
      }

      // Leases lost (a renewal or a fenced write found another owner): only after a pause.
      const lost = new Set(
        lines
          .map((l) => JSON.parse(l) as { level: number; msg: string; replica: string; branch?: string })
          .filter((l) => l.level >= 40 && l.msg.startsWith("lost the"))
          .map((l) => `${l.replica} ${l.branch}`),
      );
      if (lost.size > 0) {
        process.stderr.write(
          `balance: paused ${Math.round(pausedMs)} ms; leases lost: ${[...lost].join(", ")}\n`,
        );
        expect(pausedMs, `leases lost without a pause: ${[...lost].join(", ")}`).toBeGreaterThanOrEqual(
          RENEW_MS,
        );
      }

      // Never owned twice: per branch the branch workers' lives follow one another, fences growing.
      expect(problems).toEqual([]);
      let moved = 0;
      for (const key of keys) {
        const of = lives.filter((l) => l.key === key).sort((a, b) => a.start - b.start);
        for (let i = 1; i < of.length; i++) {
          const prev = of[i - 1] as Life;
          const cur = of[i] as Life;
          expect(
            prev.end,
            `${key}: ${prev.replica} still owned it when ${cur.replica} took it`,
          ).toBeDefined();
          if (!lost.has(`${prev.replica} ${key}`))
            expect(
              prev.end as number,
              `${key}: ${prev.replica} handed it over while running`,
            ).toBeLessThanOrEqual(cur.start);
          expect(cur.fence as number).toBeGreaterThan(prev.fence as number);
          moved++;
        }
        // Every fence a lease record named belongs to a branch worker of that replica.
        for (const [fence, holder] of holders.get(key) ?? [])
          expect(
            of.some((l) => l.fence === fence && l.replica === holder),
            `${key} fence ${fence}`,
          ).toBe(true);
      }
      // The busy branch stayed where it was.
      if (![...lost].some((l) => l.endsWith(` ${busy}`)))
        expect(lives.filter((l) => l.key === busy).map((l) => l.replica)).toEqual(["r1"]);
      // No ping-pong: moves are about what the split needs (half, then a third), not many more.
      if (lost.size === 0) expect(moved).toBeLessThanOrEqual(N);
    },
    Math.max(300_000, N * 3000),
  );
});
