/**
 * The soak's edits reach the gateway in the order they were made, however long one of them waits
 * for the gateway (seed 6013: three saved edits retried on their own timers after a Redis restart
 * reached the inbox last-first, and Git ended on the first).
 */
import { describe, expect, it } from "vitest";
import { reporter } from "./reporter.js";

describe("the soak's reporter", () => {
  it("sends in order: a report still retrying holds back the ones after it, and a failed one does not stop them", async () => {
    const report = reporter();
    const arrived: string[] = [];
    let gatewayBack!: () => void;
    const back = new Promise<void>((r) => {
      gatewayBack = r;
    });
    const first = report(async () => {
      await back; // answered 503 until Redis is back
      arrived.push("b7-0");
      return 202;
    });
    const second = report(async () => {
      arrived.push("b7-1");
      throw new Error("connection reset");
    });
    const third = report(async () => {
      arrived.push("b7-2");
      return 202;
    });
    await Promise.resolve();
    expect(arrived).toEqual([]);
    gatewayBack();
    expect(await first).toBe(202);
    await expect(second).rejects.toThrow("connection reset");
    expect(await third).toBe(202);
    expect(arrived).toEqual(["b7-0", "b7-1", "b7-2"]);
  });
});
