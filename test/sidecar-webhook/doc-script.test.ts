/**
 * docs/webhook-applier.md's plain script, run as written: the `deploy.mjs` block is taken from the
 * guide, started with node, and pointed at by a WebhookClaim in mode response. A request signed
 * with the claim's key applies the folder at the commit it names (server-side apply with the
 * script's field manager, through the real kubectl) and ends Succeeded; one signed with another
 * key is refused by the script and ends Failed.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { objectPath, objectYaml } from "../../queue/git/layout.js";
import { gitOk } from "../git/cli.js";
import { KUBECTL_AVAILABLE } from "../manifests/kustomize.js";
import { fileWorld } from "../support/file-world.js";
import { NS, startWebhookWorld, until } from "./harness.js";

const FOLDER = "apps/web";
const MANAGER = "team-a-deployer";
const configMap = (greeting: string) => ({
  apiVersion: "v1",
  kind: "ConfigMap",
  metadata: { name: "web-config", namespace: NS },
  data: { greeting },
});

/** The guide's `deploy.mjs` code block, exactly as the guide shows it. */
async function scriptFromGuide(): Promise<string> {
  const text = await readFile(new URL("../../docs/webhook-applier.md", import.meta.url), "utf8");
  const block = [...text.matchAll(/```js\n([\s\S]*?)```/g)]
    .map((m) => m[1] ?? "")
    .find((b) => b.includes("deploy.mjs"));
  if (!block) throw new Error("docs/webhook-applier.md has no deploy.mjs block");
  return block;
}

let script: ChildProcess | undefined;
let port = 0;
let commit = "";
const output: string[] = [];

const w = fileWorld(async () => {
  const w = await startWebhookWorld();
  const work = await mkdtemp(join(tmpdir(), "applygate-doc-script-"));
  w.onStop(() => rm(work, { recursive: true, force: true }));
  const ref = { apiVersion: "v1", kind: "ConfigMap", namespace: NS, name: "web-config" };
  const url = await w.git.createRepo("web", { [objectPath(FOLDER, ref)]: objectYaml(configMap("from-git")) });
  commit = (await w.git.tip("web")) as string;
  const repoDir = join(work, "repo.git");
  await gitOk(["clone", "-q", "--bare", url, repoDir]);
  const kubeconfig = join(work, "kubeconfig");
  await w.api.writeKubeconfig(kubeconfig);
  const file = join(work, "deploy.mjs");
  await writeFile(file, await scriptFromGuide());
  const child = spawn(process.execPath, [file], {
    env: {
      PATH: process.env.PATH,
      HOME: work,
      KUBECONFIG: kubeconfig,
      HMAC_KEY: "script-key",
      REPO_DIR: repoDir,
      FOLDER,
      FIELD_MANAGER: MANAGER,
      PORT: "0",
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  script = child;
  w.onStop(() => script?.kill());
  child.stdout?.on("data", (c: Buffer) => output.push(c.toString()));
  child.stderr?.on("data", (c: Buffer) => output.push(c.toString()));
  await until(async () => /listening on \d+/.test(output.join("")), "the script to listen");
  port = Number(/listening on (\d+)/.exec(output.join(""))?.[1]);
  return w;
});

describe.skipIf(!KUBECTL_AVAILABLE)(
  "the guide's plain script (deploy.mjs) as a mode-response endpoint",
  () => {
    it("applies the folder at the commit it is sent, under its field manager: Succeeded", async () => {
      await w.createClaim(
        "script",
        { url: `http://127.0.0.1:${port}/apply`, mode: "response", timeoutSeconds: 30 },
        "script-key",
      );
      const a = await w.send("script", undefined, commit);
      await w.reaches("script", ["Succeeded", "Failed"], a.token);
      expect(await w.operation("script"), output.join("")).toMatchObject({ phase: "Succeeded", commit });
      const cm = await w.kube.core.readNamespacedConfigMap({ name: "web-config", namespace: NS });
      expect(cm.data?.greeting).toBe("from-git");
      expect(cm.metadata?.managedFields?.map((f) => f.manager)).toContain(MANAGER);
    });

    it("refuses a request signed with another key (401): Failed, nothing applied", async () => {
      await w.createClaim(
        "script-wrong",
        { url: `http://127.0.0.1:${port}/apply`, mode: "response" },
        "other-key",
      );
      const a = await w.send("script-wrong", undefined, commit);
      await w.reaches("script-wrong", "Failed", a.token);
      expect(await w.operation("script-wrong")).toMatchObject({
        outcome: "HTTP401",
        message: "the endpoint answered 401 Unauthorized",
      });
    });
  },
);
