/** `applygate worker` as a process: targets from a YAML file, a write published, a clean stop on SIGTERM. */
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { COMMIT_STATUS_POLL_MS } from "../../queue/apply/index.js";
import { ConfigError, helpText, loadConfig } from "../../queue/config.js";
import { freePort } from "../../queue/redis.js";
import { workerSettings } from "../../queue/worker-main.js";
import { configMapWrite, type Harness, harness, waitFor } from "./harness.js";

const cli = new URL("../../queue/cli/applygate.mjs", import.meta.url).pathname;

describe("applygate worker's settings", () => {
  it("--help and docs/worker.md list every setting with its environment variable", () => {
    const help = helpText("worker", "run branch workers", workerSettings);
    const doc = readFileSync(new URL("../../docs/worker.md", import.meta.url), "utf8");
    for (const s of Object.values(workerSettings)) {
      if (s.flag === "help") continue;
      expect(help).toContain(`--${s.flag} <value>`);
      const row = doc.split("\n").find((l) => l.startsWith(`| \`--${s.flag}\``));
      expect(row, `docs/worker.md documents --${s.flag}`).toBeDefined();
      if (s.env) expect(row).toContain(`\`${s.env}\``);
    }
  });
});

describe("applygate worker's balancing switch", () => {
  it("is on by default; --balance false or APPLYGATE_BALANCE=false turns it off", () => {
    expect(loadConfig(workerSettings, [], {}).config.balance).toBe(true);
    expect(loadConfig(workerSettings, ["--balance", "false"], {}).config.balance).toBe(false);
    expect(loadConfig(workerSettings, ["--balance=off"], {}).config.balance).toBe(false);
    expect(loadConfig(workerSettings, [], { APPLYGATE_BALANCE: "false" }).config.balance).toBe(false);
    expect(
      loadConfig(workerSettings, ["--balance", "true"], { APPLYGATE_BALANCE: "false" }).config.balance,
    ).toBe(true);
    expect(() => loadConfig(workerSettings, ["--balance", "maybe"], {})).toThrow(
      /--balance \(APPLYGATE_BALANCE\)/,
    );
  });
});

describe("applygate worker's commit status poll and Argo CD namespace", () => {
  it("reads --commit-status-poll and APPLYGATE_COMMIT_STATUS_POLL as a duration, 15 s by default", () => {
    expect(loadConfig(workerSettings, [], {}).config.commitStatusPoll).toBe(COMMIT_STATUS_POLL_MS);
    expect(COMMIT_STATUS_POLL_MS).toBe(15_000);
    expect(loadConfig(workerSettings, ["--commit-status-poll", "2s"], {}).config.commitStatusPoll).toBe(2000);
    expect(
      loadConfig(workerSettings, [], { APPLYGATE_COMMIT_STATUS_POLL: "500ms" }).config.commitStatusPoll,
    ).toBe(500);
    // The flag wins over the environment.
    expect(
      loadConfig(workerSettings, ["--commit-status-poll=1m"], { APPLYGATE_COMMIT_STATUS_POLL: "500ms" })
        .config.commitStatusPoll,
    ).toBe(60_000);
    expect(() => loadConfig(workerSettings, ["--commit-status-poll", "often"], {})).toThrow(ConfigError);
    expect(() => loadConfig(workerSettings, ["--commit-status-poll", "often"], {})).toThrow(
      /--commit-status-poll \(APPLYGATE_COMMIT_STATUS_POLL\)/,
    );
  });

  it("reads --argocd-namespace and APPLYGATE_ARGOCD_NAMESPACE, argocd by default", () => {
    expect(loadConfig(workerSettings, [], {}).config.argocdNamespace).toBe("argocd");
    expect(loadConfig(workerSettings, ["--argocd-namespace", "gitops"], {}).config.argocdNamespace).toBe(
      "gitops",
    );
    expect(loadConfig(workerSettings, [], { APPLYGATE_ARGOCD_NAMESPACE: "cd" }).config.argocdNamespace).toBe(
      "cd",
    );
    expect(() => loadConfig(workerSettings, ["--argocd-namespace", ""], {})).toThrow(ConfigError);
  });
});

describe("applygate worker", () => {
  let h: Harness;
  afterEach(async () => {
    await h.close();
  });

  it("publishes writes for the GitTargets of a targets file and stops on SIGTERM", async () => {
    h = await harness();
    const file = join(h.dir, "targets.yaml");
    await writeFile(
      file,
      `apiVersion: applygate.dev/v1alpha1
kind: GitProvider
metadata: {name: gp, namespace: team}
spec: {url: "${h.url}", type: gitea, webhookSecretRef: {name: hook}}
---
apiVersion: applygate.dev/v1alpha1
kind: GitTarget
metadata: {name: site, namespace: team}
spec: {providerRef: {name: gp}, branch: main, path: clusters/dev, commitWindow: {idleSeconds: 1, maxSeconds: 2}}
---
# The harness's writes hold ConfigMaps in namespace web.
apiVersion: applygate.dev/v1alpha1
kind: ScopeGrant
metadata: {name: team-web}
spec: {targets: [{namespace: team}], namespaces: [web]}
`,
    );
    const port = await freePort();
    const child = spawn(
      process.execPath,
      [
        cli,
        "worker",
        "--targets-file",
        file,
        "--metrics-port",
        String(port),
        "--cache-dir",
        join(h.dir, "cache"),
      ],
      {
        env: {
          ...process.env,
          REDIS_URL: h.redis.url,
          APPLYGATE_REDIS_PREFIX: h.redis.prefix,
          LOG_LEVEL: "warn",
        },
        stdio: ["ignore", "inherit", "inherit"],
      },
    );
    const w = configMapWrite(h.key, "a", "1", { save: true });
    expect(await h.accept(w)).toBe(true);
    const commit = await waitFor("published", () => h.published(w.id));
    expect(await h.server.tip("site")).toBe(commit);
    const metrics = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    expect(metrics).toContain('applygate_worker_pushes_total{branch="');
    child.kill("SIGTERM");
    const code = await new Promise((r) => child.once("exit", r));
    expect(code).toBe(0);
  });
});
