import { describe, expect, it } from "vitest";
import type { GitTarget } from "../../queue/crds/index.js";
import type { KObject } from "../../queue/kube/index.js";
import { appliedCommitOf, clusterCommitsOf, type TargetSources } from "./targets.js";

const target = {
  apiVersion: "applygate.dev/v1alpha1",
  kind: "GitTarget",
  metadata: { name: "site", namespace: "team" },
  spec: {
    providerRef: { name: "gp" },
    branch: "main",
    path: "apps/site",
    claimRef: { kind: "FluxClaim", name: "claim" },
  },
} as unknown as GitTarget;

/** Sources holding the one GitTarget and its claim with `status`. */
function sources(status: Record<string, unknown> | undefined): TargetSources {
  const claim = { metadata: { name: "claim", namespace: "team" }, ...(status ? { status } : {}) };
  return {
    target: (ns, name) => (ns === "team" && name === "site" ? target : undefined),
    provider: () => undefined,
    providers: () => [],
    targets: () => [target],
    grants: () => [],
    claim: (kind, ns, name) =>
      kind === "FluxClaim" && ns === "team" && name === "claim" ? (claim as unknown as KObject) : undefined,
  };
}

const A = "a".repeat(40);
const B = "b".repeat(40);

describe("the commits the cluster may run for a GitTarget", () => {
  it("is the applied commit, and the latest operation's commit unless it succeeded", () => {
    const running = sources({ lastAppliedCommit: A, operation: { commit: B, phase: "Running" } });
    expect(clusterCommitsOf(running, "team", "site")).toEqual([A, B]);
    expect(appliedCommitOf(running, "team", "site")).toBe(A);
    const failed = sources({ lastAppliedCommit: A, operation: { commit: B, phase: "Failed" } });
    expect(clusterCommitsOf(failed, "team", "site")).toEqual([A, B]);
    const succeeded = sources({ lastAppliedCommit: B, operation: { commit: B, phase: "Succeeded" } });
    expect(clusterCommitsOf(succeeded, "team", "site")).toEqual([B]);
    // A first operation in flight, nothing applied yet.
    const first = sources({ operation: { commit: B, phase: "Requested" } });
    expect(clusterCommitsOf(first, "team", "site")).toEqual([B]);
  });

  it("is empty without a claim status, a claim or the GitTarget", () => {
    expect(clusterCommitsOf(sources(undefined), "team", "site")).toEqual([]);
    expect(clusterCommitsOf(sources({ lastAppliedCommit: "" }), "team", "site")).toEqual([]);
    expect(clusterCommitsOf(sources({ lastAppliedCommit: A }), "team", "other")).toEqual([]);
    expect(appliedCommitOf(sources(undefined), "team", "site")).toBeUndefined();
  });
});
