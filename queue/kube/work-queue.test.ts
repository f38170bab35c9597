import { describe, expect, it } from "vitest";
import { untilWith } from "../../test/support/wait.js";
import { WorkQueue } from "./work-queue.js";

const until = untilWith({ timeoutMs: 5_000, everyMs: 5 });

/** A handler whose calls wait until released, recording what ran and how many ran at once. */
function gated() {
  const runs: string[] = [];
  const gates = new Map<string, () => void>();
  let running = 0;
  let most = 0;
  const handle = async (key: string) => {
    runs.push(key);
    running++;
    most = Math.max(most, running);
    await new Promise<void>((r) => gates.set(key, r));
    running--;
    return undefined;
  };
  const release = (key: string) => {
    const g = gates.get(key);
    gates.delete(key);
    g?.();
  };
  return { runs, handle, release, most: () => most, waiting: (key: string) => gates.has(key) };
}

describe("work queue", () => {
  it("a key added while queued is handled once; one added while handled is handled again after, never at once", async () => {
    const g = gated();
    const q = new WorkQueue<string>({ handle: g.handle, concurrency: 4 });
    q.add("a");
    q.add("a");
    await until(() => g.waiting("a"), "a running");
    q.add("a");
    q.add("a");
    expect(g.runs).toEqual(["a"]);
    g.release("a");
    await until(() => g.runs.length === 2 && g.waiting("a"), "a again");
    g.release("a");
    await q.whenIdle();
    expect(g.runs).toEqual(["a", "a"]);
    expect(g.most()).toBe(1);
  });

  it("different keys run at once up to the concurrency: a slow key does not hold the others", async () => {
    const g = gated();
    const q = new WorkQueue<string>({ handle: g.handle, concurrency: 2 });
    q.add("slow");
    q.add("b");
    q.add("c");
    await until(() => g.waiting("slow") && g.waiting("b"), "two running");
    expect(g.runs).not.toContain("c");
    g.release("b");
    await until(() => g.waiting("c"), "c runs while slow still runs");
    g.release("c");
    g.release("slow");
    await q.whenIdle();
    expect(g.most()).toBe(2);
  });

  it("a failing key is retried after a backoff that doubles, and forgotten once it succeeds", async () => {
    const delays: number[] = [];
    let calls = 0;
    const q = new WorkQueue<string>({
      handle: async () => {
        calls++;
        if (calls <= 3) throw new Error(`fail ${calls}`);
        return undefined;
      },
      backoffMs: (n) => 5 * 2 ** (n - 1),
      onError: (_k, _e, ms) => delays.push(ms),
    });
    q.add("k");
    await until(() => calls === 4, "the fourth call");
    expect(delays).toEqual([5, 10, 20]);
    await until(() => q.failuresOf("k") === 0, "forgotten");
    await q.stop();
  });

  it("a requested delay requeues the key; the sooner of two asks wins", async () => {
    const at: number[] = [];
    const q = new WorkQueue<string>({
      handle: async () => {
        at.push(Date.now());
        return at.length === 1 ? 60_000 : undefined;
      },
    });
    q.add("k");
    await until(() => at.length === 1, "first");
    q.addAfter("k", 10);
    await until(() => at.length === 2, "the sooner requeue");
    expect(at[1]! - at[0]!).toBeLessThan(60_000);
    await q.stop();
  });
});
