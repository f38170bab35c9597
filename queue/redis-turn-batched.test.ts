/**
 * The gateway's request connection sends the commands of one event-loop turn in one write, and
 * holds none past that turn: under load the requests handled in a turn cost Redis one read and the
 * gateway one system call, while a lone request's command leaves at once.
 */
import { once } from "node:events";
import type { Redis } from "ioredis";
import { afterEach, describe, expect, it } from "vitest";
import { type IsolatedRedis, isolatedRedis } from "../test/redis/isolated.js";
import { connectRedis, TurnBatchedRedis } from "./redis.js";

/** Connects and counts the socket writes (one per system call) the connection makes from now on. */
async function counted(redis: Redis): Promise<{ writes: () => number }> {
  if (redis.status !== "ready") await once(redis, "ready");
  const socket = redis.stream;
  let writes = 0;
  const write = socket._write.bind(socket);
  const writev = socket._writev!.bind(socket);
  socket._write = (...args) => {
    writes++;
    write(...args);
  };
  socket._writev = (...args) => {
    writes++;
    writev(...args);
  };
  return { writes: () => writes };
}

describe("TurnBatchedRedis", () => {
  let r: IsolatedRedis;
  const connections: Redis[] = [];
  afterEach(async () => {
    for (const c of connections.splice(0)) c.disconnect();
    await r.cleanup();
  });
  const connect = (Client?: typeof Redis) => {
    const c = connectRedis(r.url, {}, Client);
    connections.push(c);
    return c;
  };
  const incrementTwenty = (c: Redis, key: string) =>
    Promise.all(Array.from({ length: 20 }, () => c.incr(key)));

  it("sends the commands of one turn in one write, each answered in order", async () => {
    r = await isolatedRedis("turn");
    const batched = connect(TurnBatchedRedis);
    const plain = connect();
    const [b, p] = [await counted(batched), await counted(plain)];
    const [fromBatched, fromPlain] = await Promise.all([
      incrementTwenty(batched, `${r.prefix}:b`),
      incrementTwenty(plain, `${r.prefix}:p`),
    ]);
    expect(fromBatched).toEqual(Array.from({ length: 20 }, (_, i) => i + 1));
    expect(b.writes()).toBe(1);
    // What the batching saves: a plain connection writes each command as it is sent.
    expect(fromPlain).toEqual(fromBatched);
    expect(p.writes()).toBeGreaterThan(1);
  });

  it("holds no command past its turn: each later turn's command is sent and answered", async () => {
    r = await isolatedRedis("turn");
    const batched = connect(TurnBatchedRedis);
    const b = await counted(batched);
    for (let i = 1; i <= 5; i++) expect(await batched.incr(`${r.prefix}:n`)).toBe(i);
    expect(b.writes()).toBe(5);
  });
});
