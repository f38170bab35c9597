/**
 * A miss costs what a hit costs: a large body on a real receiver path and on an unknown one take
 * the same work, for every provider type, because both run the same HMAC over the same bytes (only
 * the key differs). What is measured is the CPU time the process spends on each request, not the
 * wall time: on a loaded machine a request's wall time is mostly how long the scheduler kept the
 * process waiting (the suite once saw a 1.7 ms paired wall difference at load 6 on 2 cores, while
 * the CPU time of both paths stays within 0.05 ms of each other at any load), and a real
 * difference in our code is a difference in CPU time. Requests alternate between the two paths in
 * an order drawn for each pair; the median of the paired differences must stay within 35% of the
 * unknown path's median (the difference this test was written against was fivefold).
 */
import { randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import { fileWorld } from "../test/support/file-world.js";
import { pathOf, SECRETS } from "../test/support/gateway.js";
import { gatewayWorld } from "../test/support/gateway-world.js";
import { createGateway, MISS_STATUS } from "./app.js";

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] as number;
};

describe("timing of misses", () => {
  const w = fileWorld(() => gatewayWorld("timing", createGateway));

  // 1.5 MiB of JSON: large enough that hashing it dominates a request.
  const body = Buffer.from(
    JSON.stringify({ ref: "refs/heads/main", blob: randomBytes(1_150_000).toString("base64") }),
  );
  const unknown = `/hook/${"ab".repeat(32)}`;
  const cases = [
    {
      type: "gitea",
      path: pathOf(SECRETS.gitea, "gitea"),
      headers: { "x-gitea-event": "push", "x-gitea-signature": "00".repeat(32) },
    },
    {
      type: "gitlab",
      path: pathOf(SECRETS.gitlab, "gitlab"),
      headers: { "x-gitlab-event": "Push Hook", "x-gitlab-token": "wrong" },
    },
    {
      type: "generic-hmac",
      path: pathOf(SECRETS.generic, "generic"),
      headers: { "x-signature": `sha512=${"00".repeat(64)}` },
    },
    {
      type: "github",
      path: pathOf(SECRETS.github, "github"),
      headers: { "x-github-event": "push", "x-hub-signature-256": `sha256=${"00".repeat(32)}` },
    },
  ];

  for (const c of cases) {
    it(`a ${c.type} path and an unknown path cost the same for a large body`, async () => {
      // The request is handled in this process (inject): its CPU time is the cost of the path.
      const timed = async (url: string) => {
        const started = process.cpuUsage();
        const r = await w.gw.app.inject({
          method: "POST",
          url,
          headers: { "content-type": "application/json", ...c.headers },
          payload: body,
        });
        const used = process.cpuUsage(started);
        expect(r.statusCode).toBe(MISS_STATUS);
        return (used.user + used.system) / 1000;
      };
      for (let i = 0; i < 40; i++) await timed(i % 2 ? c.path : unknown); // warm up (JIT, buffers)
      const real: number[] = [];
      const fake: number[] = [];
      // Which of the pair goes first is drawn each time, so neither pays for the other's garbage.
      for (let i = 0; i < 150; i++) {
        if (Math.random() < 0.5) {
          real.push(await timed(c.path));
          fake.push(await timed(unknown));
        } else {
          fake.push(await timed(unknown));
          real.push(await timed(c.path));
        }
      }
      // Paired: each difference is of two adjacent requests, so a change of pace (a GC, the CPU's
      // clock) cancels out instead of landing on one side.
      const diff = median(real.map((r, i) => r - (fake[i] as number)));
      const [r, f] = [median(real), median(fake)];
      expect(
        Math.abs(diff),
        `medians real ${r.toFixed(2)} ms, unknown ${f.toFixed(2)} ms, paired difference ${diff.toFixed(2)} ms`,
      ).toBeLessThan(Math.max(0.35 * f, 0.25));
    });
  }
});
