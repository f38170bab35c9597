/**
 * Admission in the simulated API server, through the real client and real RBAC identities: the
 * shipped Approval policy (who approved is the requester), RBAC's refusal of escalation (a
 * namespace admin cannot make themselves an approver), and ValidatingAdmissionPolicy's matching,
 * conditions, variables, messages and failure policy.
 */
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import * as k8s from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { crdFiles } from "../../../queue/crds/files.js";
import { REPO_ROOT } from "../../manifests/kustomize.js";
import { type ApiServer, startApiServer } from "./index.js";

const NS = "prod";
const SHA = "4b1c".repeat(10);
const MERGE = k8s.setHeaderOptions("Content-Type", k8s.PatchStrategy.MergePatch);

const failure = async (p: Promise<unknown>) => {
  const e = await p.then(
    () => undefined,
    (err: unknown) => err,
  );
  if (!e) throw new Error("the request was admitted");
  const body = (e as { body?: unknown }).body;
  return (typeof body === "string" ? JSON.parse(body) : body) as {
    code: number;
    reason: string;
    message: string;
  };
};

const approvals = { group: "applygate.dev", version: "v1alpha1", plural: "approvals", namespace: NS };
const approvalOf = (name: string, approver: string, extra: Record<string, unknown> = {}) => ({
  apiVersion: "applygate.dev/v1alpha1",
  kind: "Approval",
  metadata: { name },
  spec: { claimRef: { kind: "FluxClaim", name: "shop" }, approver, commit: SHA, ...extra },
});

const binding = (name: string, user: string, clusterRole: string) => `
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: { name: ${name}, namespace: ${NS} }
roleRef: { apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: ${clusterRole} }
subjects: [{ apiGroup: rbac.authorization.k8s.io, kind: User, name: ${user} }]
`;

describe("who may approve, in the simulated API server", () => {
  let server: ApiServer;
  const as = (user: string) => server.kubeConfig(user).makeApiClient(k8s.CustomObjectsApi);

  beforeAll(async () => {
    server = await startApiServer();
    for (const f of crdFiles()) await server.installCrdFile(f);
    // The shipped roles and the shipped policy, as deployed.
    await server.applyYaml(readFileSync(resolve(REPO_ROOT, "manifests/base/rbac.yaml"), "utf8"));
    await server.applyYaml(readFileSync(resolve(REPO_ROOT, "manifests/base/approval-policy.yaml"), "utf8"));
    await server.applyYaml(`apiVersion: v1\nkind: Namespace\nmetadata: {name: ${NS}}\n`);
    await server.applyYaml(
      `apiVersion: applygate.dev/v1alpha1\nkind: FluxClaim\nmetadata: {name: shop, namespace: ${NS}}\nspec: {kustomizationRef: {name: shop, namespace: ${NS}}, approval: {manual: true}}\n`,
    );
    for (const [user, role] of [
      ["eve", "edit"],
      ["ada", "applygate-approver"],
      ["grace", "applygate-approver"],
      ["pat", "admin"],
    ] as const) {
      server.addUser(user, `${user}-token`, "rbac");
      await server.applyYaml(binding(`${user}-${role}`, user, role));
    }
  });
  afterAll(async () => server?.close());

  it("an editor of the namespace cannot approve; the claim she may edit approves nothing by itself", async () => {
    const refused = await failure(
      as("eve").createNamespacedCustomObject({ ...approvals, body: approvalOf("by-eve", "eve") }),
    );
    expect(refused.code).toBe(403);
    expect(refused.message).toContain('User "eve" cannot create resource "approvals"');
    // What edit lets her do: annotate the claim (which the worker does not read as an approval).
    await as("eve").patchNamespacedCustomObject(
      {
        group: "applygate.dev",
        version: "v1alpha1",
        plural: "fluxclaims",
        namespace: NS,
        name: "shop",
        body: { metadata: { annotations: { [`approve.applygate.dev/${SHA}`]: "eve" } } },
      },
      MERGE,
    );
  });

  it("an approver approves in her own name only: the API server says who approved", async () => {
    const made = (await as("ada").createNamespacedCustomObject({
      ...approvals,
      body: approvalOf("by-ada", "ada", { note: "CAB-7" }),
    })) as { spec: { approver: string } };
    expect(made.spec.approver).toBe("ada");
    const impersonated = await failure(
      as("ada").createNamespacedCustomObject({ ...approvals, body: approvalOf("as-grace", "grace") }),
    );
    expect(impersonated).toMatchObject({
      code: 403,
      reason: "Forbidden",
      message:
        "ValidatingAdmissionPolicy 'applygate-approver-identity' with binding 'applygate-approver-identity' denied request: spec.approver must be your own username: ada",
    });
  });

  it("an Approval's spec never changes, and no other approver may update it", async () => {
    // applygate-approver grants no update; a role that lets approvers label Approvals shows what
    // the policy and the schema refuse all the same.
    await server.applyYaml(`
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: { name: approval-labeller, namespace: ${NS} }
rules: [{ apiGroups: [applygate.dev], resources: [approvals], verbs: [patch] }]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: { name: approval-labeller, namespace: ${NS} }
roleRef: { apiGroup: rbac.authorization.k8s.io, kind: Role, name: approval-labeller }
subjects:
  - { apiGroup: rbac.authorization.k8s.io, kind: User, name: ada }
  - { apiGroup: rbac.authorization.k8s.io, kind: User, name: grace }
`);
    await as("ada").createNamespacedCustomObject({ ...approvals, body: approvalOf("fixed", "ada") });
    const changed = await failure(
      as("ada").patchNamespacedCustomObject(
        { ...approvals, name: "fixed", body: { spec: { commit: "f".repeat(40) } } },
        MERGE,
      ),
    );
    expect(changed.code).toBe(422);
    expect(changed.message).toContain("an Approval's spec is immutable");
    const taken = await failure(
      as("grace").patchNamespacedCustomObject(
        { ...approvals, name: "fixed", body: { metadata: { labels: { by: "grace" } } } },
        MERGE,
      ),
    );
    expect(taken.code).toBe(403);
    await as("ada").patchNamespacedCustomObject(
      { ...approvals, name: "fixed", body: { metadata: { labels: { ticket: "cab-7" } } } },
      MERGE,
    );
    // Withdrawn by deleting it; an editor cannot withdraw it either.
    expect(
      (await failure(as("eve").deleteNamespacedCustomObject({ ...approvals, name: "fixed" }))).code,
    ).toBe(403);
    await as("ada").deleteNamespacedCustomObject({ ...approvals, name: "fixed" });
  });

  it("names a commit or an override, never both or neither", async () => {
    const both = await failure(
      as("ada").createNamespacedCustomObject({
        ...approvals,
        body: approvalOf("both", "ada", { changeWindowOverride: "INC-1" }),
      }),
    );
    expect(both.code).toBe(422);
    expect(both.message).toContain("an Approval names either a commit or a changeWindowOverride");
  });

  it("a namespace admin cannot make anyone an approver (RBAC refuses the escalation), and binds what they hold", async () => {
    const rbac = server.kubeConfig("pat").makeApiClient(k8s.RbacAuthorizationV1Api);
    const body = (name: string, role: string): k8s.V1RoleBinding => ({
      metadata: { name },
      roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: role },
      subjects: [{ apiGroup: "rbac.authorization.k8s.io", kind: "User", name: "pat" }],
    });
    const escalation = await failure(
      rbac.createNamespacedRoleBinding({ namespace: NS, body: body("pat-approves", "applygate-approver") }),
    );
    expect(escalation.code).toBe(403);
    expect(escalation.message).toContain("is attempting to grant RBAC permissions not currently held");
    // Nor by a Role of their own that grants it.
    const role = await failure(
      rbac.createNamespacedRole({
        namespace: NS,
        body: {
          metadata: { name: "approve" },
          rules: [{ apiGroups: ["applygate.dev"], resources: ["approvals"], verbs: ["create"] }],
        },
      }),
    );
    expect(role.code).toBe(403);
    // What admin holds, admin may bind.
    await rbac.createNamespacedRoleBinding({ namespace: NS, body: body("pat-edits", "edit") });
  });
});

describe("ValidatingAdmissionPolicy evaluation", () => {
  let server: ApiServer;
  const core = () => server.kubeConfig().makeApiClient(k8s.CoreV1Api);
  const cm = (name: string, labels?: Record<string, string>): k8s.V1ConfigMap => ({
    metadata: { name, ...(labels ? { labels } : {}) },
  });
  const policy = (name: string, spec: string) => `
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: { name: ${name} }
spec:
${spec}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: { name: ${name} }
spec:
  policyName: ${name}
  validationActions: [Deny]
  matchResources:
    namespaceSelector: { matchLabels: { guarded: "yes" } }
`;

  beforeAll(async () => {
    server = await startApiServer();
    await server.applyYaml(
      `apiVersion: v1\nkind: Namespace\nmetadata: {name: guarded, labels: {guarded: "yes"}}\n---\napiVersion: v1\nkind: Namespace\nmetadata: {name: open}\n`,
    );
    server.addUser("robot", "robot-token", [{ verbs: ["*"], groups: [""], resources: ["configmaps"] }]);
    await server.applyYaml(
      policy(
        "owner-label",
        `  matchConstraints:
    resourceRules: [{ apiGroups: [""], apiVersions: ["v1"], operations: ["CREATE", "UPDATE"], resources: ["configmaps"] }]
  matchConditions:
    - name: not-the-robot
      expression: "request.userInfo.username != 'robot'"
  variables:
    - name: labels
      expression: "has(object.metadata.labels) ? object.metadata.labels : {}"
  validations:
    - expression: "'owner' in variables.labels"
    - expression: "variables.labels['owner'].startsWith('team-')"
      messageExpression: "'owner ' + variables.labels['owner'] + ' is not a team'"
      reason: Forbidden`,
      ),
    );
    await server.applyYaml(
      policy(
        "broken",
        `  failurePolicy: Ignore
  matchConstraints:
    resourceRules: [{ apiGroups: [""], apiVersions: ["v1"], operations: ["CREATE"], resources: ["configmaps"] }]
  validations:
    - expression: "object.spec.missing == 1"`,
      ),
    );
  });
  afterAll(async () => server?.close());

  it("denies what a validation refuses, in the API server's words, with the default reason or the one given", async () => {
    const unowned = await failure(core().createNamespacedConfigMap({ namespace: "guarded", body: cm("a") }));
    expect(unowned).toMatchObject({
      code: 422,
      reason: "Invalid",
      message:
        "ValidatingAdmissionPolicy 'owner-label' with binding 'owner-label' denied request: failed expression: 'owner' in variables.labels",
    });
    const stranger = await failure(
      core().createNamespacedConfigMap({ namespace: "guarded", body: cm("b", { owner: "eve" }) }),
    );
    expect(stranger).toMatchObject({ code: 403, reason: "Forbidden" });
    expect(stranger.message).toContain("denied request: owner eve is not a team");
    await core().createNamespacedConfigMap({ namespace: "guarded", body: cm("c", { owner: "team-a" }) });
    // An update is judged too.
    const relabelled = await failure(
      core().patchNamespacedConfigMap(
        { namespace: "guarded", name: "c", body: { metadata: { labels: { owner: "nobody" } } } },
        MERGE,
      ),
    );
    expect(relabelled.code).toBe(403);
  });

  it("admits what its binding's selector, its match conditions or its failure policy leave out", async () => {
    await core().createNamespacedConfigMap({ namespace: "open", body: cm("a") });
    const robot = server.kubeConfig("robot").makeApiClient(k8s.CoreV1Api);
    await robot.createNamespacedConfigMap({ namespace: "guarded", body: cm("by-robot") });
    // Deletes are not matched by these rules.
    await core().deleteNamespacedConfigMap({ namespace: "guarded", name: "c" });
  });

  it("a failing expression denies under failurePolicy Fail", async () => {
    await server.applyYaml(
      policy(
        "strict",
        `  failurePolicy: Fail
  matchConstraints:
    resourceRules: [{ apiGroups: [""], apiVersions: ["*"], operations: ["*"], resources: ["configmaps"] }]
  validations:
    - expression: "object.data.x == 'y'"`,
      ),
    );
    const e = await failure(
      core().createNamespacedConfigMap({ namespace: "guarded", body: cm("d", { owner: "team-a" }) }),
    );
    expect(e.code).toBe(422);
    expect(e.message).toContain("denied request: expression 'object.data.x == 'y'' resulted in error");
  });
});
