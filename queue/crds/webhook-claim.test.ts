import * as k8s from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ApiServer, startApiServer } from "../../test/cluster/apiserver/index.js";
import { crdFiles } from "./files.js";
import { CLAIM_KINDS, gitTarget, webhookClaim, webhookClaimSpec } from "./index.js";

const meta = { name: "deployer", namespace: "team-a" };
const claim = (spec: Record<string, unknown>) => ({
  apiVersion: "applygate.dev/v1alpha1",
  kind: "WebhookClaim",
  metadata: meta,
  spec: { url: "https://deploy.example.com/hook", secretRef: { name: "hook-key" }, ...spec },
});

describe("WebhookClaim schema", () => {
  it("defaults the signature, timeout, completion mode and the Secret key", () => {
    const spec = webhookClaim.parse(claim({})).spec;
    expect(spec).toMatchObject({
      signature: "generic-hmac",
      timeoutSeconds: 30,
      completion: { mode: "response", budgetSeconds: 300 },
      secretRef: { name: "hook-key", key: "hmacKey" },
    });
  });

  it("requires https unless insecure is true", () => {
    expect(webhookClaimSpec.safeParse({ url: "http://h/x", secretRef: { name: "s" } }).success).toBe(false);
    expect(
      webhookClaimSpec.safeParse({ url: "http://h/x", secretRef: { name: "s" }, insecure: true }).success,
    ).toBe(true);
    expect(
      webhookClaimSpec.safeParse({ url: "ftp://h/x", secretRef: { name: "s" }, insecure: true }).success,
    ).toBe(false);
  });

  it("takes only the two signature styles and the two completion modes", () => {
    expect(webhookClaim.safeParse(claim({ signature: "gitlab" })).success).toBe(false);
    expect(webhookClaim.safeParse(claim({ completion: { mode: "poll" } })).success).toBe(false);
    expect(
      webhookClaim.safeParse(claim({ signature: "github", completion: { mode: "callback" } })).success,
    ).toBe(true);
  });

  it("is a claim kind a GitTarget may name", () => {
    expect(CLAIM_KINDS).toContain("WebhookClaim");
    const t = gitTarget.safeParse({
      apiVersion: "applygate.dev/v1alpha1",
      kind: "GitTarget",
      metadata: meta,
      spec: {
        providerRef: { name: "r" },
        branch: "main",
        path: "apps/webhook",
        claimRef: { kind: "WebhookClaim", name: "deployer" },
      },
    });
    expect(t.success).toBe(true);
  });
});

describe("WebhookClaim on the API server", () => {
  let server: ApiServer;
  let custom: k8s.CustomObjectsApi;
  const create = (plural: string, body: object) =>
    custom.createNamespacedCustomObject({
      group: "applygate.dev",
      version: "v1alpha1",
      namespace: "team-a",
      plural,
      body,
    });

  beforeAll(async () => {
    server = await startApiServer();
    for (const f of crdFiles()) await server.installCrdFile(f);
    await server.applyYaml("apiVersion: v1\nkind: Namespace\nmetadata: {name: team-a}\n");
    custom = server.kubeConfig().makeApiClient(k8s.CustomObjectsApi);
  });
  afterAll(() => server.close());

  it("refuses a plain http URL without insecure, naming the rule, and takes it with insecure", async () => {
    const err = await create("webhookclaims", claim({ url: "http://deploy.example.com/hook" })).catch(
      (e) => e,
    );
    expect((err as { code?: number }).code).toBe(422);
    expect(String((err as { body?: unknown }).body)).toContain("url must be https unless insecure is true");
    await create("webhookclaims", { ...claim({ url: "http://deploy.example.com/hook", insecure: true }) });
  });

  it("accepts a GitTarget naming a WebhookClaim (the CRD's claimRef enum)", async () => {
    await create("gittargets", {
      apiVersion: "applygate.dev/v1alpha1",
      kind: "GitTarget",
      metadata: { name: "web", namespace: "team-a" },
      spec: {
        providerRef: { name: "r" },
        branch: "main",
        path: "apps/webhook",
        claimRef: { kind: "WebhookClaim", name: "deployer" },
      },
    });
  });
});
