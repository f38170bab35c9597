/**
 * The safety net for a lost wake-up signal: a replica asks Redis about every inbox it owns in one
 * round trip a period, its idle branch workers do not read their inboxes by themselves, and a
 * write whose signal was lost is still taken within the period.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { createConnection, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Queue } from "bullmq";
import { afterEach, describe, expect, it } from "vitest";
import { type GitServer, startGitServer } from "../../test/git/server.js";
import { type IsolatedRedis, isolatedRedis } from "../../test/redis/isolated.js";
import { untilWith } from "../../test/support/wait.js";
import { configMapWrite, FOLDER, TARGET, WEB_GRANT } from "../../test/worker/harness.js";
import { branchKey } from "../contract.js";
import type { BranchSpec } from "../directory.js";
import { acceptWrite } from "../intake.js";
import { branchKeys, knownBranchesKey, writePublishedKey } from "../keys.js";
import { silentLogger } from "../log.js";
import { scopeOf } from "../scope.js";
import { Replica, type ReplicaOptions } from "./replica.js";

const until = untilWith({ timeoutMs: 30_000, everyMs: 10 });

/**
 * Commands of clients (not of scripts) that name an inbox of `prefix`, as MONITOR shows them, read
 * on a plain socket (each line: `+<time> [<db> <client or lua>] "<command>" "<arg>" ...`).
 */
class InboxCommands {
  private socket: Socket | undefined;
  lines: Array<{ command: string; inboxes: number }> = [];

  async start(url: string, prefix: string): Promise<void> {
    const { hostname, port } = new URL(url);
    const socket = createConnection({ host: hostname, port: Number(port || 6379) });
    this.socket = socket;
    await new Promise<void>((resolve, reject) => {
      socket.once("connect", resolve);
      socket.once("error", reject);
    });
    socket.on("error", () => {});
    const inbox = `${prefix}:branch:`;
    let buffered = "";
    let ready: () => void = () => {};
    const ok = new Promise<void>((r) => {
      ready = r;
    });
    socket.setEncoding("utf8");
    socket.on("data", (chunk: string) => {
      buffered += chunk;
      let nl = buffered.indexOf("\r\n");
      while (nl >= 0) {
        const line = buffered.slice(0, nl);
        buffered = buffered.slice(nl + 2);
        nl = buffered.indexOf("\r\n");
        if (line === "+OK") ready();
        const source = /^\+\S+ \[\d+ ([^\]]+)\]/.exec(line)?.[1];
        if (!source || source === "lua") continue;
        const args = [...line.matchAll(/"((?:[^"\\]|\\.)*)"/g)].map((m) => m[1] as string);
        const inboxes = args.filter((a) => a.startsWith(inbox) && a.endsWith(":inbox")).length;
        if (inboxes > 0) this.lines.push({ command: String(args[0]).toLowerCase(), inboxes });
      }
    });
    socket.write("MONITOR\r\n");
    await ok;
  }

  reset(): void {
    this.lines = [];
  }

  count(command: string, atLeastInboxes = 1): number {
    return this.lines.filter((l) => l.command === command && l.inboxes >= atLeastInboxes).length;
  }

  stop(): void {
    this.socket?.destroy();
  }
}

describe("the replica's inbox check", () => {
  let r: IsolatedRedis;
  let server: GitServer;
  let dir: string;
  let replica: Replica | undefined;
  let monitor: InboxCommands | undefined;
  afterEach(async () => {
    monitor?.stop();
    await replica?.stop();
    replica = undefined;
    await server.close();
    await r.cleanup();
    await rm(dir, { recursive: true, force: true });
  });

  async function fleet(
    n: number,
    opts: { inboxCheckMs: number; idlePollMs?: number },
    hooks: ReplicaOptions["hooks"] = undefined,
  ) {
    r = await isolatedRedis("inbox-check");
    server = await startGitServer();
    dir = await mkdtemp(join(tmpdir(), "applygate-inbox-check-"));
    const url = await server.createRepo("site", { "README.md": "hi\n" });
    const specs = new Map<string, BranchSpec>();
    for (let i = 0; i < n; i++) {
      const key = branchKey({ namespace: "team", name: "gp" }, url, `env-${i}`);
      specs.set(key, {
        key,
        remote: { url },
        branch: `env-${i}`,
        baseBranch: "main",
        targets: [
          {
            ...TARGET,
            path: FOLDER,
            window: { idleMs: 20, maxMs: 200 },
            scope: scopeOf(TARGET, [WEB_GRANT]),
          },
        ],
      });
    }
    await r.client.sadd(knownBranchesKey(r.prefix), ...specs.keys());
    const baselined = new Set<string>();
    replica = new Replica({
      redisUrl: r.url,
      prefix: r.prefix,
      cacheDir: dir,
      directory: { branch: async (key) => specs.get(key) },
      log: silentLogger(),
      inboxCheckMs: opts.inboxCheckMs,
      ...(opts.idlePollMs ? { branch: { idlePollMs: opts.idlePollMs } } : {}),
      hooks: (key) => {
        const more = hooks?.(key) ?? {};
        return {
          ...more,
          onObserved: async (o) => {
            if (o.baseline) baselined.add(key);
            await more.onObserved?.(o);
          },
        };
      },
    });
    await replica.start();
    await until(() => baselined.size === n, `all ${n} branches read their baseline`);
    return { keys: [...specs.keys()] };
  }

  it("asks about every idle branch in one round trip a period, and no idle branch reads its inbox", async () => {
    const n = 200;
    const { keys } = await fleet(n, { inboxCheckMs: 200, idlePollMs: 600_000 });
    expect(replica?.owned().length).toBe(n);
    monitor = new InboxCommands();
    await monitor.start(r.url, r.prefix);
    const m = monitor;
    // Past the steps that read the baselines: the check has run on the whole fleet.
    await until(() => m.count("evalsha", n) >= 2, "the inbox check ran");
    m.reset();
    const startedAt = Date.now();
    await until(() => m.count("evalsha", n) >= 10, "ten more inbox checks");
    const elapsedMs = Date.now() - startedAt;
    // Each period is one call naming every inbox (one round trip), not one read per branch.
    expect(m.count("xrange")).toBe(0);
    expect(m.count("xread")).toBe(0);
    expect(m.count("xrevrange")).toBe(0);
    const roundTrips = m.lines.length;
    expect(roundTrips).toBeLessThanOrEqual(Math.ceil(elapsedMs / 200) + 2);
    expect(m.lines.every((l) => l.inboxes === n)).toBe(true);

    // A branch with news is woken, and only it reads its inbox.
    const key = keys[17] as string;
    await r.client.xadd(branchKeys(r.prefix, key).inbox, "*", "kind", "report", "data", "{}");
    await until(() => m.count("xrange") >= 1, "the branch with news read its inbox");
    const reads = m.lines.filter((l) => l.command === "xrange");
    expect(reads.every((l) => l.inboxes === 1)).toBe(true);
  });

  it("takes a write whose wake-up signal was lost within the check's period, though idle branches sleep for minutes", async () => {
    const decided = new Map<string, number>();
    const { keys } = await fleet(3, { inboxCheckMs: 1000, idlePollMs: 600_000 }, (key) => ({
      onWriteDecided: () => {
        if (!decided.has(key)) decided.set(key, Date.now());
      },
    }));
    const key = keys[1] as string;
    // The write is in the inbox; the signal that should wake its owner never arrives.
    const lost = {
      add: async () => {
        throw new Error("Redis went away before the signal was queued");
      },
    } as unknown as Queue;
    const write = configMapWrite(key, "web", "v1");
    const signalErrors: unknown[] = [];
    const appendedAt = Date.now();
    const result = await acceptWrite(r.client, r.prefix, write, lost, (err) => signalErrors.push(err));
    expect(result.accepted).toBe(true);
    expect(signalErrors).toHaveLength(1);
    await until(() => decided.get(key), "the owner took the write");
    // The check's period, the write's commit window and a step, with room for a loaded machine.
    expect((decided.get(key) as number) - appendedAt).toBeLessThan(1000 + 20 + 1500);
    await until(() => r.client.get(writePublishedKey(r.prefix, write.id)), "the write is published");
    expect(await server.tip("site", `env-1`)).toBeDefined();
    expect([...decided.keys()]).toEqual([key]);
  });
});
