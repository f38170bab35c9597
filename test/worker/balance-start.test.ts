/**
 * Replicas started together, with real Redis and the real Git server: the first to sweep takes
 * every free branch, and starts them a few at a time. Those still waiting to start go back, with a
 * hand-over marker, at its next presence round once the other replica counts, and the other starts
 * them: the fleet splits within a round or two, not a few branches per round (the fleet bench's
 * two replicas showed every GitTarget's first status after 24 s where one replica took 14 s).
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { branchKey } from "../../queue/contract.js";
import type { BranchSpec } from "../../queue/directory.js";
import { branchKeys, knownBranchesKey } from "../../queue/keys.js";
import { scopeOf } from "../../queue/scope.js";
import type { Replica } from "../../queue/worker/replica.js";
import { gitOk } from "../git/cli.js";
import { type GitServer, startGitServer } from "../git/server.js";
import { type IsolatedRedis, isolatedRedis } from "../redis/isolated.js";
import { capturingLogger } from "../support/log-lines.js";
import { until } from "../support/wait.js";
import { FOLDER, TARGET, testReplica, WEB_GRANT } from "./harness.js";

const N = 80;

describe("replicas started together", () => {
  let git: GitServer | undefined;
  let r: IsolatedRedis | undefined;
  let dir: string | undefined;
  const replicas: Replica[] = [];
  let letGo = () => {};
  afterEach(async () => {
    letGo();
    for (const x of replicas.splice(0)) await x.stop();
    await git?.close();
    await r?.cleanup();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  /**
   * N branches on one repository, and replicas r1 then r2: r1 is held up, by `hold`, before it
   * has done anything for most of what it took; r2 starts once r1 holds every lease, then `hold`
   * lets go. Answers where each branch's worker started and the replicas' log lines.
   */
  async function startedTogether(hold: "starts" | "firstReads") {
    git = await startGitServer();
    r = await isolatedRedis("balance-start");
    dir = await mkdtemp(join(tmpdir(), "applygate-balance-start-"));
    const url = await git.createRepo("site", { [`${FOLDER}/README.md`]: "dev\n" });
    const initial = (await git.tip("site")) as string;
    const specs = new Map<string, BranchSpec>();
    for (let i = 0; i < N; i++) {
      const name = `b${i}`;
      await gitOk(["update-ref", `refs/heads/${name}`, initial], { cwd: join(git.root, "site.git") });
      const key = branchKey({ namespace: "team", name: "gp" }, url, name);
      const target = {
        ...TARGET,
        path: FOLDER,
        window: { idleMs: 30, maxMs: 200 },
        scope: scopeOf(TARGET, [WEB_GRANT]),
      };
      specs.set(key, { key, remote: { url }, branch: name, targets: [target] });
    }
    await r.client.sadd(knownBranchesKey(r.prefix), ...specs.keys());
    const redis = r;
    const lines: string[] = [];
    /** Where each branch's worker started, once each. */
    const startedBy = new Map<string, string[]>();
    // "starts": r1's starts hang until let go, so what it took waits in its start queue.
    // "firstReads": r1 reads the remote two at a time, and its first two reads hang until let
    // go, so its other branch workers wait for their first read.
    const gate = new Promise<void>((res) => {
      letGo = res;
    });
    const stalled = hold === "firstReads" ? git.faults.stallNext(2) : undefined;
    if (stalled) void gate.then(() => stalled.release());
    const start = (id: string, held: boolean) => {
      const { log } = capturingLogger({ replica: id }, lines);
      log.level = process.env.APPLYGATE_TEST_LOG ?? "info";
      const replica = testReplica(redis, {
        replicaId: id,
        cacheDir: join(dir as string, id),
        sweepMs: 500,
        ...(held && hold === "firstReads" ? { baselineConcurrency: 2 } : {}),
        directory: {
          branch: async (k) => {
            if (held && hold === "starts") await gate;
            return specs.get(k);
          },
        },
        log,
        attach: (ctx) => ({
          hooks: {},
          quiet: () => true,
          start() {
            startedBy.set(ctx.key, [...(startedBy.get(ctx.key) ?? []), id]);
          },
          async stop() {},
        }),
      });
      replicas.push(replica);
      return replica;
    };

    const r1 = start("r1", true);
    // Its start resolves once the branches its first sweep took are started: not awaited here.
    const r1Started = r1.start();
    // Every lease is r1's; then r2 starts beside it.
    const holders = async () =>
      redis.client.mget(...[...specs.keys()].map((k) => branchKeys(redis.prefix, k).lease));
    await until(async () => (await holders()).every((h) => h?.startsWith("r1:")), "r1 to hold every lease", {
      timeoutMs: 30_000,
      everyMs: 20,
    });
    const r2 = start("r2", false);
    await r2.start();
    await until(() => r2.owned().length >= N / 2 - 2, "r2 to start the half r1 gave back", {
      timeoutMs: 30_000,
      everyMs: 20,
    });
    letGo();
    await r1Started;
    await until(() => r1.owned().length + r2.owned().length === N, "every branch running", {
      timeoutMs: 60_000,
      everyMs: 20,
    });
    return { r1, r2, startedBy, lines };
  }

  it("the first to sweep gives back the branches it has not started, and the other starts them", {
    timeout: 120_000,
  }, async () => {
    const { r1, r2, startedBy, lines } = await startedTogether("starts");
    // Split at once, each branch started on one replica only: none was handed over after it ran.
    expect(r2.owned().length).toBeGreaterThanOrEqual(N / 2);
    expect(r1.owned().length).toBeGreaterThanOrEqual(N / 2 - Math.floor(N / 20));
    expect([...startedBy.values()].filter((by) => by.length > 1)).toEqual([]);
    expect(lines.some((l) => l.includes("gave back branches not started or not read here"))).toBe(true);
  });

  it("the first to sweep gives back the branch workers still waiting for their first read", {
    timeout: 120_000,
  }, async () => {
    const { r1, r2, startedBy, lines } = await startedTogether("firstReads");
    // The two reading (and any that read before r2 counted) stay; the rest split at once.
    expect(r2.owned().length).toBeGreaterThanOrEqual(N / 2 - 2);
    expect(r1.owned().length).toBeGreaterThanOrEqual(N / 2 - Math.floor(N / 20));
    const moved = [...startedBy.values()].filter((by) => by.length > 1);
    expect(moved.length).toBeGreaterThanOrEqual(N / 2 - 2);
    expect(moved.every((by) => by.join() === "r1,r2")).toBe(true);
    expect(lines.some((l) => l.includes('"unread":'))).toBe(true);
  });
});
