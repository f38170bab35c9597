/**
 * The CRD schema (what the API server enforces) and the zod schema (what the code parses with)
 * accept and refuse the same objects. Rules that only CEL can check on the server (transition
 * rules) or only zod checks here are listed apart.
 */
import { describe, expect, it } from "vitest";
import type { ZodTypeAny } from "zod";
import { argoCDClaim, fluxClaim, gitProvider, gitTarget } from "../../queue/crds/index.js";
import { crdValidators } from "./validators.js";

const now = "2026-03-04T05:06:07Z";
const meta = { name: "x", namespace: "team-a" };
const api = "applygate.dev/v1alpha1";
const condition = {
  type: "Ready",
  status: "True",
  reason: "Published",
  message: "",
  lastTransitionTime: now,
};

const provider = {
  apiVersion: api,
  kind: "GitProvider",
  metadata: meta,
  spec: { url: "https://git.example/r.git", type: "github", webhookSecretRef: { name: "hook" } },
};
const target = {
  apiVersion: api,
  kind: "GitTarget",
  metadata: meta,
  spec: { providerRef: { name: "p" }, branch: "main", path: "apps" },
};
const flux = {
  apiVersion: api,
  kind: "FluxClaim",
  metadata: meta,
  spec: { kustomizationRef: { name: "apps", namespace: "flux-system" } },
};
const argo = {
  apiVersion: api,
  kind: "ArgoCDClaim",
  metadata: meta,
  spec: { applicationRef: { name: "apps", namespace: "argocd" } },
};

function withSpec<T extends { spec: object }>(o: T, spec: object): T {
  return { ...o, spec: { ...o.spec, ...spec } };
}

const cases: [string, unknown, boolean][] = [
  ["provider", provider, true],
  ["provider gitlab", withSpec(provider, { type: "gitlab" }), true],
  ["provider unknown type", withSpec(provider, { type: "svn" }), false],
  ["provider ssh url", withSpec(provider, { url: "git@host:r.git" }), false],
  ["provider access from all", withSpec(provider, { accessFrom: { namespaces: ["*", "team-b"] } }), true],
  [
    "provider access from bad namespace",
    withSpec(provider, { accessFrom: { namespaces: ["Team_B"] } }),
    false,
  ],
  ["provider status", { ...provider, status: { conditions: [condition], webhookPath: "/hook/ab" } }, true],
  [
    "provider condition bad status",
    { ...provider, status: { conditions: [{ ...condition, status: "Yes" }] } },
    false,
  ],
  [
    "provider condition bad time",
    { ...provider, status: { conditions: [{ ...condition, lastTransitionTime: "now" }] } },
    false,
  ],
  ["target", target, true],
  ["target root", withSpec(target, { path: "." }), true],
  ["target dotdot", withSpec(target, { path: "a/../b" }), false],
  ["target no branch", { ...target, spec: { providerRef: { name: "p" }, path: "a" } }, false],
  ["target claim", withSpec(target, { claimRef: { kind: "ArgoCDClaim", name: "c", namespace: "n" } }), true],
  ["target claim webhook", withSpec(target, { claimRef: { kind: "WebhookClaim", name: "c" } }), true],
  ["target claim bad kind", withSpec(target, { claimRef: { kind: "HelmClaim", name: "c" } }), false],
  ["target refusal", withSpec(target, { onRefusal: "Reapply" }), true],
  ["target refusal bad", withSpec(target, { onRefusal: "Retry" }), false],
  ["target window", withSpec(target, { commitWindow: { idleSeconds: 2 } }), true],
  ["target window zero", withSpec(target, { commitWindow: { idleSeconds: 0 } }), false],
  ["target window fraction", withSpec(target, { commitWindow: { idleSeconds: 1.5 } }), false],
  [
    "target publication",
    { ...target, status: { publication: { state: "Retrying", intakePaused: false, retainedBytes: 10 } } },
    true,
  ],
  ["target publication no pause flag", { ...target, status: { publication: { state: "Published" } } }, false],
  ["flux", flux, true],
  ["flux no namespace", { ...flux, spec: { kustomizationRef: { name: "apps" } } }, false],
  [
    "flux operation",
    {
      ...flux,
      status: {
        previousSuspendState: "Suspended",
        operation: {
          token: "t",
          phase: "Unresolved",
          commit: "c",
          targets: [{ uid: "u", reason: "Repair" }],
          requestedAt: now,
        },
      },
    },
    true,
  ],
  [
    "flux operation bad phase",
    {
      ...flux,
      status: { operation: { token: "t", phase: "Done", commit: "c", targets: [], requestedAt: now } },
    },
    false,
  ],
  ["flux argo previous state", { ...flux, status: { previousSuspendState: "AutomatedOn" } }, false],
  ["argo", argo, true],
  [
    "argo previous state",
    { ...argo, status: { previousSuspendState: "NoAutomated", repairPending: true } },
    true,
  ],
  [
    "argo target reason",
    {
      ...argo,
      status: {
        operation: {
          token: "t",
          phase: "Requested",
          commit: "c",
          targets: [{ uid: "u", reason: "Because" }],
          requestedAt: now,
        },
      },
    },
    false,
  ],
];

/** Refused by zod here and by CEL on the API server; the OpenAPI part alone accepts them. */
const celOnly: [string, unknown][] = [
  ["SHA-1 for gitlab", withSpec(provider, { type: "gitlab", allowSha1Signature: true })],
  ["window max below idle", withSpec(target, { commitWindow: { idleSeconds: 30, maxSeconds: 10 } })],
];

const zodFor: Record<string, ZodTypeAny> = {
  GitProvider: gitProvider,
  GitTarget: gitTarget,
  FluxClaim: fluxClaim,
  ArgoCDClaim: argoCDClaim,
};
const validators = crdValidators();
const openapi = (o: any) => validators.get(`${api}/${o.kind}`)!.validate(structuredClone(o)) as boolean;

describe("CRD schema ↔ zod schema", () => {
  it.each(cases)("%s: both say valid=%s", (_name, object, valid) => {
    const o = object as { kind: string };
    expect(zodFor[o.kind]!.safeParse(o).success, "zod").toBe(valid);
    expect(openapi(o), "CRD schema").toBe(valid);
  });

  it.each(celOnly)(
    "%s: zod refuses, the CRD carries the CEL rule that refuses it on the server",
    (_name, object) => {
      const o = object as { kind: string };
      expect(zodFor[o.kind]!.safeParse(o).success).toBe(false);
      expect(openapi(o)).toBe(true);
    },
  );

  it("fill the same defaults", () => {
    const copy = structuredClone(withSpec(target, { commitWindow: {} })) as any;
    validators.get(`${api}/GitTarget`)!.validate(copy);
    const parsed = gitTarget.parse(target);
    expect(copy.spec.onRefusal).toBe(parsed.spec.onRefusal);
    expect(copy.spec.commitWindow).toEqual({ idleSeconds: 5, maxSeconds: 60 });
  });
});
