import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Queue } from "bullmq";
import { afterAll, describe, expect, it, vi } from "vitest";
import { main } from "../queue/cli/main.js";
import { loadConfig } from "../queue/config.js";
import { bullConnection } from "../queue/redis.js";
import { isolatedRedis } from "../test/redis/isolated.js";
import { makeAttempt } from "../test/support/attempts.js";
import { fileWorld } from "../test/support/file-world.js";
import { fixtureObjects, fixtureYaml } from "../test/support/gateway.js";
import { gatewayWorld } from "../test/support/gateway-world.js";
import { createGateway, startGateway } from "./app.js";
import { StaticCatalog } from "./catalog.js";
import { dashboardAllows } from "./dashboard.js";
import { dashboardAuth, dashboardSetting, gatewaySettings } from "./main.js";

const launcher = join(import.meta.dirname, "../queue/cli/applygate.mjs");
const runCli = (args: string[], env: Record<string, string> = {}) =>
  spawnSync(process.execPath, [launcher, "gateway", ...args], {
    encoding: "utf8",
    env: { ...process.env, ...env, APPLYGATE_LOG_FORMAT: "json" },
    timeout: 30_000,
  });

/** Runs `applygate gateway ...` in this process, capturing what it prints. */
async function runInProcess(args: string[]) {
  let stdout = "";
  let stderr = "";
  const out = vi.spyOn(process.stdout, "write").mockImplementation((c) => {
    stdout += String(c);
    return true;
  });
  const err = vi.spyOn(process.stderr, "write").mockImplementation((c) => {
    stderr += String(c);
    return true;
  });
  try {
    const status = await main(["gateway", ...args]);
    return { status, stdout, stderr };
  } finally {
    out.mockRestore();
    err.mockRestore();
  }
}

describe("applygate gateway command", () => {
  const dir = mkdtempSync(join(tmpdir(), "applygate-main-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("prints help", async () => {
    const r = await runInProcess(["--help"]);
    expect(r.status).toBe(0);
    expect(r.stdout).toContain("--dashboard-insecure");
  });

  it("stops with one line on a bad setting", async () => {
    const r = await runInProcess(["--port", "99999", "--dashboard-insecure"]);
    expect(r.status).toBe(2);
    expect(r.stderr.trim().split("\n")).toHaveLength(1);
    expect(r.stderr).toMatch(/invalid setting --port \(APPLYGATE_GATEWAY_PORT\)/);
  });

  it("documents --secret-refresh and refuses a refresh too short to be sane", async () => {
    const help = await runInProcess(["--help"]);
    expect(help.stdout).toMatch(/--secret-refresh.*APPLYGATE_SECRET_REFRESH/s);
    const r = await runInProcess(["--secret-refresh", "0s", "--dashboard-insecure"]);
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(
      /invalid setting --secret-refresh \(APPLYGATE_SECRET_REFRESH\): expected at least 100ms/,
    );
  });

  it("stops with one line on a bad config file (the real command)", () => {
    const file = join(dir, "bad.yaml");
    writeFileSync(file, fixtureYaml().replace("type: gitlab", "type: svn"));
    const r = runCli(["--config", file, "--dashboard-insecure", "--port", "0", "--metrics-port", "0"]);
    expect(r.status).toBe(2);
    expect(r.stderr.trim().split("\n")).toHaveLength(1);
    expect(r.stderr).toMatch(/--config: document \d+ \(GitProvider gitlab\): spec.type/);
  });

  it("turns the dashboard off without credentials, and refuses half a basic-auth pair", () => {
    const none = {
      dashboardUser: undefined,
      dashboardPassword: undefined,
      dashboardToken: undefined,
      dashboardInsecure: false,
    };
    expect(dashboardAuth(none)).toBe("off");
    expect(dashboardAuth({ ...none, dashboardInsecure: true })).toBe("insecure");
    expect(dashboardAuth({ ...none, dashboardToken: "t" })).toEqual({ bearer: "t" });
    expect(() => dashboardAuth({ ...none, dashboardUser: "a" })).toThrow(/set both or neither/);
  });
});

describe("dashboard", () => {
  const w = fileWorld(() =>
    gatewayWorld("dash", createGateway, {
      dashboard: { auth: { basic: { user: "ops", password: "pw" }, bearer: "tok" }, readOnly: true },
    }),
  );

  it("asks for credentials, and serves every applygate queue read-only to those who have them", async () => {
    const anon = await w.gw.app.inject({ method: "GET", url: "/queues/api/queues" });
    expect(anon.statusCode).toBe(401);
    expect(anon.headers["www-authenticate"]).toBe('Basic realm="queues"');
    const wrong = await w.gw.app.inject({
      method: "GET",
      url: "/queues/api/queues",
      headers: { authorization: `Basic ${Buffer.from("ops:nope").toString("base64")}` },
    });
    expect(wrong.statusCode).toBe(401);
    const basic = await w.gw.app.inject({
      method: "GET",
      url: "/queues/api/queues",
      headers: { authorization: `Basic ${Buffer.from("ops:pw").toString("base64")}` },
    });
    expect(basic.statusCode).toBe(200);
    const queues = (basic.json() as { queues: { name: string; readOnlyMode: boolean }[] }).queues;
    expect(queues.map((q) => q.name).sort()).toEqual(
      ["attempts-argocd", "attempts-flux", "attempts-webhook", "branches", "notices", "reports"].sort(),
    );
    expect(queues.every((q) => q.readOnlyMode)).toBe(true);
    const bearer = await w.gw.app.inject({
      method: "GET",
      url: "/queues",
      headers: { authorization: "Bearer tok" },
    });
    expect(bearer.statusCode).toBe(200);
    expect(bearer.headers["content-type"]).toMatch(/text\/html/);
  });

  it("checks credentials without shortcuts", () => {
    expect(dashboardAllows({ bearer: "t" }, "Bearer t")).toBe(true);
    expect(dashboardAllows({ bearer: "t" }, "Bearer tt")).toBe(false);
    expect(dashboardAllows({ bearer: "t" }, "Basic dDp0")).toBe(false);
    expect(
      dashboardAllows(
        { basic: { user: "u", password: "p:q" } },
        `Basic ${Buffer.from("u:p:q").toString("base64")}`,
      ),
    ).toBe(true);
    expect(dashboardAllows({ basic: { user: "u", password: "p" } }, undefined)).toBe(false);
    expect(dashboardAllows("insecure", undefined)).toBe(true);
  });
});

describe("metrics on a port of their own", () => {
  it("serves /metrics only there; the receivers' port answers it with the uniform miss", async () => {
    const redis = await isolatedRedis("metrics-port");
    const gw = await startGateway({
      redisUrl: redis.url,
      prefix: redis.prefix,
      catalog: new StaticCatalog(fixtureObjects()),
      queueEvents: false,
      dashboard: false,
      port: 0,
      metricsPort: 0,
    });
    try {
      const scraped = await fetch(`${gw.metricsUrl}/metrics`);
      expect(scraped.status).toBe(200);
      expect(await scraped.text()).toContain("applygate_gateway_");
      const onReceivers = await fetch(`${gw.url}/metrics`);
      const miss = await fetch(`${gw.url}/hook/nothing-here`);
      expect(onReceivers.status).toBe(miss.status);
      expect(await onReceivers.text()).toBe(await miss.text());
      // Nothing else is served beside the metrics.
      expect((await fetch(`${gw.metricsUrl}/v1/targets/a/b/writes`, { method: "POST" })).status).toBe(404);
    } finally {
      await gw.close();
      await redis.cleanup();
    }
  });
});

describe("the dashboard as its flags make it, over HTTP", () => {
  const credentials = ["--dashboard-user", "ops", "--dashboard-password", "pw"];
  const authorization = `Basic ${Buffer.from("ops:pw").toString("base64")}`;
  // What bull-board's "Add job" sends: any queue, any data (here an apply attempt).
  const addJob = (url: string) =>
    fetch(`${url}/queues/api/queues/attempts-flux/add`, {
      method: "POST",
      headers: { authorization, "content-type": "application/json" },
      body: JSON.stringify({ name: "forged", data: makeAttempt({ token: "forged" }), options: {} }),
    });
  const framing = (r: Response) => ({
    frame: r.headers.get("x-frame-options"),
    csp: r.headers.get("content-security-policy"),
  });
  const NOT_FRAMED = { frame: "DENY", csp: expect.stringMatching(/(^|; )frame-ancestors 'none'(;|$)/) };

  async function withGateway(flags: string[], body: (url: string, attempts: Queue) => Promise<void>) {
    const { config } = loadConfig(gatewaySettings, [...credentials, ...flags], {});
    // Any free port for each server: startGateway's default port, and metricsPort 0.
    const world = await gatewayWorld("dash-flags", startGateway, {
      dashboard: dashboardSetting(config),
      metricsPort: 0,
    });
    const attempts = new Queue("attempts-flux", {
      connection: bullConnection(world.redis.url),
      prefix: world.redis.prefix,
    });
    try {
      await body(world.gw.url, attempts);
    } finally {
      await attempts.close();
      await world.stop();
    }
  }

  it("is read-only by default: adding an attempt, or retrying one, is refused and queues nothing", async () => {
    await withGateway([], async (url, attempts) => {
      const queues = await fetch(`${url}/queues/api/queues`, { headers: { authorization } });
      const listed = ((await queues.json()) as { queues: { readOnlyMode: boolean }[] }).queues;
      expect(listed.length).toBeGreaterThan(0);
      expect(listed.every((q) => q.readOnlyMode)).toBe(true);
      const add = await addJob(url);
      expect(add.status).toBe(405);
      expect(await attempts.count()).toBe(0);
      const retry = await fetch(`${url}/queues/api/queues/attempts-flux/retry/failed`, {
        method: "PUT",
        headers: { authorization },
      });
      expect(retry.status).toBe(405);
    });
  });

  it("--dashboard-writable makes it writable: the same add queues the attempt", async () => {
    await withGateway(["--dashboard-writable"], async (url, attempts) => {
      const add = await addJob(url);
      expect(add.status).toBe(200);
      expect((await attempts.getJobs())[0]?.data).toMatchObject({ token: "forged" });
    });
  });

  it("writable, it offers no retry of an apply attempt (the worker decides every retry), and offers it elsewhere", async () => {
    await withGateway(["--dashboard-writable"], async (url) => {
      const queues = await fetch(`${url}/queues/api/queues`, { headers: { authorization } });
      const listed = ((await queues.json()) as { queues: { name: string; allowRetries: boolean }[] }).queues;
      const retries = Object.fromEntries(listed.map((q) => [q.name, q.allowRetries]));
      expect(retries).toMatchObject({
        "attempts-flux": false,
        "attempts-argocd": false,
        "attempts-webhook": false,
      });
      expect(retries).toMatchObject({ notices: true, branches: true, reports: true });
    });
  });

  it("no page may frame it: the page, the API, a refusal of credentials and of a change all say so", async () => {
    await withGateway([], async (url) => {
      const page = await fetch(`${url}/queues`, { headers: { authorization } });
      expect(page.status).toBe(200);
      expect(framing(page)).toEqual(NOT_FRAMED);
      expect(framing(await fetch(`${url}/queues/api/queues`, { headers: { authorization } }))).toEqual(
        NOT_FRAMED,
      );
      const anon = await fetch(`${url}/queues`);
      expect(anon.status).toBe(401);
      expect(framing(anon)).toEqual(NOT_FRAMED);
      expect(framing(await addJob(url))).toEqual(NOT_FRAMED);
    });
  });
});
