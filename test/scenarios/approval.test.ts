/**
 * Production on approved commits only: the Flux claim requires manual approval. A foreign push
 * (to the Argo CD app's folder, so both appliers have a ForeignCommit) is applied by the Argo CD
 * claim at once; the Flux claim waits with AwaitingApproval naming the commit, while an API edit
 * to its own folder still reaches Git. A person approves the SHA on the claim and one Flux apply
 * runs, of the tip holding both, recorded in the claim's history with the approval.
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

  it("a foreign push waits with AwaitingApproval while API edits still reach Git; approved, one apply runs", async () => {
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

    await custom.patchNamespacedCustomObject(
      {
        ...claimRef,
        body: { metadata: { annotations: { [`approve.applygate.dev/${pushed}`]: "ada: CAB-7" } } },
      },
      MERGE,
    );
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
      approvals: [{ commit: pushed, sources: ["Manual"] }],
    });
  });
});
