import { type ChildProcess, spawn } from "node:child_process";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { afterEach, describe, expect, it } from "vitest";
import { WRITE_TRAILER } from "../../queue/worker/commit-content.js";
import { noMetrics } from "../../queue/worker/metrics.js";
import { gitOk } from "../git/cli.js";
import { configMapWrite, type Harness, harness, waitFor } from "./harness.js";

const here = new URL(".", import.meta.url).pathname;

/** Starts the server and its pushers in another process; resolves with its URL and folder. */
async function contenders(): Promise<{
  child: ChildProcess;
  url: string;
  root: string;
  next(): Promise<Record<string, unknown>>;
}> {
  const child = spawn(process.execPath, ["--import", "tsx", join(here, "contenders-child.ts")], {
    stdio: ["pipe", "pipe", "inherit"],
    env: { ...process.env, PEERS: "10", COMMITS: "2" },
  });
  const lines = createInterface({ input: child.stdout! })[Symbol.asyncIterator]();
  const next = async () => JSON.parse(String((await lines.next()).value)) as Record<string, unknown>;
  const first = await next();
  return { child, url: String(first.url), root: String(first.root), next };
}

describe("publication under contention from concurrent pushers", () => {
  let h: Harness;
  let child: ChildProcess | undefined;
  afterEach(async () => {
    child?.stdin?.write("stop\n");
    await h.close();
  });

  it("ten git CLI writers and 500 writes: every write lands exactly once, no foreign commit lost, no force push", {
    timeout: 120_000,
  }, async () => {
    const c = await contenders();
    child = c.child;
    h = await harness(undefined, { idleMs: 20, maxMs: 100 }, { url: c.url });
    const outcomes: string[] = [];
    const metrics = { ...noMetrics, push: (_b: string, outcome: string) => void outcomes.push(outcome) };
    const worker = await h.newWorker({ pollMs: 20, metrics });
    const bare = join(c.root, "site.git");
    const tipsSeen = new Set<string>();
    let watching = true;
    const watcher = (async () => {
      while (watching) {
        const tip = await readFile(join(bare, "refs", "heads", "main"), "utf8").catch(() => "");
        if (tip.trim()) tipsSeen.add(tip.trim());
        // A sampling interval, not a wait: the watcher reads the tip as often as it can.
        await new Promise((r) => setTimeout(r, 5));
      }
    })();
    c.child.stdin!.write("go\n");
    const writes = Array.from({ length: 500 }, (_, i) => configMapWrite(h.key, `cm-${i % 120}`, `v${i}`));
    for (const [i, w] of writes.entries()) {
      expect(await h.accept(w)).toBe(true);
      // Spread the writes over the pushers' activity so they really contend (pacing, not a wait).
      if (i % 10 === 9) await new Promise((r) => setTimeout(r, 150));
    }
    const { foreign } = (await c.next()) as { foreign: string[] };
    await waitFor(
      "every write published",
      async () => (await h.inboxLength()) === 0 && worker.snapshot().retainedWrites === 0,
      60_000,
    );
    watching = false;
    await watcher;

    const log = await gitOk(["log", "--format=%H%x00%B%x01", "main"], { cwd: bare });
    const counts = new Map<string, number>();
    for (const rec of log.split("\x01")) {
      for (const line of rec.split("\n")) {
        if (line.startsWith(`${WRITE_TRAILER}: `)) {
          const id = line.slice(WRITE_TRAILER.length + 2).trim();
          counts.set(id, (counts.get(id) ?? 0) + 1);
        }
      }
    }
    for (const w of writes) expect(counts.get(w.id), w.id).toBe(1);
    expect(counts.size).toBe(500);
    const isAncestor = async (sha: string) =>
      gitOk(["merge-base", "--is-ancestor", sha, "main"], { cwd: bare }).then(
        () => true,
        () => false,
      );
    expect(foreign).toHaveLength(20);
    // The worker met the pushers: some of its pushes were rejected and replayed.
    expect(outcomes.filter((o) => o === "rejected").length).toBeGreaterThan(0);
    for (const f of foreign) expect(await isAncestor(f), `foreign ${f}`).toBe(true);
    // No force push: every tip the branch ever showed is still in its history.
    expect(tipsSeen.size).toBeGreaterThan(20);
    for (const tip of tipsSeen) expect(await isAncestor(tip), `tip ${tip}`).toBe(true);
    // The last write to each object wins.
    const last = new Map<string, string>();
    for (const [i] of writes.entries()) last.set(`cm-${i % 120}`, `v${i}`);
    for (const [name, value] of last) {
      const text = await gitOk(["show", `main:clusters/dev/core/configmap/web/${name}.yaml`], { cwd: bare });
      expect(text).toContain(`value: ${value}\n`);
    }
    for (const w of writes) expect(await h.published(w.id)).toMatch(/^[0-9a-f]{40}$/);
  });
});
