/**
 * kill -9 of the replica that owns a branch, in the middle of a publication: another replica
 * takes the branch within the lease time and publishes every write exactly once.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { afterEach, describe, expect, it } from "vitest";
import { silentLogger } from "../../queue/log.js";
import { WRITE_TRAILER } from "../../queue/worker/commit-content.js";
import { Replica } from "../../queue/worker/replica.js";
import { gitOk } from "../git/cli.js";
import { configMapWrite, type Harness, harness, waitFor } from "./harness.js";

const here = new URL(".", import.meta.url).pathname;
const LEASE_MS = 3000;

describe("ownership moves when the owner dies", () => {
  let h: Harness;
  let child: ChildProcess | undefined;
  let survivor: Replica | undefined;
  afterEach(async () => {
    if (child && child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
    await survivor?.stop();
    await h.close();
  });

  it("kill -9 mid-publication: another replica takes over within the lease and publishes every write once", async () => {
    h = await harness(undefined, { idleMs: 50, maxMs: 300 });
    const first = Array.from({ length: 300 }, (_, i) => configMapWrite(h.key, `cm-${i % 50}`, `a${i}`));
    for (const w of first) expect(await h.accept(w)).toBe(true);
    // The owner's first push stalls at the server: it dies while publishing.
    const stall = h.server.faults.stallNext(1, "push");
    child = spawn(process.execPath, ["--import", "tsx", join(here, "replica-child.ts")], {
      stdio: ["ignore", "pipe", "inherit"],
      env: {
        ...process.env,
        REDIS_URL: h.redis.url,
        PREFIX: h.redis.prefix,
        CACHE_DIR: join(h.dir, "child"),
        LEASE_MS: String(LEASE_MS),
        BRANCH_SPEC: JSON.stringify(h.spec),
      },
    });
    const lines = createInterface({ input: child.stdout! })[Symbol.asyncIterator]();
    expect(JSON.parse(String((await lines.next()).value))).toEqual({ owned: h.key });
    await waitFor("the owner is pushing", () => h.server.counts().push >= 1);
    child.kill("SIGKILL");
    await new Promise((r) => child?.once("exit", r));
    const killedAt = Date.now();
    // Whatever the dead owner sent now reaches the server (it may land, or not).
    stall.release();

    let tookAt = 0;
    survivor = new Replica({
      redisUrl: h.redis.url,
      prefix: h.redis.prefix,
      cacheDir: join(h.dir, "survivor"),
      leaseMs: LEASE_MS,
      sweepMs: 500,
      directory: { branch: async (key) => (key === h.key ? h.spec : undefined) },
      log: silentLogger(),
      branch: { pollMs: 50 },
      hooks: () => {
        tookAt = Date.now();
        return {};
      },
    });
    await survivor.start();
    const more = Array.from({ length: 100 }, (_, i) => configMapWrite(h.key, `cm-${i % 50}`, `b${i}`));
    for (const w of more) expect(await h.accept(w)).toBe(true);
    await waitFor("the survivor owns the branch", () => tookAt > 0);
    expect(tookAt - killedAt).toBeLessThan(15_000);
    expect(survivor.owned()).toEqual([h.key]);

    const all = [...first, ...more];
    await waitFor("every write published", async () => {
      for (const w of all) if (!(await h.published(w.id))) return false;
      return true;
    });
    const log = await gitOk(["log", "--format=%B%x01", "main"], { cwd: join(h.server.root, "site.git") });
    const counts = new Map<string, number>();
    for (const line of log.split("\n")) {
      if (!line.startsWith(`${WRITE_TRAILER}: `)) continue;
      const id = line
        .slice(WRITE_TRAILER.length + 2)
        .replace("\x01", "")
        .trim();
      counts.set(id, (counts.get(id) ?? 0) + 1);
    }
    for (const w of all) expect(counts.get(w.id), w.id).toBe(1);
    for (let i = 0; i < 50; i++) {
      const text = await h.file(`clusters/dev/core/configmap/web/cm-${i}.yaml`);
      expect(text).toContain(`value: b${50 + i}\n`);
    }
    await waitFor("inbox emptied", async () => (await h.inboxLength()) === 0);
  });
});
