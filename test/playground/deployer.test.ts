import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { sendReport } from "./deployer.js";

// A gateway whose Redis is away answers a report 503 with Retry-After until it is back
// (seed 22013: a Redis restart of 1.8 s outlasted the deployer's few quick tries, the end of
// its operation was never reported, and the webhook applier's next attempt waited forever).
function gateway(answers: Array<{ status: number; retryAfter?: string }>) {
  const seen: string[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      seen.push(Buffer.concat(chunks).toString());
      const a = answers.shift() ?? { status: 202 };
      if (a.retryAfter) res.setHeader("retry-after", a.retryAfter);
      res.statusCode = a.status;
      res.end(a.status === 202 ? "{}" : '{"error":"unavailable"}');
    });
  });
  return { server, seen };
}

const fakeClock = () => {
  let t = 0;
  const waits: number[] = [];
  return {
    waits,
    now: () => t,
    sleep: async (ms: number) => {
      waits.push(ms);
      t += ms;
    },
  };
};

describe("the deployer's report to the gateway", () => {
  let close: (() => Promise<void>) | undefined;
  afterEach(async () => {
    await close?.();
    close = undefined;
  });

  async function listen(g: ReturnType<typeof gateway>): Promise<string> {
    await new Promise<void>((r) => g.server.listen(0, "127.0.0.1", r));
    close = () => new Promise<void>((r) => g.server.close(() => r()));
    return `http://127.0.0.1:${(g.server.address() as AddressInfo).port}/v1/operations/t-1`;
  }

  it("keeps sending while the gateway answers 503, honours Retry-After, and stops once it is kept", async () => {
    const g = gateway(Array.from({ length: 8 }, () => ({ status: 503, retryAfter: "5" })));
    const url = await listen(g);
    const clock = fakeClock();
    const kept = await sendReport({ url, body: '{"phase":"Succeeded"}', signature: "sha256=x", ...clock });
    expect(kept).toBe(true);
    expect(g.seen).toHaveLength(9);
    expect(g.seen.every((b) => b === '{"phase":"Succeeded"}')).toBe(true);
    expect(clock.waits).toEqual(Array(8).fill(5000));
  });

  it("takes the uniform miss (a repeat of a report already kept) as done", async () => {
    const g = gateway([{ status: 503 }, { status: 404 }]);
    const url = await listen(g);
    const clock = fakeClock();
    expect(await sendReport({ url, body: "{}", signature: "sha256=x", ...clock })).toBe(true);
    expect(g.seen).toHaveLength(2);
  });

  it("stops at once on a 400, and gives up only after its whole time", async () => {
    const bad = gateway([{ status: 400 }]);
    const url = await listen(bad);
    expect(await sendReport({ url, body: "{}", signature: "sha256=x", ...fakeClock() })).toBe(false);
    expect(bad.seen).toHaveLength(1);
    await close?.();

    const away = gateway(Array.from({ length: 1000 }, () => ({ status: 503, retryAfter: "5" })));
    const url2 = await listen(away);
    const clock = fakeClock();
    expect(
      await sendReport({ url: url2, body: "{}", signature: "sha256=x", giveUpMs: 60_000, ...clock }),
    ).toBe(false);
    expect(clock.now()).toBeGreaterThanOrEqual(55_000);
    expect(clock.now()).toBeLessThanOrEqual(60_000);
  });

  it("stops trying once its sender closed", async () => {
    const g = gateway(Array.from({ length: 1000 }, () => ({ status: 503, retryAfter: "5" })));
    const url = await listen(g);
    const clock = fakeClock();
    let closed = false;
    const sleep = async (ms: number) => {
      await clock.sleep(ms);
      if (clock.waits.length === 3) closed = true;
    };
    const kept = await sendReport({
      url,
      body: "{}",
      signature: "sha256=x",
      now: clock.now,
      sleep,
      stopped: () => closed,
    });
    expect(kept).toBe(false);
    expect(g.seen).toHaveLength(3);
  });
});
