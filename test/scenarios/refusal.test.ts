/**
 * A refusal reverted: an edit made on the cluster that the mirror refused (it will never be in
 * Git). The GitTarget opted into `onRefusal: Reapply`, so the worker asks its applier for one
 * Refusal apply of the tip, and the cluster goes back to what Git holds.
 */
import * as k8s from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { clusterValue, USER_MANAGER, until } from "../playground/actors.js";
import { DEMO_APPS, DEMO_NAMESPACE, demoConfigMap, INTAKE_TOKEN } from "../playground/demo.js";
import { operationsOf, type Scene, startScene } from "./harness.js";

describe("a refusal", () => {
  let s: Scene;
  beforeAll(async () => {
    s = await startScene();
  });
  afterAll(async () => s?.stop());

  it("is reverted by one Refusal apply of the tip", async () => {
    const core = s.a.kubeConfig.makeApiClient(k8s.CoreV1Api);
    await core.patchNamespacedConfigMap(
      {
        name: DEMO_APPS.flux.name,
        namespace: DEMO_APPS.flux.namespace,
        body: demoConfigMap("flux", { greeting: "refused" }),
        fieldManager: USER_MANAGER,
        force: true,
      },
      k8s.setHeaderOptions("Content-Type", k8s.PatchStrategy.ServerSideApply),
    );
    expect((await clusterValue(s.a, "flux")).greeting).toBe("refused");
    const res = await fetch(`${s.a.gateway.url}/v1/targets/${DEMO_NAMESPACE}/flux-app/refusals`, {
      method: "POST",
      headers: { authorization: `Bearer ${INTAKE_TOKEN}`, "content-type": "application/json" },
      body: JSON.stringify({
        object: {
          apiVersion: "v1",
          kind: "ConfigMap",
          namespace: DEMO_APPS.flux.namespace,
          name: DEMO_APPS.flux.name,
        },
        reason: "the greeting is not allowed",
      }),
    });
    expect(res.status).toBeLessThan(300);
    await until(
      async () => (await clusterValue(s.a, "flux")).greeting === "hello",
      "the refused edit to be reverted",
    );
    const ops = operationsOf(s, "flux");
    expect(ops).toHaveLength(1);
    expect(ops[0]!.attempt.targets.map((t) => t.reason)).toEqual(["Refusal"]);
    expect(ops[0]!.attempt.commit).toBe(s.start);
    await until(
      async () => operationsOf(s, "flux")[0]?.phases.includes("Succeeded"),
      "the Refusal apply to succeed",
    );
    expect(operationsOf(s, "argocd")).toHaveLength(0);
  });
});
