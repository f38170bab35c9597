/**
 * Taking many branches at once: a sweep takes every lease nobody holds in one pipelined round
 * trip and hands the branches to a start queue, a lease another replica holds is taken as soon as
 * it lapses (not a sweep period later, nor after the branches of the last sweep started), a stop
 * gives back the leases of branches never started, and the first reads of the remote are bounded.
 */
import { afterEach, describe, expect, it } from "vitest";
import { type IsolatedRedis, isolatedRedis } from "../../test/redis/isolated.js";
import { capturingLogger } from "../../test/support/log-lines.js";
import { untilWith } from "../../test/support/wait.js";
import { branchKeys, knownBranchesKey } from "../keys.js";
import { silentLogger } from "../log.js";
import { Slots } from "../slots.js";
import { acquireLeases, BranchLease } from "./lease.js";
import { Replica } from "./replica.js";

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

  /** A directory whose lookups wait until `open()`: branch workers that are slow to start. */
  function slowDirectory() {
    let open = () => {};
    const gate = new Promise<void>((r) => {
      open = r;
    });
    const asked = new Set<string>();
    return {
      asked,
      open,
      // No GitTarget names these branches: once the gate opens each start gives its lease back.
      directory: {
        branch: async (key: string) => {
          asked.add(key);
          await gate;
          return undefined;
        },
      },
    };
  }

  const holders = async (keys: string[]) => {
    const pipe = r.client.pipeline();
    for (const k of keys) pipe.get(branchKeys(r.prefix, k).lease);
    return ((await pipe.exec()) ?? []).map(([, v]) => v as string | null);
  };

  it("takes leases that lapse while the branches of the last sweep are still starting, at their lapse", async () => {
    r = await isolatedRedis("sweep-slow");
    // More free branches than start at once, each slow to start: the first sweep takes them all.
    const slow = Array.from({ length: 40 }, (_, i) => `slow${i}`);
    // A dead replica's leases, lapsing one after another while those starts are under way.
    const lapsing = ["l0", "l1", "l2"];
    await r.client.sadd(knownBranchesKey(r.prefix), ...slow, ...lapsing);
    const lapsesAt = new Map<string, number>();
    for (const [i, k] of lapsing.entries()) {
      const ttl = 300 + 600 * i;
      await r.client.set(branchKeys(r.prefix, k).lease, `dead:${i + 1}`, "PX", ttl);
      lapsesAt.set(k, Date.now() + ttl);
    }
    const s = slowDirectory();
    const leaseMs = 2000;
    replica = new Replica({
      redisUrl: r.url,
      prefix: r.prefix,
      cacheDir: "/nonexistent",
      replicaId: "me",
      sweepMs: 500,
      leaseMs,
      directory: s.directory,
      log: silentLogger(),
    });
    const t0 = Date.now();
    // Resolves once the branches of its first sweep started: not before the gate opens.
    const started = replica.start();
    try {
      const takenAt = new Map<string, number>();
      await until(
        async () => {
          const now = Date.now();
          for (const [i, h] of (await holders(lapsing)).entries()) {
            const k = lapsing[i] as string;
            if (!takenAt.has(k) && h?.startsWith("me:")) takenAt.set(k, now);
          }
          // Past a lease's time too, to see the slow branches' leases renewed while they wait.
          return takenAt.size === lapsing.length && now - t0 > leaseMs + 500;
        },
        "the lapsed leases taken while the first sweep's branches start",
        8_000,
      );
      for (const k of lapsing) {
        expect(takenAt.get(k), k).toBeDefined();
        // About one sweep period after its lapse, however long the earlier starts take.
        expect((takenAt.get(k) as number) - (lapsesAt.get(k) as number), k).toBeLessThan(1000);
      }
      // Every slow branch is still ours: started at once (32) or waiting its turn (8), each renewed.
      expect(s.asked.size).toBe(32);
      expect((await holders(slow)).every((h) => h?.startsWith("me:"))).toBe(true);
    } finally {
      s.open();
      await started;
    }
    // Once the gate opens every start ends: no GitTarget names them, their leases go back.
    await until(
      async () => (await holders([...slow, ...lapsing])).every((h) => h === null),
      "every lease given back",
    );
    expect(s.asked.size).toBe(slow.length + lapsing.length);
  });

  it("does not start a branch whose lease another replica took while it waited to start", async () => {
    r = await isolatedRedis("sweep-lost");
    const keys = Array.from({ length: 40 }, (_, i) => `b${i}`);
    await r.client.sadd(knownBranchesKey(r.prefix), ...keys);
    const s = slowDirectory();
    const { log, lines } = capturingLogger();
    replica = new Replica({
      redisUrl: r.url,
      prefix: r.prefix,
      cacheDir: "/nonexistent",
      replicaId: "me",
      sweepMs: 60_000,
      leaseMs: 600,
      directory: s.directory,
      log,
    });
    const started = replica.start();
    try {
      await until(async () => s.asked.size === 32, "32 branches starting");
      const lost = keys.find((k) => !s.asked.has(k)) as string;
      // Its lease lapsed (a stalled renewal) and another replica took it.
      await r.client.set(branchKeys(r.prefix, lost).lease, "other:99", "PX", 60_000);
      await until(
        () =>
          lines.some(
            (l) =>
              l.includes('"lost the lease of a branch still starting') && l.includes(`"branch":"${lost}"`),
          ),
        "the renewal to find the lease lost",
      );
      s.open();
      await started;
      expect(s.asked.has(lost)).toBe(false);
      expect(s.asked.size).toBe(keys.length - 1);
      expect(await r.client.get(branchKeys(r.prefix, lost).lease)).toBe("other:99");
    } finally {
      s.open();
      await started;
    }
  });

  it("says once that no GitTarget names a known branch, however many sweeps ask again", async () => {
    // A GitTarget deleted leaves its branch known: every sweep takes the free lease, finds no
    // GitTarget and gives it back. On the real tier a worker restarted after four scenarios warned
    // for their four branches every sweep (2 s) until it stopped.
    r = await isolatedRedis("sweep-unnamed");
    await r.client.sadd(knownBranchesKey(r.prefix), "gone-a", "gone-b");
    const asked: string[] = [];
    const { log, lines } = capturingLogger();
    replica = new Replica({
      redisUrl: r.url,
      prefix: r.prefix,
      cacheDir: "/nonexistent",
      sweepMs: 50,
      leaseMs: 10_000,
      directory: {
        branch: async (key) => {
          asked.push(key);
          return undefined;
        },
      },
      log,
    });
    await replica.start();
    await until(
      () =>
        asked.filter((k) => k === "gone-a").length >= 5 && asked.filter((k) => k === "gone-b").length >= 5,
      "five sweeps asking for each branch",
    );
    const warned = lines
      .filter((l) => l.includes('"level":40') && l.includes("no GitTarget names this branch"))
      .map((l) => (JSON.parse(l) as { branch: string }).branch)
      .sort();
    expect(warned).toEqual(["gone-a", "gone-b"]);
    // The lease goes back each time: another replica may take the branch once a GitTarget names it.
    await replica.stop();
    replica = undefined;
    expect(await holders(["gone-a", "gone-b"])).toEqual([null, null]);
  });

  it("a stop during the starts waits for those in flight and gives back the leases of branches never started", async () => {
    r = await isolatedRedis("sweep-stop");
    const keys = Array.from({ length: 40 }, (_, i) => `b${i}`);
    await r.client.sadd(knownBranchesKey(r.prefix), ...keys);
    const s = slowDirectory();
    const stopping = new Replica({
      redisUrl: r.url,
      prefix: r.prefix,
      cacheDir: "/nonexistent",
      replicaId: "me",
      sweepMs: 60_000,
      leaseMs: 10_000,
      directory: s.directory,
      log: silentLogger(),
    });
    const started = stopping.start();
    let stopped: Promise<void> | undefined;
    try {
      await until(async () => s.asked.size === 32, "32 branches starting");
      expect((await holders(keys)).every((h) => h?.startsWith("me:"))).toBe(true);
      let done = false;
      stopped = stopping.stop().then(() => {
        done = true;
      });
      const inFlight = keys.filter((k) => s.asked.has(k));
      const never = keys.filter((k) => !s.asked.has(k));
      expect(never).toHaveLength(8);
      // Within a round trip, not at their lapse 10 s later.
      await until(
        async () => (await holders(never)).every((h) => h === null),
        "the leases of branches never started given back",
        3_000,
      );
      // The starts in flight keep theirs, and the stop waits for them.
      expect((await holders(inFlight)).every((h) => h?.startsWith("me:"))).toBe(true);
      expect(done).toBe(false);
      s.open();
      await stopped;
      expect((await holders(keys)).every((h) => h === null)).toBe(true);
      // Nothing the stop gave back was started after it.
      expect(s.asked.size).toBe(32);
    } finally {
      s.open();
      await stopped;
      await started;
    }
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
