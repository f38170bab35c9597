/**
 * Approval settings refused at admission: what the worker could not use is refused by the CRD
 * (the CEL rule) and by zod alike, on a claim, a GitTarget and the GitProvider whose commit-status
 * API the approvals are read from.
 */
import * as k8s from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ApiServer, startApiServer } from "../../test/cluster/apiserver/index.js";
import { crdFiles } from "./files.js";
import { gitProviderSpec } from "./git-provider.js";
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

const provider = (url: string, commitStatus?: Record<string, unknown>) => ({
  url,
  type: "gitea",
  webhookSecretRef: { name: "hook" },
  ...(commitStatus ? { commitStatus } : {}),
});

describe("a GitProvider's commitStatus", () => {
  it.each([
    ["https://git.example/team/apps.git", undefined, true],
    ["https://git.example/team/apps.git", {}, true],
    ["https://git.example/gitea/team/apps", { apiURL: "https://git.example/gitea/api/v1" }, true],
    ["http://127.0.0.1:3000/apps.git", undefined, true],
    ["http://127.0.0.1:3000/apps.git", { repository: "team/apps" }, true],
    ["http://127.0.0.1:3000/apps.git", {}, false],
    ["https://git.example/apps.git", { apiURL: "https://git.example/api/v1" }, false],
  ])("url %s, commitStatus %j: valid=%s", (url, commitStatus, valid) => {
    expect(gitProviderSpec.safeParse(provider(url, commitStatus)).success).toBe(valid);
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

  it("refuses a GitProvider's commitStatus that cannot tell the repository, naming the rule", async () => {
    const made = (name: string, url: string, commitStatus: Record<string, unknown>) =>
      create("gitproviders", "GitProvider", name, provider(url, commitStatus));
    const refused = await made("bare", "http://127.0.0.1:3000/apps.git", {
      apiURL: "http://127.0.0.1:3000/api/v1",
    });
    expect(refused.code).toBe(422);
    expect(refused.body).toContain("commitStatus needs repository");
    expect((await made("named", "http://127.0.0.1:3000/apps.git", { repository: "team/apps" })).code).toBe(
      201,
    );
    expect((await made("derived", "https://git.example/team/apps.git", {})).code).toBe(201);
  });

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
