/**
 * The watch plane end to end, every component under its own ServiceAccount: a `kubectl edit` of
 * the demo ConfigMap becomes exactly one commit in Git with no intake call, authored by the edit's
 * field manager; the apply that follows (a push to Git that Flux applies) is the applier's own
 * write, judged by the worker as the apply landing, and is not mirrored back.
 */
import * as k8s from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { branchKey } from "../../queue/contract.js";
import { branchKeys, writePublishedKey } from "../../queue/keys.js";
import { connectRedis } from "../../queue/redis.js";
import { clusterValue, commitsSince, foreignPush, gitValue, until } from "../playground/actors.js";
import { DEMO_APPS, DEMO_NAMESPACE } from "../playground/demo.js";
import { type Scene, startScene } from "./harness.js";

const git = async (args: string[]) => {
  const { execFile } = await import("node:child_process");
  return new Promise<string>((resolve, reject) =>
    execFile("git", args, (err, out) => (err ? reject(err) : resolve(out))),
  );
};

describe("the watch plane", () => {
  let s: Scene;
  beforeAll(async () => {
    s = await startScene({ withMirror: true });
  });
  afterAll(async () => s?.stop());

  const inboxEmpty = async () => {
    const r = connectRedis(s.a.redis.url);
    try {
      return (await r.xlen(branchKeys(s.a.prefix, branchKey(s.a.demo.repoUrl, s.a.demo.branch)).inbox)) === 0;
    } finally {
      r.disconnect();
    }
  };

  it("mirrors a kubectl edit as one commit with no intake call, and not the apply that follows", async () => {
    const mirror = s.a.mirror!;
    // The start's snapshot changed nothing: the cluster holds what Git holds.
    await until(inboxEmpty, "the start's snapshot settled");
    expect(await commitsSince(s.a, s.start)).toEqual([]);

    // kubectl edit: a read, then an update (PUT) of the whole object under kubectl-edit.
    const core = s.a.kubeConfig.makeApiClient(k8s.CoreV1Api);
    const app = DEMO_APPS.flux;
    const cm = await core.readNamespacedConfigMap({ name: app.name, namespace: app.namespace });
    cm.data = { ...cm.data, greeting: "edited" };
    await core.replaceNamespacedConfigMap({
      name: app.name,
      namespace: app.namespace,
      body: cm,
      fieldManager: "kubectl-edit",
    });

    await until(async () => (await gitValue(s.a, "flux")) === "edited", "the edit to reach Git");
    const [edit, ...more] = await commitsSince(s.a, s.start);
    expect(more).toEqual([]);
    const author = await git([
      "--git-dir",
      `${s.a.git.root}/demo.git`,
      "log",
      "-1",
      "--format=%an <%ae>",
      edit!.sha,
    ]);
    expect(author.trim()).toBe("kubectl-edit <kubectl-edit@cluster.local>");
    // No intake call: the gateway counted none.
    const metrics = await (await fetch(`${s.a.gateway.url}/metrics`)).text();
    expect(metrics).toContain("# TYPE applygate_gateway_intake_total counter");
    expect(metrics.split("\n").filter((l) => l.startsWith("applygate_gateway_intake_total{"))).toEqual([]);
    const handed = mirror.sent.filter((w) => w.author.name === "kubectl-edit");
    expect(handed).toHaveLength(1);
    expect(handed[0]).toMatchObject({
      target: { namespace: DEMO_NAMESPACE, name: "flux-app" },
      path: "apps/flux",
    });
    const trailer = await git([
      "--git-dir",
      `${s.a.git.root}/demo.git`,
      "log",
      "-1",
      "--format=%B",
      edit!.sha,
    ]);
    expect(trailer).toContain(handed[0]!.id);

    // A push to Git that Flux applies: kustomize-controller writes the ConfigMap, the mirror sees
    // the applier's own write, and the worker keeps it out of Git (Git already holds its content).
    const sentBefore = mirror.sent.length;
    const pushed = await foreignPush(s.a, "flux", "pushed");
    await until(
      async () => (await clusterValue(s.a, "flux")).greeting === "pushed",
      "Flux to apply the push",
    );
    await until(
      () => mirror.sent.slice(sentBefore).some((w) => w.applierAuthored?.manager === "kustomize-controller"),
      "the mirror to see the applier's write",
    );
    await until(inboxEmpty, "the worker to settle the applier's write");
    // Judged the apply landing: settled without a publication, where an edit (even one that
    // changes nothing) is recorded as published in the tip that carries it.
    const echo = mirror.sent
      .slice(sentBefore)
      .find((w) => w.applierAuthored?.manager === "kustomize-controller")!;
    const r = connectRedis(s.a.redis.url);
    try {
      expect(await r.get(writePublishedKey(s.a.prefix, handed[0]!.id))).toBe(edit!.sha);
      expect(await r.get(writePublishedKey(s.a.prefix, echo.id))).toBeNull();
    } finally {
      r.disconnect();
    }
    const after = await commitsSince(s.a, s.start);
    expect(after.map((c) => c.sha)).toEqual([edit!.sha, pushed]);
    expect(await gitValue(s.a, "flux")).toBe("pushed");
  });

  it("reports the WatchRules Ready with their counts", async () => {
    const custom = s.a.kubeConfig.makeApiClient(k8s.CustomObjectsApi);
    await until(async () => {
      const r = (await custom.getNamespacedCustomObject({
        group: "applygate.dev",
        version: "v1alpha1",
        namespace: DEMO_NAMESPACE,
        plural: "watchrules",
        name: "flux-app",
      })) as { status?: { mirrored?: number; conditions?: { type: string; status: string }[] } };
      return (
        (r.status?.mirrored ?? 0) >= 2 &&
        r.status?.conditions?.find((c) => c.type === "Ready")?.status === "True"
      );
    }, "the flux-app WatchRule to be Ready and count what it mirrored");
  });
});
