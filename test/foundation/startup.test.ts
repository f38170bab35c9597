/**
 * Run outside a cluster, as people do first: every component is started as its binary with a
 * kubeconfig (`--kubeconfig`, or KUBECONFIG) and a Redis URL. When what it needs does not answer
 * at start, it says so in one line naming the address and the answer, and exits non-zero: no
 * stack trace, no silent exit, no retrying for ever. Every command answers `--version`.
 */
import { execFile, spawn } from "node:child_process";
import { mkdtempSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freePort } from "../../queue/redis.js";
import { type ApiServer, startApiServer } from "../cluster/apiserver/index.js";
import { testRedisUrl } from "../redis/isolated.js";
import { untilWith } from "../support/wait.js";

const until = untilWith({ timeoutMs: 30_000, everyMs: 100 });

const root = join(dirname(fileURLToPath(import.meta.url)), "../..");
const bin = join(root, "queue/cli/applygate.mjs");
const dir = mkdtempSync(join(tmpdir(), "applygate-startup-"));
const version = (JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as { version: string }).version;

/** The environment of a person's shell: no cluster around, no kubeconfig but the one named. */
function shellEnv(extra: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, HOME: join(dir, "home"), ...extra };
  for (const k of ["KUBECONFIG", "REDIS_URL", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT"])
    if (!(k in extra)) delete env[k];
  return env;
}

function run(
  file: string,
  args: string[],
  env: NodeJS.ProcessEnv = {},
): Promise<{ code: number; stdout: string; stderr: string; ms: number }> {
  // On the monotonic clock: a step of the wall clock (a VM restored from a snapshot) is no wait.
  const started = performance.now();
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [file, ...args],
      { cwd: root, env: shellEnv(env), timeout: 60_000 },
      (err, stdout, stderr) =>
        resolve({
          code: err ? (typeof err.code === "number" ? err.code : -1) : 0,
          stdout,
          stderr,
          ms: performance.now() - started,
        }),
    );
  });
}

function kubeconfig(name: string, server: string, token = "t"): string {
  const file = join(dir, name);
  writeFileSync(
    file,
    JSON.stringify({
      apiVersion: "v1",
      kind: "Config",
      // The simulated API server speaks plain http on loopback, which the client allows only so.
      clusters: [{ name: "c", cluster: { server, "insecure-skip-tls-verify": server.startsWith("http:") } }],
      users: [{ name: "u", user: { token } }],
      contexts: [{ name: "x", context: { cluster: "c", user: "u" } }],
      "current-context": "x",
    }),
  );
  return file;
}

/** Each component as its Deployment or sidecar starts it, ports chosen by the system. */
const COMPONENTS: Record<string, string[]> = {
  gateway: ["gateway", "--port", "0", "--metrics-port", "0"],
  worker: ["worker", "--metrics-port", "0"],
  mirror: ["mirror", "--metrics-port", "0"],
  "flux sidecar": ["sidecar", "--applier", "flux", "--metrics-port", "0"],
  "argocd sidecar": ["sidecar", "--applier", "argocd", "--metrics-port", "0"],
  "webhook applier": ["sidecar", "--applier", "webhook", "--metrics-port", "0"],
};

const oneLine = (stderr: string) => {
  const lines = stderr.trim().split("\n");
  expect(lines, stderr).toHaveLength(1);
  expect(stderr).not.toMatch(/^\s+at /m);
  return lines[0] as string;
};

describe("a component started without what it needs", () => {
  let closedApi: string;
  let closedRedis: string;
  let api: ApiServer;
  beforeAll(async () => {
    closedApi = `https://127.0.0.1:${await freePort()}`;
    closedRedis = `redis://127.0.0.1:${await freePort()}`;
    api = await startApiServer();
  });
  afterAll(async () => api?.close());

  describe.concurrent.each(Object.entries(COMPONENTS))("%s", (_name, args) => {
    it("names the API server it cannot reach and its answer, and exits 1 (--kubeconfig)", async () => {
      const file = kubeconfig(`closed-${args.join("-")}`, closedApi);
      const r = await run(bin, [...args, "--kubeconfig", file, "--startup-wait", "1s"], {
        REDIS_URL: testRedisUrl(),
      });
      expect(r.code).toBe(1);
      expect(oneLine(r.stderr)).toMatch(
        new RegExp(
          `^applygate ${args[0]}: cannot reach the Kubernetes API server at ${closedApi} .*: connection refused \\(ECONNREFUSED\\)$`,
        ),
      );
    });

    it.skipIf(args[0] === "sidecar" && args[2] !== "webhook")(
      "reads KUBECONFIG as kubectl does, and names Redis when it does not answer",
      async () => {
        const file = join(dir, `api-${args.join("-")}`);
        await api.writeKubeconfig(file);
        const r = await run(bin, [...args, "--redis-url", closedRedis, "--startup-wait", "1s"], {
          KUBECONFIG: file,
        });
        expect(r.code).toBe(1);
        expect(oneLine(r.stderr)).toMatch(
          new RegExp(
            `^applygate ${args[0]}: cannot reach Redis at ${closedRedis} .*: connection refused \\(ECONNREFUSED\\)$`,
          ),
        );
      },
    );

    it("without any kubeconfig and outside a cluster, says so and exits 2", async () => {
      const r = await run(bin, args, { REDIS_URL: testRedisUrl() });
      expect(r.code).toBe(2);
      expect(oneLine(r.stderr)).toMatch(/no kubeconfig: set --kubeconfig or KUBECONFIG/);
    });
  });

  it("a sidecar beside Flux or Argo CD starts without Redis all the same, not ready, and says why once", async () => {
    const file = join(dir, "api-sidecar-no-redis");
    await api.writeKubeconfig(file);
    const port = await freePort();
    const child = spawn(
      process.execPath,
      [bin, "sidecar", "--applier", "flux", "--redis-url", closedRedis, "--metrics-port", String(port)],
      { cwd: root, env: shellEnv({ KUBECONFIG: file }) },
    );
    let out = "";
    child.stdout.on("data", (c) => {
      out += c;
    });
    child.stderr.on("data", (c) => {
      out += c;
    });
    try {
      // The pod's probe (/healthz) answers: the container is not restarted, the applier beside it runs on.
      const ready = await until(async () => {
        if (child.exitCode !== null) throw new Error(`exited ${child.exitCode}: ${out}`);
        const health = await fetch(`http://127.0.0.1:${port}/healthz`).catch(() => undefined);
        return health?.status === 200 ? await fetch(`http://127.0.0.1:${port}/readyz`) : undefined;
      }, "the sidecar's /healthz");
      expect(ready.status).toBe(503);
      const warned = out.split("\n").filter((l) => l.includes("cannot reach Redis"));
      expect(warned).toHaveLength(1);
      expect(warned[0]).toContain(`cannot reach Redis at ${closedRedis}`);
      expect(warned[0]).toContain("connection refused (ECONNREFUSED)");
    } finally {
      child.kill("SIGTERM");
      await new Promise((r) => child.once("exit", r));
    }
  });

  it("an API server that refuses the credentials is named with its answer", async () => {
    const file = kubeconfig("bad-token", api.url, "not-a-token");
    const r = await run(
      bin,
      ["worker", "--kubeconfig", file, "--startup-wait", "1s", "--metrics-port", "0"],
      {
        REDIS_URL: testRedisUrl(),
      },
    );
    expect(r.code).toBe(1);
    expect(oneLine(r.stderr)).toMatch(
      new RegExp(
        `^applygate worker: cannot reach the Kubernetes API server at ${api.url} .*: HTTP 401 Unauthorized$`,
      ),
    );
  });

  it("gives up once --startup-wait ran out, not before and not never", async () => {
    const file = kubeconfig("closed-wait", closedApi);
    const r = await run(bin, ["worker", "--kubeconfig", file, "--startup-wait", "3s", "--metrics-port", "0"]);
    expect(r.code).toBe(1);
    // The wait is measured from within the process: its start-up comes on top, never off it.
    expect(r.ms).toBeGreaterThanOrEqual(3_000);
    expect(r.ms).toBeLessThan(30_000);
  });
});

describe("--version", () => {
  it("the CLI and each of its commands print the package's version", async () => {
    for (const args of [
      ["--version"],
      ...Object.values(COMPONENTS).map((a) => [...a, "--version"]),
      ["status", "--version"],
    ]) {
      const r = await run(bin, args);
      expect(r.code).toBe(0);
      expect(r.stdout).toBe(`applygate ${version}\n`);
    }
  });

  it("as the kubectl plugin it names itself so", async () => {
    const plugin = join(dir, "kubectl-applygate");
    symlinkSync(bin, plugin);
    const r = await run(plugin, ["--version"]);
    expect(r.code).toBe(0);
    expect(r.stdout).toBe(`kubectl applygate ${version}\n`);
  });
});
