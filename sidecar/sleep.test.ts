import { describe, expect, it, vi } from "vitest";
import { sleepUnlessAborted } from "./sleep.js";

describe("sleepUnlessAborted", () => {
  it("waits the interval when nothing stops it", async () => {
    vi.useFakeTimers();
    try {
      let done = false;
      const p = sleepUnlessAborted(1000, new AbortController().signal).then(() => {
        done = true;
      });
      await vi.advanceTimersByTimeAsync(999);
      expect(done).toBe(false);
      await vi.advanceTimersByTimeAsync(1);
      await p;
      expect(done).toBe(true);
    } finally {
      vi.useRealTimers();
    }
  });

  it("ends at once on abort, and leaves no timer or listener behind", async () => {
    vi.useFakeTimers();
    try {
      const c = new AbortController();
      const p = sleepUnlessAborted(60_000, c.signal);
      c.abort();
      await p;
      expect(vi.getTimerCount()).toBe(0);
    } finally {
      vi.useRealTimers();
    }
  });

  it("does not wait at all when already aborted", async () => {
    const c = new AbortController();
    c.abort();
    vi.useFakeTimers();
    try {
      await sleepUnlessAborted(60_000, c.signal);
      expect(vi.getTimerCount()).toBe(0);
    } finally {
      vi.useRealTimers();
    }
  });
});
