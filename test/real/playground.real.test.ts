// `npm start -- --real` as a person runs it: the ready screen, a `git push` to the Git URL it prints
// applied once by real Flux and by real Argo CD through applygate, both on their status as the
// screen says to look, then Ctrl-C stopping everything and removing its folder.
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { CoreV1Api, CustomObjectsApi, KubeConfig } from "@kubernetes/client-node";
import { afterAll, describe, expect, it } from "vitest";
import { gitOk } from "../git/cli.js";
import { untilWith } from "../support/wait.js";
import { ARGOCD_BINARIES, CONTROL_PLANE, FLUX_BINARIES, findRealBinaries } from "./binaries.js";

const bins = findRealBinaries([...CONTROL_PLANE, ...FLUX_BINARIES, ...ARGOCD_BINARIES]);
if (!bins.built) console.warn(`\n!!! SKIPPED test/real/playground.real.test.ts: ${bins.message}\n`);

const CLI = fileURLToPath(new URL("../../queue/cli/applygate.mjs", import.meta.url));
const until = untilWith({ timeoutMs: 240_000, everyMs: 200, retryErrors: true });

describe.skipIf(!bins.built)("applygate playground --real", () => {
  let child: ChildProcess | undefined;
  let out = "";
  let work: string | undefined;
  afterAll(async () => {
    if (child && child.exitCode === null) child.kill("SIGKILL");
    if (work) await rm(work, { recursive: true, force: true });
  });

  it("applies a push once with real Flux and real Argo CD, and Ctrl-C stops everything", async () => {
    child = spawn(process.execPath, [CLI, "playground", "--real"], { stdio: ["ignore", "pipe", "pipe"] });
    child.stdout?.on("data", (b: Buffer) => {
      out += b.toString();
    });
    child.stderr?.on("data", (b: Buffer) => {
      out += b.toString();
    });
    const exited = new Promise<number | null>((r) => child?.once("exit", (code) => r(code)));
    await until(() => out.includes("applygate playground --real is running"), "the ready screen");
    const kubeconfig = out.match(/export KUBECONFIG=(\S+)/)?.[1];
    const repo = out.match(/Git {10}(\S+)/)?.[1];
    const dir = out.match(/Logs {9}(\S+)/)?.[1];
    expect({ kubeconfig, repo, dir }).toEqual({
      kubeconfig: expect.stringMatching(/admin\.kubeconfig$/),
      repo: expect.stringMatching(/^http:\/\/127\.0\.0\.1:\d+\/demo\.git$/),
      dir: expect.any(String),
    });
    const kc = new KubeConfig();
    kc.loadFromFile(kubeconfig as string);
    const core = kc.makeApiClient(CoreV1Api);
    const custom = kc.makeApiClient(CustomObjectsApi);

    // As the screen says: clone, edit each applier's file, commit, push.
    work = await mkdtemp(join(tmpdir(), "playground-real-"));
    const clone = join(work, "demo");
    await gitOk(["clone", "-q", repo as string, clone]);
    const files = (out.match(/edit (\S+) \(or the argocd one\)/)?.[1] ?? "").replace("/flux/", "/{}/");
    for (const [app, folder] of [
      ["flux-app", "flux"],
      ["argo-app", "argocd"],
    ] as const) {
      const file = join(clone, files.replace("{}", folder).replace("flux-app", app));
      await writeFile(file, (await readFile(file, "utf8")).replace("greeting: hello", "greeting: pushed"));
    }
    await gitOk([
      "-C",
      clone,
      "-c",
      "user.name=u",
      "-c",
      "user.email=u@example.com",
      "commit",
      "-qam",
      "edit",
    ]);
    await gitOk(["-C", clone, "push", "-q"]);
    const sha = (await gitOk(["-C", clone, "rev-parse", "HEAD"])).trim();

    for (const name of ["flux-app", "argo-app"])
      await until(
        async () =>
          (await core.readNamespacedConfigMap({ namespace: "demo", name })).data?.greeting === "pushed",
        `${name} applied`,
      );
    const ks = (await custom.getNamespacedCustomObject({
      group: "kustomize.toolkit.fluxcd.io",
      version: "v1",
      plural: "kustomizations",
      namespace: "flux-system",
      name: "demo",
    })) as { spec?: { suspend?: boolean }; status?: { lastAppliedRevision?: string } };
    expect(ks.status?.lastAppliedRevision).toBe(`main@sha1:${sha}`);
    const app = (await custom.getNamespacedCustomObject({
      group: "argoproj.io",
      version: "v1alpha1",
      plural: "applications",
      namespace: "argocd",
      name: "demo",
    })) as { status?: { operationState?: { phase?: string; syncResult?: { revision?: string } } } };
    expect(app.status?.operationState).toMatchObject({ phase: "Succeeded", syncResult: { revision: sha } });
    // Through applygate, once: each claim's last operation is this commit's, Succeeded.
    for (const [plural, name] of [
      ["fluxclaims", "flux-app"],
      ["argocdclaims", "argo-app"],
    ] as const) {
      const c = await until(async () => {
        const got = (await custom.getNamespacedCustomObject({
          group: "applygate.dev",
          version: "v1alpha1",
          plural,
          namespace: "demo",
          name,
        })) as { status?: { history?: { commit: string; phase: string }[] } };
        return got.status?.history?.some((h) => h.commit === sha) ? got : undefined;
      }, `${name}'s history to record ${sha}`);
      expect(c.status?.history?.filter((h) => h.commit === sha).map((h) => h.phase)).toEqual(["Succeeded"]);
    }

    child.kill("SIGINT");
    expect(await exited).toBe(0);
    expect(out).toContain("stopping…");
    expect(existsSync(dir as string)).toBe(false);
  });
});
