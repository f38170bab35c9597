/**
 * An attempt taken while Redis goes away: the command that marks it taken ran, and its answer was
 * lost with the connection. ioredis sends an unanswered command again once it reconnects, and that
 * second mark found the first: the host took its own attempt for one run before, refused it and
 * reported nothing, so the worker waited for it forever (the soak's seed 49061, `--webhook`, after
 * two Redis outages). A mark is this take's own, and a second mark of the same take is no refusal.
 */
import { afterEach, describe, expect, it } from "vitest";
import { silentLogger } from "../queue/log.js";
import { type HostQueues, hostAttempt, hostQueues } from "../test/support/executor-host.js";
import { type RedisProxy, redisProxy } from "../test/support/redis-proxy.js";
import { untilWith } from "../test/support/wait.js";
import { type ExecutorHost, startExecutorHost } from "./executor.js";
import { Following } from "./following.js";

const until = untilWith({ timeoutMs: 15_000, everyMs: 20 });

describe("an attempt whose taken mark's answer was lost", () => {
  let q: HostQueues | undefined;
  let proxy: RedisProxy | undefined;
  let host: ExecutorHost | undefined;
  afterEach(async () => {
    await host?.stop();
    host = undefined;
    await proxy?.close();
    await q?.close();
  });

  it("is carried out and reported, once", async () => {
    q = await hostQueues("lost-reply");
    proxy = await redisProxy(q.redis.url);
    const executed: string[] = [];
    host = startExecutorHost({
      kind: "flux",
      executor: {
        execute: async (a, report) => {
          executed.push(a.token);
          await report("Succeeded");
        },
      },
      reporter: q.reporter,
      following: new Following(),
      log: silentLogger(),
      redisUrl: proxy.url,
      prefix: q.redis.prefix,
    });
    const lost = proxy.loseReplyTo(/:attempt:t1:taken/);
    await q.sender.add("attempt", hostAttempt("t1"), { jobId: "t1", attempts: 1 });
    await until(() => q!.phases("t1").length > 0, "the attempt's report");
    await lost;
    await q.collectedSoFar();
    expect(executed).toEqual(["t1"]);
    expect(q.phases("t1")).toEqual(["Succeeded"]);
  });
});
