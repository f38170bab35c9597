/**
 * The playground with its third applier: a push touching all three folders is applied once by
 * each — Flux, Argo CD and the webhook deployer (called through its WebhookClaim, applying with
 * its own field manager, reporting back through the gateway) — and `kubectl get webhookclaims`
 * shows the claim Ready.
 */
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import * as k8s from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { objectYaml } from "../../queue/git/layout.js";
import { GitPeer } from "../git/peer.js";
import { KUBECTL_AVAILABLE } from "../manifests/kustomize.js";
import { apiEdit, foreignPush, gitValue } from "../playground/actors.js";
import {
  DEMO_APPS,
  DEMO_NAMESPACE,
  DEMO_WEBHOOK_APP,
  demoConfigMap,
  demoConfigPath,
  demoWebhookConfigMap,
  demoWebhookConfigPath,
} from "../playground/demo.js";
import { DEPLOYER_FIELD_MANAGER } from "../playground/deployer.js";
import { observeProgress } from "../playground/progress.js";
import { untilWith } from "../support/wait.js";
import { type Scene, startScene } from "./harness.js";

const run = promisify(execFile);
const until = untilWith({ timeoutMs: 30_000, everyMs: 50, retryErrors: true });

let s: Scene;
let core: k8s.CoreV1Api;
let custom: k8s.CustomObjectsApi;
beforeAll(async () => {
  s = await startScene();
  core = s.a.kubeConfig.makeApiClient(k8s.CoreV1Api);
  custom = s.a.kubeConfig.makeApiClient(k8s.CustomObjectsApi);
}, 120_000);
afterAll(async () => s?.stop(), 60_000);

type Claim = {
  status?: {
    lastAppliedCommit?: string;
    conditions?: { type: string; status: string }[];
    operation?: { phase: string; commit: string; requestedAt: string; completedAt?: string };
  };
};
const webhookClaim = async () =>
  (await custom.getNamespacedCustomObject({
    group: "applygate.dev",
    version: "v1alpha1",
    plural: "webhookclaims",
    namespace: DEMO_NAMESPACE,
    name: DEMO_WEBHOOK_APP.claim,
  })) as Claim;
const greeting = async (namespace: string) =>
  (await core.readNamespacedConfigMap({ name: "app-config", namespace }).catch(() => undefined))?.data
    ?.greeting;

describe("the playground's webhook applier", () => {
  it("holds its folder from the start: the converge applied by the deployer, the claim Ready", async () => {
    await until(async () => {
      const c = await webhookClaim();
      return (
        c.status?.lastAppliedCommit === s.start &&
        c.status.conditions?.some((x) => x.type === "Ready" && x.status === "True")
      );
    }, "the WebhookClaim Ready at the start tip");
    const cm = await core.readNamespacedConfigMap({
      name: "app-config",
      namespace: DEMO_WEBHOOK_APP.namespace,
    });
    expect(cm.data?.greeting).toBe("hello");
    expect(cm.metadata?.managedFields?.map((f) => f.manager)).toContain(DEPLOYER_FIELD_MANAGER);
  });

  it.skipIf(!KUBECTL_AVAILABLE)("kubectl get webhookclaims -A shows it Ready", async () => {
    const { stdout } = await run("kubectl", [
      "--kubeconfig",
      s.a.kubeconfigPath,
      "get",
      "webhookclaims",
      "-A",
    ]);
    const [header, row] = stdout.trim().split("\n");
    expect(header).toMatch(/NAMESPACE\s+NAME\s+READY\s+INCONTROL\s+PHASE\s+COMMIT\s+MODE\s+AGE/);
    expect(row).toMatch(
      new RegExp(
        `${DEMO_NAMESPACE}\\s+${DEMO_WEBHOOK_APP.claim}\\s+True\\s+True\\s+Succeeded\\s+[0-9a-f]{40}\\s+callback`,
      ),
    );
  });

  it("a push touching the three folders is applied by all three appliers", async () => {
    const peer = await GitPeer.clone(s.a.demo.repoUrl, s.a.demo.branch);
    let commit: string;
    try {
      await peer.writeFile(demoConfigPath("flux"), objectYaml(demoConfigMap("flux", { greeting: "three" })));
      await peer.writeFile(
        demoConfigPath("argocd"),
        objectYaml(demoConfigMap("argocd", { greeting: "three" })),
      );
      await peer.writeFile(demoWebhookConfigPath(), objectYaml(demoWebhookConfigMap({ greeting: "three" })));
      commit = await peer.commit("greet three times");
      expect((await peer.push()).ok).toBe(true);
    } finally {
      await peer.remove();
    }
    for (const ns of [DEMO_APPS.flux.namespace, DEMO_APPS.argocd.namespace, DEMO_WEBHOOK_APP.namespace]) {
      await until(async () => (await greeting(ns)) === "three", `the push applied in ${ns}`);
    }
    await until(
      async () => (await webhookClaim()).status?.lastAppliedCommit === commit,
      "webhook claim at the commit",
    );
    const op = (await webhookClaim()).status!.operation!;
    expect(op).toMatchObject({ phase: "Succeeded", commit });
    const ms = Date.parse(op.completedAt!) - Date.parse(op.requestedAt);
    // The figure the report quotes: request recorded → the deployer's Succeeded recorded.
    console.log(`webhook applier: send → Succeeded ${ms} ms`);
    expect(ms).toBeGreaterThanOrEqual(0);
  });

  it("the apply window judges the deployer's field manager: its late write over a newer edit makes a Repair due, and the edit wins", async () => {
    const attempts = await observeProgress({
      redisUrl: s.a.redis.url,
      prefix: s.a.prefix,
      kinds: ["webhook"],
    });
    // A build long enough for an API edit to land between the deployer's fetch and its apply.
    s.a.deployer.buildMs = 1500;
    try {
      const pushed = await foreignPush(s.a, "webhook", "pushed");
      await until(async () => s.a.deployer.fetched() === pushed, "the deployer to fetch the pushed commit");
      const edit = await apiEdit(s.a, "webhook", "edited");
      expect(edit.body.commit, JSON.stringify(edit)).toBeDefined();
      // The deployer applies the commit it fetched, over the edit: a late apply.
      await until(
        async () => s.a.deployer.applies.includes(pushed),
        "the deployer to apply the pushed commit",
      );
      const repair = await until(
        async () => attempts.attempts().find((at) => at.targets.some((t) => t.reason === "Repair")),
        "a Repair sent to the webhook applier",
      );
      expect(repair.applier).toMatchObject({ kind: "webhook", name: DEMO_WEBHOOK_APP.claim });
      await until(
        async () => (await greeting(DEMO_WEBHOOK_APP.namespace)) === "edited",
        "the edit back on the cluster",
      );
      await until(
        async () => (await webhookClaim()).status?.lastAppliedCommit === repair.commit,
        "the Repair applied",
      );
      expect(await gitValue(s.a, "webhook")).toBe("edited");
      expect(s.a.deployer.applies.at(-1)).toBe(repair.commit);
    } finally {
      s.a.deployer.buildMs = 0;
      await attempts.stop();
    }
  });
});
