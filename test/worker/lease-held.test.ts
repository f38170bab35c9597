/**
 * A replica renews a branch's lease for as long as it holds it, not only while the branch worker
 * runs: while a claim starts the worker (the branch looked up, its repository opened), while a
 * hand-over stops it, and while the replica's stop stops its workers one after another. A start
 * or a stop slower than the lease would otherwise let the lease lapse, and another replica would
 * run the branch beside ours. Here the lease is 600 ms and the slow part takes 1.2 s.
 */
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { branchKey } from "../../queue/contract.js";
import type { BranchSpec } from "../../queue/directory.js";
import { branchKeys, knownBranchesKey } from "../../queue/keys.js";
import { silentLogger } from "../../queue/log.js";
import { Replica, type ReplicaOptions } from "../../queue/worker/replica.js";
import { gitOk } from "../git/cli.js";
import { HARNESS_PROVIDER, type Harness, harness, waitFor } from "./harness.js";

const LEASE_MS = 600;
const SLOW_MS = 1200;

interface Life {
  replica: string;
  key: string;
  start: number;
  end?: number;
}

describe("a lease held while no branch worker runs on it", () => {
  let h: Harness | undefined;
  const replicas: Replica[] = [];
  const lives: Life[] = [];
  afterEach(async () => {
    for (const x of replicas.splice(0)) await x.stop();
    await h?.close();
    lives.splice(0);
  });

  /** `n` branches of the harness's repository, each a GitTarget's. */
  async function branches(n: number): Promise<Map<string, BranchSpec>> {
    h = await harness();
    const tip = (await h.server.tip("site")) as string;
    const specs = new Map<string, BranchSpec>();
    for (let i = 0; i < n; i++) {
      await gitOk(["update-ref", `refs/heads/b${i}`, tip], { cwd: join(h.server.root, "site.git") });
      const key = branchKey(HARNESS_PROVIDER, h.url, `b${i}`);
      specs.set(key, { ...h.spec, key, branch: `b${i}` });
    }
    return specs;
  }

  function replica(
    id: string,
    specs: Map<string, BranchSpec>,
    o: { slowStop?: boolean; slowLookup?: boolean } & Pick<ReplicaOptions, "balance" | "sweepMs">,
  ): Replica {
    const hh = h as Harness;
    const x = new Replica({
      replicaId: id,
      redisUrl: hh.redis.url,
      prefix: hh.redis.prefix,
      cacheDir: join(hh.dir, id),
      leaseMs: LEASE_MS,
      sweepMs: o.sweepMs ?? 100,
      ...(o.balance !== undefined ? { balance: o.balance } : {}),
      directory: {
        branch: async (k) => {
          if (o.slowLookup) await new Promise((r) => setTimeout(r, SLOW_MS));
          return specs.get(k);
        },
      },
      log: silentLogger(),
      branch: { pollMs: 50 },
      attach: (ctx) => {
        const life: Life = { replica: id, key: ctx.key, start: performance.now() };
        lives.push(life);
        return {
          hooks: {},
          start() {},
          async stop() {
            if (o.slowStop) await new Promise((r) => setTimeout(r, SLOW_MS));
            life.end ??= performance.now();
          },
        };
      },
    });
    replicas.push(x);
    return x;
  }

  /** Per branch, each life ended before the next began. */
  function neverTwice() {
    const keys = new Set(lives.map((l) => l.key));
    for (const key of keys) {
      const of = lives.filter((l) => l.key === key).sort((a, b) => a.start - b.start);
      for (let i = 1; i < of.length; i++) {
        const [prev, cur] = [of[i - 1] as Life, of[i] as Life];
        expect(prev.end, `${key}: ${prev.replica} still ran it when ${cur.replica} took it`).toBeDefined();
        expect(prev.end as number, `${key}: ${prev.replica} then ${cur.replica}`).toBeLessThanOrEqual(
          cur.start,
        );
      }
    }
  }

  it("while the replica's stop stops its branch workers one after another", async () => {
    const specs = await branches(3);
    const hh = h as Harness;
    await hh.redis.client.sadd(knownBranchesKey(hh.redis.prefix), ...specs.keys());
    const a = replica("a", specs, { slowStop: true, balance: false });
    await a.start();
    await waitFor("a to own every branch", () => a.owned().length === 3);
    const b = replica("b", specs, { balance: false });
    await b.start();
    await a.stop();
    await waitFor("b to own every branch", () => b.owned().length === 3);
    neverTwice();
  });

  it("while a hand-over stops the branch worker", async () => {
    const specs = await branches(4);
    const hh = h as Harness;
    await hh.redis.client.sadd(knownBranchesKey(hh.redis.prefix), ...specs.keys());
    const a = replica("a", specs, { slowStop: true, balance: { minHoldMs: 0 } });
    await a.start();
    await waitFor("a to own every branch", () => a.owned().length === 4);
    const b = replica("b", specs, { balance: { minHoldMs: 0 } });
    await b.start();
    await waitFor("b to get half", () => b.owned().length === 2 && a.owned().length === 2);
    neverTwice();
  });

  it("while a claim starts the branch worker", async () => {
    const specs = await branches(1);
    const hh = h as Harness;
    const [key] = [...specs.keys()] as [string];
    // No sweep of a's for a minute: the branch is a's through its claim only.
    const a = replica("a", specs, { slowLookup: true, sweepMs: 60_000 });
    await a.start();
    await hh.redis.client.sadd(knownBranchesKey(hh.redis.prefix), key);
    const claimed = a.claim(key);
    await waitFor("a's lease", () => hh.redis.client.get(branchKeys(hh.redis.prefix, key).lease));
    const b = replica("b", specs, {});
    await b.start();
    await claimed;
    // b sweeps ten times while a looks the branch up and starts it.
    await waitFor("a to own the branch", () => a.owned().length === 1);
    expect(b.owned()).toEqual([]);
    neverTwice();
  });
});
