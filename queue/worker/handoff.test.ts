/**
 * The Redis side of balancing: a hand-over gives the lease back with a marker that keeps it from
 * the replica that handed it over and from replicas not taking hand-overs, until it lapses; and
 * the heartbeats that count the live replicas.
 */
import { afterEach, describe, expect, it } from "vitest";
import { type IsolatedRedis, isolatedRedis } from "../../test/redis/isolated.js";
import { untilWith } from "../../test/support/wait.js";
import { branchKeys, knownBranchesKey, replicaKey } from "../keys.js";
import { acquireLeases, BranchLease } from "./lease.js";
import { announce, leave } from "./presence.js";

const until = untilWith({ timeoutMs: 10_000, everyMs: 5 });

describe("a hand-over", () => {
  let r: IsolatedRedis;
  afterEach(async () => {
    await r.cleanup();
  });

  it("frees the lease for a replica taking hand-overs only, never the one that handed it over, until its marker lapses", async () => {
    r = await isolatedRedis("handoff");
    const a = new BranchLease(r.client, r.prefix, "k", "a", 5000);
    expect(await a.acquire()).toBe(true);
    expect(a.fence).toBe(1);
    // Only the holder hands over.
    const stranger = new BranchLease(r.client, r.prefix, "k", "z", 5000);
    stranger.token = "z:9";
    expect(await stranger.handOver(5000)).toBe(false);
    expect(await a.handOver(300)).toBe(true);
    expect(a.token).toBeUndefined();
    expect(await r.client.get(branchKeys(r.prefix, "k").lease)).toBeNull();
    expect(await r.client.get(branchKeys(r.prefix, "k").handoff)).toBe("a");

    expect(await new BranchLease(r.client, r.prefix, "k", "a", 5000).acquire(true)).toBe(false);
    expect(await new BranchLease(r.client, r.prefix, "k", "b", 5000).acquire(false)).toBe(false);
    const swept = await acquireLeases(r.client, r.prefix, ["k", "free"], "b", 5000, false);
    expect(swept.taken.map((l) => l.branchKey)).toEqual(["free"]);
    expect(swept.handedOver).toEqual(["k"]);
    expect(swept.heldForMs).toHaveLength(1);
    expect(swept.heldForMs[0]).toBeGreaterThan(0);
    expect(swept.heldForMs[0]).toBeLessThanOrEqual(300);

    // A replica under its share takes it; the marker goes with it, the fence grows.
    const c = (await acquireLeases(r.client, r.prefix, ["k"], "c", 5000, true)).taken[0] as BranchLease;
    expect(c.fence).toBe(2);
    expect(await r.client.get(branchKeys(r.prefix, "k").handoff)).toBeNull();
    await c.release();

    // Handed over again and nobody under its share: once the marker lapses anyone takes it back.
    const c2 = new BranchLease(r.client, r.prefix, "k", "c", 5000);
    expect(await c2.acquire()).toBe(true);
    expect(await c2.handOver(100)).toBe(true);
    expect(await c2.acquire()).toBe(false);
    await until(async () => c2.acquire(false), "the marker to lapse");
    expect(c2.fence).toBe(4);
  });
});

describe("heartbeats", () => {
  let r: IsolatedRedis;
  afterEach(async () => {
    await r.cleanup();
  });

  it("count the replicas alive and the branches known; a stop or a lapse leaves the count", async () => {
    r = await isolatedRedis("presence");
    await r.client.sadd(knownBranchesKey(r.prefix), "x", "y", "z");
    expect(await announce(r.client, r.prefix, "a", 5000, 3)).toEqual({ live: 1, known: 3 });
    expect(await announce(r.client, r.prefix, "b", 5000, 0)).toEqual({ live: 2, known: 3 });
    expect(JSON.parse((await r.client.get(replicaKey(r.prefix, "a"))) as string)).toMatchObject({ owned: 3 });
    expect(await r.client.pttl(replicaKey(r.prefix, "a"))).toBeGreaterThan(0);
    // Announcing again refreshes, it does not count twice.
    expect(await announce(r.client, r.prefix, "a", 5000, 2)).toEqual({ live: 2, known: 3 });
    await leave(r.client, r.prefix, "b");
    expect(await r.client.exists(replicaKey(r.prefix, "b"))).toBe(0);
    expect((await announce(r.client, r.prefix, "a", 5000, 2)).live).toBe(1);
    // A replica that stops announcing drops out when its heartbeat lapses.
    await announce(r.client, r.prefix, "c", 100, 0);
    expect((await announce(r.client, r.prefix, "a", 5000, 2)).live).toBe(2);
    await until(async () => (await announce(r.client, r.prefix, "a", 5000, 2)).live === 1, "c to lapse");
  });
});
