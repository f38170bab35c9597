/**
 * Who may hold an applier: a team's claim naming the platform's Kustomization (`flux-system/infra`)
 * is refused and never sent an attempt; once flux-system grants the team's namespace, the claim
 * holds it; the grant removed, the Kustomization is handed back as on deleting the claim.
 */
import * as k8s from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { until } from "../playground/actors.js";
import { DEMO_BRANCH, DEMO_NAMESPACE, FLUX_NAMESPACE } from "../playground/demo.js";
import { type Scene, startScene } from "./harness.js";

type Obj = { metadata: { finalizers?: string[] }; spec?: Record<string, unknown>; status?: Obj["spec"] };

const claimRef = { group: "applygate.dev", version: "v1alpha1", plural: "fluxclaims" };
const ksRef = { group: "kustomize.toolkit.fluxcd.io", version: "v1", plural: "kustomizations" };

describe("an applier in another namespace", () => {
  let s: Scene;
  let custom: k8s.CustomObjectsApi;
  beforeAll(async () => {
    s = await startScene();
    custom = s.a.kubeConfig.makeApiClient(k8s.CustomObjectsApi);
  });
  afterAll(async () => s?.stop());

  const claim = async () =>
    (await custom.getNamespacedCustomObject({ ...claimRef, namespace: "team-a", name: "infra" })) as Obj;
  const ks = async () =>
    (await custom.getNamespacedCustomObject({ ...ksRef, namespace: FLUX_NAMESPACE, name: "infra" })) as Obj;
  const condition = (o: Obj, type: string) =>
    ((o.status?.conditions ?? []) as Array<{ type: string; status: string; reason: string }>).find(
      (c) => c.type === type,
    );

  it("is refused without an ApplierGrant there, and held once it exists", async () => {
    // The demo GitProvider admits team-a's GitTargets.
    await custom.patchNamespacedCustomObject(
      {
        group: "applygate.dev",
        version: "v1alpha1",
        plural: "gitproviders",
        namespace: DEMO_NAMESPACE,
        name: "demo",
        body: { spec: { accessFrom: { namespaces: ["team-a"] } } },
      },
      k8s.setHeaderOptions("Content-Type", k8s.PatchStrategy.MergePatch),
    );
    await s.a.api.applyYaml(`
apiVersion: v1
kind: Namespace
metadata: {name: team-a}
---
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {name: infra, namespace: ${FLUX_NAMESPACE}}
spec:
  interval: 1h
  prune: true
  path: ./apps/flux
  sourceRef: {kind: GitRepository, name: demo}
---
apiVersion: applygate.dev/v1alpha1
kind: FluxClaim
metadata: {name: infra, namespace: team-a}
spec: {kustomizationRef: {name: infra, namespace: ${FLUX_NAMESPACE}}}
---
apiVersion: applygate.dev/v1alpha1
kind: GitTarget
metadata: {name: infra, namespace: team-a}
spec:
  providerRef: {name: demo, namespace: ${DEMO_NAMESPACE}}
  branch: ${DEMO_BRANCH}
  path: apps/team-a
  claimRef: {kind: FluxClaim, name: infra}
`);
    const refused = await until(async () => {
      const c = condition(await claim(), "Ready");
      return c?.reason === "ApplierNamespaceNotAllowed" && c;
    }, "the claim refused");
    expect(refused.status).toBe("False");
    // Let the worker list the new GitTarget a few times: still no attempt, nothing held.
    const listed = Date.now();
    await until(async () => Date.now() - listed > 3 * s.a.timers.listIntervalMs, "three listings");
    const held = (await claim()).metadata.finalizers ?? [];
    expect(held).toEqual([]);
    expect((await ks()).spec?.suspend).toBeUndefined();
    const attempts = () => s.progress.attempts().filter((a) => a.claim.namespace === "team-a");
    expect(attempts()).toEqual([]);

    await s.a.api.applyYaml(`
apiVersion: applygate.dev/v1alpha1
kind: ApplierGrant
metadata: {name: team-a, namespace: ${FLUX_NAMESPACE}}
spec:
  from: [{namespace: team-a, kind: FluxClaim}]
  to: [{name: infra}]
`);
    await until(async () => condition(await claim(), "InControl")?.status === "True", "the claim to hold");
    expect((await ks()).spec?.suspend).toBe(true);

    await custom.deleteNamespacedCustomObject({
      group: "applygate.dev",
      version: "v1alpha1",
      plural: "appliergrants",
      namespace: FLUX_NAMESPACE,
      name: "team-a",
    });
    await until(async () => ((await claim()).metadata.finalizers ?? []).length === 0, "handed back");
    expect(condition(await claim(), "Ready")?.reason).toBe("ApplierNamespaceNotAllowed");
    await until(async () => (await ks()).spec?.suspend !== true, "the Kustomization resumed");
  });
});
