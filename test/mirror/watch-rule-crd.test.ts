/**
 * The WatchRule CRD as the API server enforces it: a rule names a GitTarget and at least one kind,
 * each kind by kind or by resource (exactly one), and its status carries the counts and conditions.
 */
import * as k8s from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { crdFiles } from "../../queue/crds/files.js";
import { watchRule } from "../../queue/crds/index.js";
import { type ApiServer, startApiServer } from "../cluster/apiserver/index.js";

let api: ApiServer;
let custom: k8s.CustomObjectsApi;

beforeAll(async () => {
  api = await startApiServer();
  for (const f of crdFiles()) await api.installCrdFile(f);
  await api.applyYaml('{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"team"}}');
  custom = api.kubeConfig().makeApiClient(k8s.CustomObjectsApi);
});
afterAll(async () => api.close());

const rule = (name: string, spec: unknown) => ({
  apiVersion: "applygate.dev/v1alpha1",
  kind: "WatchRule",
  metadata: { name, namespace: "team" },
  spec,
});

async function create(body: Record<string, unknown>): Promise<number> {
  try {
    await custom.createNamespacedCustomObject({
      group: "applygate.dev",
      version: "v1alpha1",
      namespace: "team",
      plural: "watchrules",
      body,
    });
    return 201;
  } catch (err) {
    return (err as { code?: number }).code ?? 0;
  }
}

describe("WatchRule CRD", () => {
  const target = { name: "apps" };
  it("accepts kinds by group/version/kind and by resource, with a selector and excluded fields", async () => {
    const body = rule("ok", {
      targetRef: target,
      kinds: [
        { group: "", version: "v1", kind: "ConfigMap" },
        { group: "apps", version: "v1", resource: "deployments" },
      ],
      selector: { matchLabels: { app: "web" } },
      excludeFields: ["data.cache"],
      prune: { mode: "Always" },
    });
    expect(await create(body)).toBe(201);
    expect(watchRule.safeParse(body).success).toBe(true);
  });

  it("refuses a kind named both ways or neither, no kinds, and an unknown prune mode", async () => {
    const bad = [
      { targetRef: target, kinds: [{ group: "", version: "v1", kind: "ConfigMap", resource: "configmaps" }] },
      { targetRef: target, kinds: [{ group: "", version: "v1" }] },
      { targetRef: target, kinds: [] },
      {
        targetRef: target,
        kinds: [{ group: "", version: "v1", kind: "ConfigMap" }],
        prune: { mode: "Never" },
      },
    ];
    for (const [i, spec] of bad.entries()) {
      expect(await create(rule(`bad-${i}`, spec))).toBe(422);
      expect(watchRule.safeParse(rule(`bad-${i}`, spec)).success).toBe(false);
    }
  });

  it("refuses Secrets, by kind or by resource, naming why; a Secret kind of another group is taken", async () => {
    for (const [i, kind] of [
      { group: "", version: "v1", kind: "Secret" },
      { group: "", version: "v1", resource: "secrets" },
    ].entries()) {
      const body = rule(`secret-${i}`, {
        targetRef: target,
        kinds: [{ group: "", version: "v1", kind: "ConfigMap" }, kind],
      });
      expect(await create(body)).toBe(422);
      expect(watchRule.safeParse(body).success).toBe(false);
    }
    const err = await custom
      .createNamespacedCustomObject({
        group: "applygate.dev",
        version: "v1alpha1",
        namespace: "team",
        plural: "watchrules",
        body: rule("secret-why", {
          targetRef: target,
          kinds: [{ group: "", version: "v1", kind: "Secret" }],
        }),
      })
      .catch((e: { body?: unknown }) => String(e.body));
    expect(err).toContain("Secrets are never mirrored");
    const sealed = rule("sealed", {
      targetRef: target,
      kinds: [{ group: "bitnami.com", version: "v1alpha1", kind: "SealedSecret" }],
    });
    expect(await create(sealed)).toBe(201);
  });

  it("takes a status with conditions, resolved and unresolved kinds and the counts", () => {
    const parsed = watchRule.safeParse({
      ...rule("s", { targetRef: target, kinds: [{ group: "", version: "v1", kind: "ConfigMap" }] }),
      status: {
        conditions: [
          {
            type: "KindsResolved",
            status: "False",
            reason: "KindNotServed",
            message: "example.com/v1 Widget",
            lastTransitionTime: "2026-01-01T00:00:00Z",
          },
        ],
        resolvedKinds: [
          { group: "", version: "v1", kind: "ConfigMap", resource: "configmaps", namespaced: true },
        ],
        unresolvedKinds: ["example.com/v1 Widget"],
        mirrored: 3,
        refused: 1,
        excluded: 2,
      },
    });
    expect(parsed.success).toBe(true);
  });
});
