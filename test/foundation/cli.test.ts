import { type ChildProcess, execFile, spawn } from "node:child_process";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { errorMessage } from "../../queue/errors.js";
import { readAuditLog } from "../cluster/apiserver/index.js";
import { auditFindings } from "../playground/audit-check.js";
import { type Component, deployedIdentities, usernameOf } from "../playground/identities.js";
import { until } from "../support/wait.js";

const root = join(dirname(fileURLToPath(import.meta.url)), "../..");
const bin = join(root, "queue/cli/applygate.mjs");

function applygate(
  args: string[],
  env: NodeJS.ProcessEnv = {},
): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [bin, ...args],
      { cwd: root, env: { ...process.env, ...env } },
      (err, stdout, stderr) => {
        resolve({ code: err ? Number(err.code ?? 1) : 0, stdout, stderr });
      },
    );
  });
}

describe("the applygate command", () => {
  it.each(["gateway", "worker", "sidecar", "mirror", "playground"])("prints help for %s", async (cmd) => {
    const r = await applygate([cmd, "--help"]);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain(`usage: applygate ${cmd}`);
  });

  it("says required only of settings that are", async () => {
    const r = await applygate(["gateway", "--help"]);
    // --config and --dashboard-token have no default and are optional.
    expect(r.stdout).not.toMatch(/default required/);
    expect(r.stdout).toMatch(/--config <value>\n.*default unset\]/);
    const sidecar = await applygate(["sidecar", "--help"]);
    expect(sidecar.stdout).toMatch(/--applier <value>\n.*default required\]/);
  });

  it("lists its commands and refuses an unknown one", async () => {
    const r = await applygate(["nonsense"]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('unknown command "nonsense"');
  });

  it("exits non-zero with one line naming a bad setting", async () => {
    const r = await applygate(["gateway", "--port", "abc", "--dashboard-insecure"]);
    expect(r.code).not.toBe(0);
    const lines = r.stderr.trim().split("\n");
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/--port.*abc/);
  });

  it("names a bad environment value", async () => {
    const r = await applygate(["gateway", "--dashboard-insecure"], { APPLYGATE_GATEWAY_PORT: "99999" });
    expect(r.code).not.toBe(0);
    expect(r.stderr.trim().split("\n")).toHaveLength(1);
    expect(r.stderr).toMatch(/APPLYGATE_GATEWAY_PORT/);
  });
});

describe("the playground", () => {
  it("prints what it serves, answers /healthz, and stops on Ctrl-C", async () => {
    const child: ChildProcess = spawn(process.execPath, [bin, "playground"], {
      cwd: root,
      env: { ...process.env, REDIS_URL: process.env.TEST_REDIS_URL, LOG_LEVEL: "warn" },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    child.stdout!.on("data", (c) => (out += c));
    child.stderr!.on("data", (c) => (out += c));
    const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
    await until(
      () => {
        if (child.exitCode !== null) throw new Error(`playground exited:\n${out}`);
        return /Ctrl-C stops everything/.test(out);
      },
      "the playground to start",
      { timeoutMs: 60_000, everyMs: 100 },
    ).catch((err) => {
      throw new Error(`${errorMessage(err)}\n${out}`);
    });
    expect(out).toMatch(/Redis\s+redis:\/\//);
    expect(out).toContain("kubectl edit cm -n flux-app app-config");
    expect(out).toMatch(/Git\s+http:\/\/127\.0\.0\.1:\d+\/demo\.git/);
    const gateway = /Gateway\s+(http:\/\/127\.0\.0\.1:\d+)/.exec(out)?.[1];
    expect(gateway).toBeDefined();
    const health = await fetch(`${gateway}/healthz`);
    expect(health.status).toBe(200);
    // /metrics on a port of its own, as deployed: the receivers' port answers it with the miss.
    const metrics = /Metrics\s+(http:\/\/127\.0\.0\.1:\d+)\/metrics/.exec(out)?.[1];
    expect(metrics).toBeDefined();
    expect(metrics).not.toBe(gateway);
    expect(await (await fetch(`${metrics}/metrics`)).text()).toContain("applygate_gateway_deliveries_total");
    expect((await fetch(`${gateway}/metrics`)).status).toBe(404);

    // Each component runs as its ServiceAccount with the manifests' RBAC; the audit log the ready
    // screen names shows each at work (both sidecars hold their claims) and none refused or admin.
    const auditLog = /Audit log\s+(\S+audit\.log)/.exec(out)?.[1];
    expect(auditLog).toBeDefined();
    const sa = deployedIdentities().serviceAccounts;
    const users = Object.fromEntries(
      (Object.keys(sa) as Component[]).map((c) => [c, usernameOf(sa[c])]),
    ) as Record<Component, string>;
    await until(
      () => {
        const events = readAuditLog(auditLog!);
        const wroteClaim = (c: "flux" | "argocd") =>
          events.some(
            (e) =>
              e.user.username === users[c] &&
              e.verb === "patch" &&
              e.objectRef?.subresource === "status" &&
              e.responseStatus.code === 200,
          );
        const f = auditFindings(events, users);
        return (
          wroteClaim("flux") &&
          wroteClaim("argocd") &&
          f.requests.gateway &&
          f.requests.worker &&
          f.requests.mirror &&
          f
        );
      },
      "every component at work in the audit log",
      { timeoutMs: 60_000, everyMs: 200 },
    );
    const f = auditFindings(readAuditLog(auditLog!), users);
    expect(f.forbidden).toEqual([]);
    expect(f.invalid).toEqual([]);
    expect(f.admin).toEqual([]);
    child.kill("SIGINT");
    expect(await exited).toBe(0);
    await expect(fetch(`${gateway}/healthz`)).rejects.toThrow();
  }, 180_000);
});
