/**
 * Custom resources are validated against their CRD's OpenAPI v3 schema and CEL rules: the machine's
 * kubectl and the real client are refused with 422 Invalid naming the field, as on a cluster.
 */
import { execFile } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import * as k8s from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { crdFiles } from "../../../queue/crds/files.js";
import { KUBECTL_AVAILABLE } from "../../manifests/kustomize.js";
import { type ApiServer, startApiServer } from "./index.js";

const run = promisify(execFile);
const api = "applygate.dev/v1alpha1";

const status = (e: unknown) => {
  const body = (e as { body?: unknown }).body;
  return (typeof body === "string" ? JSON.parse(body) : body) as {
    code: number;
    reason: string;
    message: string;
    details: { causes: { field: string; message: string; reason: string }[] };
  };
};

describe("schema validation of custom resources", () => {
  let server: ApiServer;
  let dir: string;
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
    dir = await mkdtemp(join(tmpdir(), "applygate-validation-"));
    server = await startApiServer();
    for (const f of crdFiles()) await server.installCrdFile(f);
    await server.applyYaml("apiVersion: v1\nkind: Namespace\nmetadata: {name: team-a}\n");
    await server.writeKubeconfig(join(dir, "kubeconfig"));
    custom = server.kubeConfig().makeApiClient(k8s.CustomObjectsApi);
  });
  afterAll(async () => {
    await server.close();
    await rm(dir, { recursive: true, force: true });
  });

  it.skipIf(!KUBECTL_AVAILABLE)(
    "refuses kubectl apply of an invalid FluxClaim and GitTarget, naming the field",
    async () => {
      const apply = async (name: string, yaml: string) => {
        await writeFile(join(dir, name), yaml);
        return run("kubectl", ["--kubeconfig", join(dir, "kubeconfig"), "apply", "-f", join(dir, name)]).then(
          () => ({ code: 0, err: "" }),
          (e: { code?: number; stderr?: string }) => ({ code: e.code ?? 1, err: e.stderr ?? "" }),
        );
      };
      const claim = await apply(
        "claim.yaml",
        `apiVersion: ${api}\nkind: FluxClaim\nmetadata: {name: apps, namespace: team-a}\nspec:\n  kustomizationRef: {name: apps}\n`,
      );
      expect(claim.code).not.toBe(0);
      expect(claim.err).toContain(
        'The FluxClaim "apps" is invalid: spec.kustomizationRef.namespace: Required value',
      );
      const target = await apply(
        "target.yaml",
        `apiVersion: ${api}\nkind: GitTarget\nmetadata: {name: apps, namespace: team-a}\nspec:\n  providerRef: {name: p}\n  branch: main\n  path: apps\n  onRefusal: Revert\n`,
      );
      expect(target.code).not.toBe(0);
      expect(target.err).toContain(
        'The GitTarget "apps" is invalid: spec.onRefusal: Unsupported value: "Revert": supported values: "Ignore", "Reapply"',
      );
      const ok = await apply(
        "ok.yaml",
        `apiVersion: ${api}\nkind: FluxClaim\nmetadata: {name: apps, namespace: team-a}\nspec:\n  kustomizationRef: {name: apps, namespace: flux-system}\n`,
      );
      expect(ok).toEqual({ code: 0, err: "" });
    },
  );

  it("answers 422 Invalid with a cause per field: types, patterns, lengths, bounds", async () => {
    const err = status(
      await create("gittargets", {
        apiVersion: api,
        kind: "GitTarget",
        metadata: { name: "bad" },
        spec: {
          providerRef: { name: "Not_A_Name" },
          branch: "main",
          path: "apps",
          commitWindow: { idleSeconds: 0, maxSeconds: "60" },
        },
      }).catch((e) => e),
    );
    expect(err).toMatchObject({ code: 422, reason: "Invalid" });
    expect(err.message).toMatch(/^GitTarget\.applygate\.dev "bad" is invalid: \[/);
    const fields = err.details.causes.map((c) => `${c.field} ${c.reason}`);
    expect(fields).toEqual(
      expect.arrayContaining([
        "spec.providerRef.name FieldValueInvalid",
        "spec.commitWindow.idleSeconds FieldValueInvalid",
        "spec.commitWindow.maxSeconds FieldValueTypeInvalid",
      ]),
    );
    expect(err.details.causes.find((c) => c.field === "spec.commitWindow.idleSeconds")?.message).toBe(
      "Invalid value: 0: spec.commitWindow.idleSeconds in body should be greater than or equal to 1",
    );
  });

  const widgetCrd = (pattern: string) => ({
    apiVersion: "apiextensions.k8s.io/v1",
    kind: "CustomResourceDefinition",
    metadata: { name: "widgets.example.com" },
    spec: {
      group: "example.com",
      scope: "Namespaced",
      names: { plural: "widgets", singular: "widget", kind: "Widget", listKind: "WidgetList" },
      versions: [
        {
          name: "v1",
          served: true,
          storage: true,
          schema: {
            openAPIV3Schema: {
              type: "object",
              properties: {
                spec: { type: "object", properties: { size: { type: "string", pattern } } },
              },
            },
          },
        },
      ],
    },
  });

  it("refuses a CRD whose pattern Go's regexp cannot compile, as kube-apiserver does", async () => {
    const ext = server.kubeConfig().makeApiClient(k8s.ApiextensionsV1Api);
    const err = status(
      await ext.createCustomResourceDefinition({ body: widgetCrd("^(?=\\d)\\d+h$") }).catch((e) => e),
    );
    expect(err).toMatchObject({ code: 422, reason: "Invalid" });
    // Word for word what kube-apiserver v1.36 answered for the GitTarget CRD's lookahead.
    expect(err.message).toBe(
      'CustomResourceDefinition.apiextensions.k8s.io "widgets.example.com" is invalid: ' +
        "spec.validation.openAPIV3Schema.properties[spec].properties[size].pattern: " +
        'Invalid value: "^(?=\\\\d)\\\\d+h$": must be a valid regular expression, but isn\'t: ' +
        "error parsing regexp: invalid or unsupported Perl syntax: `(?=`",
    );
    await expect(ext.readCustomResourceDefinition({ name: "widgets.example.com" })).rejects.toMatchObject({
      code: 404,
    });
  });

  it("matches a pattern as RE2 does: `.` takes a carriage return, which a JavaScript RegExp's does not", async () => {
    const ext = server.kubeConfig().makeApiClient(k8s.ApiextensionsV1Api);
    await ext.createCustomResourceDefinition({ body: widgetCrd("^a.b$") });
    try {
      const widget = (size: string) =>
        custom.createNamespacedCustomObject({
          group: "example.com",
          version: "v1",
          namespace: "team-a",
          plural: "widgets",
          body: {
            apiVersion: "example.com/v1",
            kind: "Widget",
            metadata: { generateName: "w-" },
            spec: { size },
          },
        });
      await expect(widget("a\rb")).resolves.toMatchObject({ spec: { size: "a\rb" } });
      expect(status(await widget("a\nb").catch((e) => e))).toMatchObject({ code: 422 });
    } finally {
      await ext.deleteCustomResourceDefinition({ name: "widgets.example.com" });
    }
  });

  it("evaluates the CRDs' CEL rules, with defaults, and transition rules on update", async () => {
    const sha1 = status(
      await create("gitproviders", {
        apiVersion: api,
        kind: "GitProvider",
        metadata: { name: "p" },
        spec: {
          url: "https://git.example/r.git",
          type: "gitlab",
          allowSha1Signature: true,
          webhookSecretRef: { name: "h" },
        },
      }).catch((e) => e),
    );
    expect(sha1.details.causes).toEqual([
      {
        reason: "FieldValueInvalid",
        field: "spec.allowSha1Signature",
        message: 'Invalid value: "object": allowSha1Signature is only meaningful for type github or gitea',
      },
    ]);
    const window = status(
      await create("gittargets", {
        apiVersion: api,
        kind: "GitTarget",
        metadata: { name: "w" },
        // maxSeconds defaults to 60: an idle window longer than that is refused.
        spec: {
          providerRef: { name: "p" },
          branch: "main",
          path: "apps",
          commitWindow: { idleSeconds: 120 },
        },
      }).catch((e) => e),
    );
    expect(window.message).toBe(
      'GitTarget.applygate.dev "w" is invalid: spec.commitWindow.maxSeconds: Invalid value: "object": maxSeconds must be at least idleSeconds',
    );

    await create("gittargets", {
      apiVersion: api,
      kind: "GitTarget",
      metadata: { name: "t" },
      spec: { providerRef: { name: "p" }, branch: "main", path: "apps" },
    });
    const moved = status(
      await custom
        .patchNamespacedCustomObject(
          {
            group: "applygate.dev",
            version: "v1alpha1",
            namespace: "team-a",
            plural: "gittargets",
            name: "t",
            body: { spec: { branch: "release" } },
          },
          k8s.setHeaderOptions("Content-Type", k8s.PatchStrategy.MergePatch),
        )
        .catch((e) => e),
    );
    expect(moved.message).toBe(
      'GitTarget.applygate.dev "t" is invalid: spec.branch: Invalid value: "string": branch is immutable',
    );
  });
});
