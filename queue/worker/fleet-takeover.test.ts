/**
 * Taking many branches at once: a sweep takes every lease nobody holds in one pipelined round
 * trip before starting any branch worker, a lease another replica holds is taken as soon as it
 * lapses (not a sweep period later), and the first reads of the remote are bounded.
 */
import { afterEach, describe, expect, it } from "vitest";
import { type IsolatedRedis, isolatedRedis } from "../../test/redis/isolated.js";
import { untilWith } from "../../test/support/wait.js";
import { branchKeys, knownBranchesKey } from "../keys.js";
import { silentLogger } from "../log.js";
import { acquireLeases, BranchLease } from "./lease.js";
import { Replica } from "./replica.js";
import { Slots } from "./slots.js";

const until = untilWith({ timeoutMs: 10_000, everyMs: 5 });

describe("acquireLeases", () => {
  let r: IsolatedRedis;
  afterEach(async () => {
    await r.cleanup();
  });

  it("takes every free lease in one pipeline, keeps its own, and says when the others lapse", async () => {
    r = await isolatedRedis("leases");
    const keys = Array.from({ length: 1200 }, (_, i) => `k${i}`);
    const other = new BranchLease(r.client, r.prefix, "k7", "other", 5000);
    expect(await other.acquire()).toBe(true);
    const mine = new BranchLease(r.client, r.prefix, "k8", "me", 5000);
    expect(await mine.acquire()).toBe(true);
    const { taken, heldForMs } = await acquireLeases(r.client, r.prefix, keys, "me", 5000);
    expect(taken.length).toBe(1199);
    expect(taken.find((l) => l.branchKey === "k8")?.token).toBe(mine.token);
    expect(taken.some((l) => l.branchKey === "k7")).toBe(false);
    expect(heldForMs).toHaveLength(1);
    expect(heldForMs[0]).toBeGreaterThan(0);
    expect(heldForMs[0]).toBeLessThanOrEqual(5000);
    // Every lease taken is fenced and renewable like one taken alone.
    const k0 = taken.find((l) => l.branchKey === "k0") as BranchLease;
    expect(await r.client.get(branchKeys(r.prefix, "k0").lease)).toBe(k0.token);
    expect(k0.fence).toBe(1);
    expect(await k0.renew()).toBe(true);
    expect(await other.renew()).toBe(true);
    // Scripts run by their SHA; a Redis that forgot them (a restart, a failover) is sent them again.
    await r.client.script("FLUSH");
    expect(await k0.renew()).toBe(true);
    expect((await acquireLeases(r.client, r.prefix, ["fresh"], "me", 5000)).taken).toHaveLength(1);
  });
});

describe("a replica's sweep", () => {
  let r: IsolatedRedis;
  let replica: Replica | undefined;
  afterEach(async () => {
    await replica?.stop();
    replica = undefined;
    await r.cleanup();
  });

  it("takes a lease another replica held within a few milliseconds of its lapse, not a sweep period later", async () => {
    r = await isolatedRedis("sweep");
    const keys = ["a", "b", "c"];
    await r.client.sadd(knownBranchesKey(r.prefix), ...keys);
    // A dead replica's leases, lapsing at different times.
    for (const [i, k] of keys.entries()) {
      await r.client.set(branchKeys(r.prefix, k).lease, `dead:${i + 1}`, "PX", 300 + 200 * i);
    }
    const lapsesAt = Date.now() + 700;
    replica = new Replica({
      redisUrl: r.url,
      prefix: r.prefix,
      cacheDir: "/nonexistent",
      // A sweep period far longer than the lapse: only a sweep at the lapse takes the branches.
      sweepMs: 60_000,
      leaseMs: 10_000,
      directory: { branch: async () => undefined },
      log: silentLogger(),
    });
    const takenAt = new Map<string, number>();
    await replica.start();
    await until(async () => {
      for (const k of keys) {
        // No GitTarget names these branches: the replica takes the lease, finds no spec and gives
        // it back; the fence it moved on stays.
        if (!takenAt.has(k) && (await r.client.get(branchKeys(r.prefix, k).fence)) === "1")
          takenAt.set(k, Date.now());
      }
      return takenAt.size === keys.length;
    }, "every lapsed lease taken");
    expect(Math.max(...takenAt.values()) - lapsesAt).toBeLessThan(1000);
  });
});

describe("Slots", () => {
  it("lets at most `size` hold at once, in arrival order, and an aborted wait holds nothing", async () => {
    const s = new Slots(2);
    const a = await s.acquire();
    const b = await s.acquire();
    const order: string[] = [];
    const c = s.acquire().then((rel) => {
      order.push("c");
      return rel;
    });
    const ctl = new AbortController();
    const d = s.acquire(ctl.signal);
    const e = s.acquire().then((rel) => {
      order.push("e");
      return rel;
    });
    expect(s.usage).toEqual({ held: 2, waiting: 3 });
    ctl.abort(new Error("stopping"));
    await expect(d).rejects.toThrow("stopping");
    a();
    a(); // a second release of one slot gives nothing back
    const rc = await c;
    expect(order).toEqual(["c"]);
    expect(s.usage).toEqual({ held: 2, waiting: 1 });
    b();
    const re = await e;
    expect(order).toEqual(["c", "e"]);
    rc();
    re();
    expect(s.usage).toEqual({ held: 0, waiting: 0 });
  });
});
