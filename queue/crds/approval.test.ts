/**
 * Approval settings refused at admission: what the worker could not use is refused by the CRD
 * (the CEL rule) and by zod alike, on a claim and on a GitTarget.
 */
import * as k8s from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ApiServer, startApiServer } from "../../test/cluster/apiserver/index.js";
import { crdFiles } from "./files.js";
import { approval } from "./governance.js";

const signature = (extra: Record<string, unknown>) => ({
  signature: { secretRef: { name: "keys" }, ...extra },
});

describe("approval.signature", () => {
  it.each([
    [{}, true],
    [{ mode: "Tag", tagPattern: "v*" }, true],
    [{ mode: "TagAndHEAD", tagPattern: "v*" }, true],
    [{ mode: "Tag" }, true],
    [{ mode: "HEAD", tagPattern: "v*" }, false],
    [{ tagPattern: "v*" }, false],
  ])("%j valid=%s", (extra, valid) => {
    expect(approval.safeParse(signature(extra)).success).toBe(valid);
  });
});

describe("approval on the API server", () => {
  let server: ApiServer;
  let custom: k8s.CustomObjectsApi;
  const create = (plural: string, kind: string, name: string, spec: Record<string, unknown>) =>
    custom
      .createNamespacedCustomObject({
        group: "applygate.dev",
        version: "v1alpha1",
        namespace: "team-a",
        plural,
        body: { apiVersion: "applygate.dev/v1alpha1", kind, metadata: { name, namespace: "team-a" }, spec },
      })
      .then(
        () => ({ code: 201, body: "" }),
        (e: { code?: number; body?: unknown }) => ({ code: e.code, body: String(e.body) }),
      );
  const claim = (name: string, extra: Record<string, unknown>) =>
    create("fluxclaims", "FluxClaim", name, {
      kustomizationRef: { name: "apps", namespace: "team-a" },
      approval: signature(extra),
    });
  const target = (name: string, extra: Record<string, unknown>) =>
    create("gittargets", "GitTarget", name, {
      providerRef: { name: "r" },
      branch: "main",
      path: `apps/${name}`,
      approval: signature(extra),
    });

  beforeAll(async () => {
    server = await startApiServer();
    for (const f of crdFiles()) await server.installCrdFile(f);
    await server.applyYaml("apiVersion: v1\nkind: Namespace\nmetadata: {name: team-a}\n");
    custom = server.kubeConfig().makeApiClient(k8s.CustomObjectsApi);
  });
  afterAll(() => server.close());

  it("refuses a tag pattern the mode would ignore, naming the rule, on a claim and on a GitTarget", async () => {
    for (const make of [claim, target]) {
      const refused = await make("headpattern", { mode: "HEAD", tagPattern: "v*" });
      expect(refused.code).toBe(422);
      expect(refused.body).toContain("tagPattern is read only in modes Tag and TagAndHEAD");
      expect((await make("nomode", { tagPattern: "v*" })).code).toBe(422);
      expect((await make("tagged", { mode: "Tag", tagPattern: "v*" })).code).toBe(201);
    }
  });
});
