/**
 * Slow and malformed clients, over real sockets: a client that sends headers and then nothing is
 * cut within the request timeout; an idle keep-alive connection is closed after the keep-alive
 * timeout; bad URLs, over-long ids and huge headers under /hook/ answer the
 * uniform miss without echoing the path; /metrics does not tell a real receiver path from a fake.
 */
import { connect } from "node:net";
import { describe, expect, it } from "vitest";
import { fileWorld } from "../test/support/file-world.js";
import { pathOf, SECRETS } from "../test/support/gateway.js";
import { fixtureGatewayOptions, gatewayWorld } from "../test/support/gateway-world.js";
import { DEFAULT_KEEP_ALIVE_TIMEOUT_MS, MISS_BODY, startGateway } from "./app.js";

/**
 * Writes `raw` on a fresh connection; resolves with what came back, how long until it closed, and
 * how long it stayed open after the last bytes came back (idle).
 */
function exchange(url: string, raw: string): Promise<{ text: string; ms: number; idleMs: number }> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const started = performance.now();
    let last = started;
    const socket = connect(Number(port), hostname, () => socket.write(raw));
    let text = "";
    socket.setEncoding("latin1");
    socket.on("data", (d) => {
      text += d;
      last = performance.now();
    });
    socket.on("error", reject);
    socket.on("close", () => {
      const now = performance.now();
      resolve({ text, ms: now - started, idleMs: now - last });
    });
  });
}

describe("slow and malformed clients", () => {
  const w = fileWorld(() =>
    gatewayWorld("slow", startGateway, {
      headersTimeoutMs: 1000,
      requestTimeoutMs: 1500,
      keepAliveTimeoutMs: 1000,
    }),
  );

  it("cuts a client that sends headers and then nothing, within the request timeout", async () => {
    const path = pathOf(SECRETS.github, "github");
    const r = await exchange(
      w.gw.url,
      `POST ${path} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 1000\r\n\r\n{"ref":`,
    );
    expect(r.ms).toBeLessThan(4000);
    expect(r.text).not.toContain(path.slice(6));
  });

  it("closes a keep-alive connection left idle after an answer, after the keep-alive timeout (5 s by default, not fastify's 72 s)", async () => {
    const r = await exchange(w.gw.url, "GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n");
    expect(r.text).toMatch(/^HTTP\/1\.1 200 /);
    expect(r.text.toLowerCase()).toContain("connection: keep-alive");
    expect(r.idleMs).toBeGreaterThanOrEqual(900);
    expect(r.idleMs).toBeLessThan(4000);
    expect(DEFAULT_KEEP_ALIVE_TIMEOUT_MS).toBe(5000);
    const plain = await startGateway(fixtureGatewayOptions(w.redis, { metricsPort: 0 }));
    try {
      // The default reaches both ports' servers, the receivers' and the metrics'.
      expect(plain.app.server.keepAliveTimeout).toBe(DEFAULT_KEEP_ALIVE_TIMEOUT_MS);
      const scrape = await exchange(plain.metricsUrl as string, "GET /metrics HTTP/1.1\r\nhost: x\r\n\r\n");
      expect(scrape.text).toMatch(/^HTTP\/1\.1 200 /);
      expect(scrape.idleMs).toBeLessThan(DEFAULT_KEEP_ALIVE_TIMEOUT_MS + 3000);
    } finally {
      await plain.close();
    }
  });

  it("cuts a client that never finishes its headers, within the headers timeout", async () => {
    const r = await exchange(w.gw.url, `POST /hook/${"a".repeat(64)} HTTP/1.1\r\nhost: x\r\nx-slow: `);
    expect(r.ms).toBeLessThan(4000);
  });

  it("answers malformed requests under /hook/ with the uniform miss, never echoing the path", async () => {
    const probes = [
      `POST /hook/%zz%ZZ-secret-probe HTTP/1.1\r\nhost: x\r\nconnection: close\r\ncontent-length: 2\r\n\r\n{}`,
      `POST /hook/${"b".repeat(5000)}-secret-probe HTTP/1.1\r\nhost: x\r\nconnection: close\r\ncontent-length: 2\r\n\r\n{}`,
      `POST /hook/x-secret-probe HTTP/1.1\r\nhost: x\r\nconnection: close\r\nx-big: ${"c".repeat(64 * 1024)}\r\ncontent-length: 2\r\n\r\n{}`,
      `POST /hook/%00-secret-probe HTTP/1.1\r\nhost: x\r\nconnection: close\r\ncontent-length: 2\r\n\r\n{}`,
    ];
    for (const raw of probes) {
      const r = await exchange(w.gw.url, raw);
      expect(r.text, raw.slice(0, 40)).toMatch(/^HTTP\/1\.1 404 /);
      expect(r.text.endsWith(MISS_BODY), raw.slice(0, 40)).toBe(true);
      expect(r.text).not.toContain("secret-probe");
    }
  });

  it("refuses non-UTF-8 and non-JSON bodies as misses, and labels no miss by provider type", async () => {
    const real = pathOf(SECRETS.gitea, "gitea");
    for (const payload of [Buffer.from([0xff, 0xfe, 0x00, 0x80]), Buffer.from("not json"), Buffer.alloc(0)]) {
      const r = await w.gw.app.inject({
        method: "POST",
        url: real,
        headers: { "content-type": "application/json", "x-gitea-event": "push" },
        payload,
      });
      expect(r.body).toBe(MISS_BODY);
    }
    await w.gw.app.inject({
      method: "POST",
      url: real,
      headers: { "x-gitea-signature": "00" },
      payload: "{}",
    });
    const text = await w.gw.metrics.registry.getSingleMetricAsString("applygate_gateway_deliveries_total");
    expect(text).toMatch(/provider_type="unknown",outcome="miss"\} [1-9]/);
    expect(text).not.toMatch(/provider_type="gitea",outcome="miss"/);
  });
});
