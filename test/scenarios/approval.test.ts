/**
 * Production on approved commits only: the Flux claim requires manual approval. A foreign push
 * (to the Argo CD app's folder, so both appliers have a ForeignCommit) is applied by the Argo CD
 * claim at once; the Flux claim waits with AwaitingApproval naming the commit, while an API edit
 * to its own folder still reaches Git. An editor of the namespace (eve, bound to `edit`) cannot
 * approve it: she may not create an Approval, and what she may do (annotate the claim, name
 * herself as approver) approves nothing. A release manager (ada, bound to `applygate-approver`)
 * approves the SHA and one Flux apply runs, of the tip holding both, recorded in the claim's
 * history with the approval and ada as its approver, in the API server's words.
 */
import * as k8s from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  apiEdit,
  appliedCommits,
  clusterValue,
  foreignPush,
  holds,
  readClaim,
  tip,
  until,
} from "../playground/actors.js";
import { DEMO_NAMESPACE } from "../playground/demo.js";
import { operationsOf, type Scene, startScene } from "./harness.js";

const MERGE = k8s.setHeaderOptions("Content-Type", k8s.PatchStrategy.MergePatch);
const claimRef = {
  group: "applygate.dev",
  version: "v1alpha1",
  plural: "fluxclaims",
  namespace: DEMO_NAMESPACE,
  name: "flux-app",
};

const approvals = {
  group: "applygate.dev",
  version: "v1alpha1",
  plural: "approvals",
  namespace: DEMO_NAMESPACE,
};
const approvalOf = (commit: string, approver: string) => ({
  apiVersion: "applygate.dev/v1alpha1",
  kind: "Approval",
  metadata: { generateName: `flux-app-${commit.slice(0, 8)}-` },
  spec: { claimRef: { kind: "FluxClaim", name: "flux-app" }, approver, commit, note: "CAB-7" },
});
const roleBinding = (user: string, clusterRole: string) => `
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: { name: ${user}-${clusterRole}, namespace: ${DEMO_NAMESPACE} }
roleRef: { apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: ${clusterRole} }
subjects: [{ apiGroup: rbac.authorization.k8s.io, kind: User, name: ${user} }]
`;

type Gate = { type: string; reason: string; message: string };
const gate = async (s: Scene) =>
  ((await readClaim(s.a, "flux"))?.status?.conditions as Gate[] | undefined)?.find(
    (c) => c.type === "ApplyAllowed",
  );

describe("production on approved commits only", () => {
  let s: Scene;
  beforeAll(async () => {
    s = await startScene();
  });
  afterAll(async () => s?.stop());

  it("a foreign push waits with AwaitingApproval while API edits still reach Git; an editor cannot approve it; approved by a release manager, one apply runs, recorded as hers", async () => {
    const custom = s.a.kubeConfig.makeApiClient(k8s.CustomObjectsApi);
    await custom.patchNamespacedCustomObject(
      { ...claimRef, body: { spec: { approval: { manual: true } } } },
      MERGE,
    );
    await until(
      async () => (await gate(s))?.reason === "Approved",
      "the claim to show nothing awaiting approval",
    );
    const fluxBefore = appliedCommits(s.a, "flux").length;

    const pushed = await foreignPush(s.a, "argocd", "from-git");
    await until(
      async () =>
        operationsOf(s, "argocd").some((o) => o.phases.includes("Succeeded") && o.attempt.commit === pushed),
      "the Argo CD claim, which needs no approval, to apply the foreign commit",
    );
    await until(
      async () => (await gate(s))?.reason === "AwaitingApproval",
      "the Flux claim to await approval",
    );
    expect((await gate(s))?.message).toContain(pushed.slice(0, 12));

    const edit = await apiEdit(s.a, "flux", "from-api");
    expect(edit.status).toBe(200);
    await until(
      async () => (await holds(s.a, await tip(s.a), edit.body.commit)) === true,
      "the API edit in Git",
    );
    await until(
      async () => (await gate(s))?.message.includes(pushed.slice(0, 12)) === true,
      "still awaiting",
    );
    expect(operationsOf(s, "flux")).toEqual([]);
    expect(appliedCommits(s.a, "flux").length).toBe(fluxBefore);

    // Eve may edit the namespace: she may annotate the claim, but not approve.
    const as = (user: string) => {
      s.a.api.addUser(user, `${user}-token`, "rbac");
      return s.a.api.kubeConfig(user).makeApiClient(k8s.CustomObjectsApi);
    };
    await s.a.api.applyYaml(
      [roleBinding("eve", "edit"), roleBinding("ada", "applygate-approver")].join("---\n"),
    );
    const eve = as("eve");
    const ada = as("ada");
    await eve.patchNamespacedCustomObject(
      {
        ...claimRef,
        body: { metadata: { annotations: { [`approve.applygate.dev/${pushed}`]: "eve: self-approved" } } },
      },
      MERGE,
    );
    const eveApproves = await eve
      .createNamespacedCustomObject({ ...approvals, body: approvalOf(pushed, "eve") })
      .then(
        () => 201,
        (e: { code?: number }) => e.code,
      );
    expect(eveApproves).toBe(403);
    // Ada may approve, but only as herself.
    const inEvesName = await ada
      .createNamespacedCustomObject({ ...approvals, body: approvalOf(pushed, "eve") })
      .then(
        () => 201,
        (e: { code?: number }) => e.code,
      );
    expect(inEvesName).toBe(403);
    await until(
      async () => (await gate(s))?.message.includes(pushed.slice(0, 12)) === true,
      "still awaiting after the annotation",
    );
    expect(operationsOf(s, "flux")).toEqual([]);

    await ada.createNamespacedCustomObject({ ...approvals, body: approvalOf(pushed, "ada") });
    await until(
      async () => operationsOf(s, "flux").some((o) => o.phases.includes("Succeeded")),
      "the approved Flux apply",
    );
    const ops = operationsOf(s, "flux");
    const done = ops.filter((o) => o.phases.includes("Succeeded"));
    expect(done).toHaveLength(1);
    const head = await tip(s.a);
    expect(done[0]?.attempt.commit).toBe(head);
    expect(await holds(s.a, head, pushed)).toBe(true);
    expect(await holds(s.a, head, edit.body.commit)).toBe(true);
    expect(done[0]?.attempt.approvals?.map((a) => a.commit)).toEqual([pushed]);
    expect((await clusterValue(s.a, "flux")).greeting).toBe("from-api");
    const history = (await readClaim(s.a, "flux"))?.status?.history as Array<Record<string, unknown>>;
    expect(history[0]).toMatchObject({
      commit: head,
      phase: "Succeeded",
      approvals: [{ commit: pushed, sources: ["Manual"], by: ["ada"] }],
    });
  });
});
