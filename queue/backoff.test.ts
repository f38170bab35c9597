import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { backoffMs, jittered } from "./backoff.js";

describe("backoffMs", () => {
  it("starts at the initial delay and doubles up to the bound", () => {
    const b = { initialMs: 100, maxMs: 1_000 };
    expect([0, 1, 2, 3, 4, 5, 60].map((n) => backoffMs(b, n))).toEqual([100, 100, 200, 400, 800, 1000, 1000]);
    expect(backoffMs({ initialMs: 20, maxMs: Number.POSITIVE_INFINITY }, 4)).toBe(160);
  });

  it("never shrinks with another failure, never passes the bound, never falls below the start", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 100_000 }),
        fc.integer({ min: 1, max: 10_000_000 }),
        fc.integer({ min: -5, max: 5_000 }),
        (initialMs, extra, n) => {
          const b = { initialMs, maxMs: initialMs + extra };
          const d = backoffMs(b, n);
          expect(Number.isFinite(d)).toBe(true);
          expect(d).toBeGreaterThanOrEqual(initialMs);
          expect(d).toBeLessThanOrEqual(b.maxMs);
          expect(backoffMs(b, n + 1)).toBeGreaterThanOrEqual(d);
        },
      ),
    );
  });
});

describe("jittered", () => {
  it("spreads a delay over half to one and a half of it", () => {
    expect(jittered(100, () => 0)).toBe(50);
    expect(jittered(100, () => 0.5)).toBe(100);
    expect(jittered(100, () => 0.999)).toBeCloseTo(149.9);
  });
});
