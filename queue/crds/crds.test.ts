import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { RE2JS } from "re2js";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import { renderCrdFiles } from "./crd.js";
import { CHART_CRD_DIR, CRD_DIR, CRD_DIRS, crdFiles, crdObjects } from "./files.js";
import {
  argoCDClaim,
  fluxClaim,
  gitProvider,
  gitProviderSpec,
  gitTarget,
  gitTargetSpec,
  KINDS,
  TARGET_PATH_PATTERN,
} from "./index.js";
import { toStructuralSchema } from "./openapi.js";

describe("committed CRD YAML", () => {
  it("equals what `npm run gen:crds` writes from the zod schemas, in the kustomize base and the Helm chart alike", () => {
    const expected = renderCrdFiles();
    expect(CRD_DIRS).toEqual([CRD_DIR, CHART_CRD_DIR]);
    for (const dir of CRD_DIRS) {
      expect(readdirSync(dir).sort(), dir).toEqual([...expected.keys()].sort());
      for (const [name, text] of expected) {
        expect(readFileSync(join(dir, name), "utf8"), `${dir}/${name} is stale: run npm run gen:crds`).toBe(
          text,
        );
      }
    }
  });

  it("writes only patterns the API server compiles: RE2 syntax, as Go's regexp reads it", () => {
    // kube-apiserver refuses a whole CRD over one pattern Go cannot compile (a lookahead was one).
    const patterns: string[] = [];
    const walk = (node: unknown): void => {
      if (Array.isArray(node)) node.forEach(walk);
      else if (node && typeof node === "object")
        for (const [k, v] of Object.entries(node)) {
          if (k === "pattern" && typeof v === "string") patterns.push(v);
          else walk(v);
        }
    };
    walk(crdObjects());
    expect(patterns.length).toBeGreaterThan(5);
    const refused = patterns.filter((p) => {
      try {
        RE2JS.compile(p);
        return false;
      } catch {
        return true;
      }
    });
    expect(refused).toEqual([]);
  });

  it("crdFiles() names one CustomResourceDefinition per kind, in manifests/", () => {
    const files = crdFiles();
    expect(files).toHaveLength(KINDS.length);
    for (const f of files) expect(f).toMatch(/\/manifests\/base\/crds\/applygate\.dev_[a-z]+\.yaml$/);
    const crds = crdObjects() as { kind: string; spec: { names: { kind: string; categories: string[] } } }[];
    expect(crds.map((c) => c.spec.names.kind)).toEqual([
      "GitProvider",
      "GitTarget",
      "FluxClaim",
      "ArgoCDClaim",
      "WebhookClaim",
      "ApplierGrant",
      "ScopeGrant",
      "WatchRule",
      "Approval",
    ]);
    // Only a cluster administrator can make a ScopeGrant: it is cluster-scoped. A WatchRule is a
    // namespace's own, and reaches no further than its GitTarget's scope.
    const scopes = crds.map((c) => (c.spec as unknown as { scope: string }).scope);
    expect(scopes).toEqual([
      "Namespaced",
      "Namespaced",
      "Namespaced",
      "Namespaced",
      "Namespaced",
      "Namespaced",
      "Cluster",
      "Namespaced",
      "Namespaced",
    ]);
    for (const c of crds) {
      expect(c.kind).toBe("CustomResourceDefinition");
      expect(c.spec.names.categories).toEqual(["applygate"]);
    }
  });

  it("keeps only CRDs in manifests/base/crds/, each listed by the base kustomization", () => {
    // `kubectl apply -f manifests/base/crds/` applies every file there.
    for (const file of readdirSync(CRD_DIR)) {
      expect((parse(readFileSync(join(CRD_DIR, file), "utf8")) as { kind: string }).kind, file).toBe(
        "CustomResourceDefinition",
      );
    }
    const base = parse(readFileSync(join(CRD_DIR, "../kustomization.yaml"), "utf8")) as {
      resources: string[];
    };
    const listed = base.resources.filter((r) => r.startsWith("crds/")).map((r) => r.slice("crds/".length));
    expect(listed.sort()).toEqual(readdirSync(CRD_DIR).sort());
  });

  it("is structural: every node has a type and nothing uses $ref", () => {
    const visit = (node: Record<string, unknown>, where: string) => {
      expect(node.type, `${where} has no type`).toBeTypeOf("string");
      expect(node).not.toHaveProperty("$ref");
      for (const [k, child] of Object.entries(
        (node.properties ?? {}) as Record<string, Record<string, unknown>>,
      ))
        visit(child, `${where}.${k}`);
      if (node.items) visit(node.items as Record<string, unknown>, `${where}[]`);
      if (node.additionalProperties)
        visit(node.additionalProperties as Record<string, unknown>, `${where}{}`);
      for (const alt of (node.anyOf ?? []) as Record<string, unknown>[]) {
        expect(alt, `${where} anyOf carries a type`).not.toHaveProperty("type");
      }
    };
    for (const file of crdFiles()) {
      const crd = parse(readFileSync(file, "utf8"));
      visit(crd.spec.versions[0].schema.openAPIV3Schema, file);
    }
  });

  it("marks the references that must never change as immutable with a CEL transition rule", () => {
    const rules = (spec: Record<string, any>, field: string) =>
      (spec.properties[field]["x-kubernetes-validations"] ?? []).map((v: { rule: string }) => v.rule);
    const gt = toStructuralSchema(gitTargetSpec);
    for (const f of ["providerRef", "branch", "path"]) expect(rules(gt, f)).toContain("self == oldSelf");
    expect(rules(gt, "claimRef")).toEqual([]);
    // A WebhookClaim holds no applier object (its endpoint is its own spec): no reference to pin.
    for (const info of KINDS.filter((k) => k.kind.endsWith("Claim") && k.kind !== "WebhookClaim")) {
      const spec = toStructuralSchema(info.spec) as Record<string, any>;
      const ref = info.kind === "FluxClaim" ? "kustomizationRef" : "applicationRef";
      expect(rules(spec, ref)).toEqual(["self == oldSelf"]);
      expect(spec.required).toEqual([ref]);
    }
  });
});

describe("zod schemas", () => {
  const meta = { name: "apps", namespace: "team-a" };
  const now = "2026-01-02T03:04:05Z";

  it("fill the documented defaults", () => {
    const spec = gitTargetSpec.parse({
      providerRef: { name: "repo" },
      branch: "main",
      path: "clusters/prod",
      commitWindow: {},
    });
    expect(spec.onRefusal).toBe("Ignore");
    expect(spec.commitWindow).toEqual({ idleSeconds: 5, maxSeconds: 60 });
    const gp = gitProviderSpec.parse({
      url: "https://git.example/acme/apps.git",
      type: "github",
      webhookSecretRef: { name: "hook" },
    });
    expect(gp.allowSha1Signature).toBe(false);
  });

  it.each([
    ["clusters/prod", true],
    ["apps", true],
    [".", true],
    [".github/x", true],
    ["..hidden/x", true],
    ["/abs", false],
    ["a/../b", false],
    ["..", false],
    ["a/./b", false],
    ["a//b", false],
    ["a/", false],
    ["", false],
  ])("path %j valid=%s", (path, valid) => {
    expect(TARGET_PATH_PATTERN.test(path)).toBe(valid);
    expect(gitTargetSpec.safeParse({ providerRef: { name: "r" }, branch: "main", path }).success).toBe(valid);
  });

  it("refuse SHA-1 signatures for hosts that never send them", () => {
    const base = { url: "https://h/r.git", webhookSecretRef: { name: "s" }, allowSha1Signature: true };
    expect(gitProviderSpec.safeParse({ ...base, type: "gitea" }).success).toBe(true);
    expect(gitProviderSpec.safeParse({ ...base, type: "gitlab" }).success).toBe(false);
  });

  it("refuse a commit window whose maximum is shorter than its idle time", () => {
    const base = { providerRef: { name: "r" }, branch: "main", path: "a" };
    expect(
      gitTargetSpec.safeParse({ ...base, commitWindow: { idleSeconds: 10, maxSeconds: 5 } }).success,
    ).toBe(false);
  });

  it("parse complete objects of every kind, status included", () => {
    const condition = {
      type: "Ready",
      status: "True",
      reason: "Applied",
      message: "",
      lastTransitionTime: now,
    };
    const operation = {
      token: "op-1",
      phase: "Settling",
      commit: "0123abc",
      targets: [{ uid: "u-1", reason: "ForeignCommit" }],
      requestedAt: now,
    };
    expect(
      gitProvider.parse({
        apiVersion: "applygate.dev/v1alpha1",
        kind: "GitProvider",
        metadata: meta,
        spec: { url: "https://h/r.git", type: "gitlab", webhookSecretRef: { name: "s" } },
        status: { conditions: [condition], webhookPath: "/hook/ab", observedGeneration: 1 },
      }).status?.webhookPath,
    ).toBe("/hook/ab");
    expect(
      gitTarget.parse({
        apiVersion: "applygate.dev/v1alpha1",
        kind: "GitTarget",
        metadata: meta,
        spec: {
          providerRef: { name: "r" },
          branch: "main",
          path: "a",
          claimRef: { kind: "FluxClaim", name: "c" },
        },
        status: {
          publication: { state: "Retrying", retryingSince: now, intakePaused: true, retainedWrites: 3 },
        },
      }).status?.publication?.intakePaused,
    ).toBe(true);
    const claimStatus = { conditions: [condition], operation, lastAppliedCommit: "0123abc" };
    expect(
      fluxClaim.parse({
        apiVersion: "applygate.dev/v1alpha1",
        kind: "FluxClaim",
        metadata: meta,
        spec: { kustomizationRef: { name: "apps", namespace: "flux-system" } },
        status: { ...claimStatus, previousSuspendState: "Resumed" },
      }).status?.operation?.phase,
    ).toBe("Settling");
    const argo = {
      apiVersion: "applygate.dev/v1alpha1",
      kind: "ArgoCDClaim",
      metadata: meta,
      spec: { applicationRef: { name: "apps", namespace: "argocd" }, accessFrom: { namespaces: ["*"] } },
      status: { ...claimStatus, previousSuspendState: "NoAutomated" },
    };
    expect(argoCDClaim.safeParse(argo).success).toBe(true);
    // A Flux-only previous state is not an Argo CD one.
    expect(argoCDClaim.safeParse({ ...argo, status: { previousSuspendState: "Suspended" } }).success).toBe(
      false,
    );
  });
});
