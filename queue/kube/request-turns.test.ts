import { afterEach, describe, expect, it, vi } from "vitest";
import { RequestTurns } from "./request-turns.js";

afterEach(() => {
  vi.useRealTimers();
});

/** A request whose answer the test gives. */
function pending<T>() {
  let answer!: (v: T) => void;
  const p = new Promise<T>((resolve) => {
    answer = resolve;
  });
  return { p, answer };
}

describe("request turns", () => {
  it("lets size requests run, the next in arrival order as one ends", async () => {
    const turns = new RequestTurns(2, 30_000);
    const a = pending<string>();
    const b = pending<string>();
    const started: string[] = [];
    const run = (name: string, p: Promise<string>) =>
      turns.run(() => {
        started.push(name);
        return p;
      });
    const ra = run("a", a.p);
    const rb = run("b", b.p);
    const rc = run("c", Promise.resolve("c"));
    const rd = run("d", Promise.resolve("d"));
    await Promise.resolve();
    expect(started).toEqual(["a", "b"]);
    expect(turns.usage).toEqual({ held: 2, waiting: 2 });
    b.answer("b");
    expect(await rb).toBe("b");
    expect(await rc).toBe("c");
    expect(await rd).toBe("d");
    a.answer("a");
    expect(await ra).toBe("a");
    expect(started).toEqual(["a", "b", "c", "d"]);
    expect(turns.usage).toEqual({ held: 0, waiting: 0 });
  });

  it("gives the turn back when a request fails", async () => {
    const turns = new RequestTurns(1, 30_000);
    await expect(turns.run(() => Promise.reject(new Error("refused")))).rejects.toThrow("refused");
    expect(await turns.run(() => Promise.resolve(1))).toBe(1);
    expect(turns.usage).toEqual({ held: 0, waiting: 0 });
  });

  it("a request never answered stops counting after the lapse; its caller still gets its answer", async () => {
    vi.useFakeTimers();
    const turns = new RequestTurns(1, 30_000);
    const hung = pending<string>();
    const first = turns.run(() => hung.p);
    let second = false;
    const next = turns.run(async () => {
      second = true;
      return "next";
    });
    await vi.advanceTimersByTimeAsync(29_999);
    expect(second).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    expect(await next).toBe("next");
    // The late answer still reaches its caller, and gives back no turn it no longer holds.
    hung.answer("late");
    expect(await first).toBe("late");
    expect(turns.usage).toEqual({ held: 0, waiting: 0 });
  });
});
