/** Which GitTargets a branch's worker takes, where a missing branch starts, and what a refused GitTarget says. */
import { describe, expect, it } from "vitest";
import { branchKey } from "../contract.js";
import type { GitProvider, GitTarget } from "../crds/index.js";
import { directoryFromObjects } from "./directory.js";
import { acceptanceConditions, acceptanceShown, publicationConditions } from "./status.js";

const URL = "https://git.example/team/apps.git";
const KEY = branchKey(URL, "env/dev");

function provider(namespace: string, extra: Partial<GitProvider["spec"]> = {}): GitProvider {
  return {
    apiVersion: "applygate.dev/v1alpha1",
    kind: "GitProvider",
    metadata: { name: "gp", namespace },
    spec: {
      url: URL,
      type: "gitea",
      allowSha1Signature: false,
      webhookSecretRef: { name: "hook" },
      ...extra,
    },
  };
}

function target(namespace: string, name: string, extra: Partial<GitTarget["spec"]> = {}): GitTarget {
  return {
    apiVersion: "applygate.dev/v1alpha1",
    kind: "GitTarget",
    metadata: { name, namespace, uid: `uid-${namespace}-${name}` },
    spec: {
      providerRef: { name: "gp", namespace: "platform" },
      branch: "env/dev",
      path: `clusters/${namespace}-${name}`,
      onRefusal: "Ignore",
      ...extra,
    },
  };
}

describe("directory: the GitTargets a branch's worker takes", () => {
  it("refuses a GitTarget whose GitProvider, in another namespace, does not admit its namespace", async () => {
    const own = target("platform", "infra");
    const foreign = target("team-a", "web");
    const spec = await directoryFromObjects([provider("platform")], [own, foreign]).branch(KEY);
    expect(spec?.targets.map((t) => `${t.namespace}/${t.name}`)).toEqual(["platform/infra"]);
    expect(spec?.refused).toEqual([
      {
        namespace: "team-a",
        name: "web",
        uid: "uid-team-a-web",
        reason: "ProviderNamespaceNotAllowed",
        message: "GitProvider platform/gp does not admit namespace team-a (spec.accessFrom.namespaces)",
      },
    ]);
    for (const namespaces of [["team-a"], ["*"]]) {
      const admitted = await directoryFromObjects(
        [provider("platform", { accessFrom: { namespaces } })],
        [own, foreign],
      ).branch(KEY);
      expect(admitted?.targets.map((t) => `${t.namespace}/${t.name}`)).toEqual([
        "platform/infra",
        "team-a/web",
      ]);
      expect(admitted?.refused).toBeUndefined();
    }
  });

  it("a missing branch starts from the first baseBranch its GitTargets name, else the GitProvider's, else none", async () => {
    const p = provider("platform", { baseBranch: "main" });
    const at = async (targets: GitTarget[], providers = [p]) =>
      (await directoryFromObjects(providers, targets).branch(KEY))?.baseBranch;
    expect(await at([target("platform", "b", { baseBranch: "release" }), target("platform", "a")])).toBe(
      "release",
    );
    expect(
      await at([
        target("platform", "b", { baseBranch: "release" }),
        target("platform", "a", { baseBranch: "stable" }),
      ]),
    ).toBe("stable");
    expect(await at([target("platform", "a")])).toBe("main");
    expect(await at([target("platform", "a")], [provider("platform")])).toBeUndefined();
  });
});

describe("conditions of a refused GitTarget and of a missing base", () => {
  const now = Date.parse("2026-03-01T10:00:00Z");
  const problem = {
    reason: "ProviderNamespaceNotAllowed",
    message: "GitProvider platform/gp does not admit namespace team-a",
  };

  it("a refused GitTarget is Accepted=False and Ready=False with the reason; admitted again, Accepted=True", () => {
    const refused = acceptanceConditions(problem, undefined, now, 3);
    expect(refused.map((c) => [c.type, c.status, c.reason, c.observedGeneration])).toEqual([
      ["Accepted", "False", "ProviderNamespaceNotAllowed", 3],
      ["Ready", "False", "ProviderNamespaceNotAllowed", 3],
    ]);
    expect(acceptanceShown(problem, refused)).toBe(true);
    expect(acceptanceShown(undefined, refused)).toBe(false);
    expect(acceptanceShown({ ...problem, message: "other" }, refused)).toBe(false);
    const again = acceptanceConditions(undefined, refused, now + 1000);
    expect(again.map((c) => [c.type, c.status, c.reason])).toEqual([["Accepted", "True", "Accepted"]]);
    expect(acceptanceShown(undefined, again)).toBe(true);
    // A GitTarget never refused is not written to at all.
    expect(acceptanceShown(undefined, undefined)).toBe(true);
  });

  it("a publication waiting for its base branch says BaseBranchMissing, not only PublicationRetrying", () => {
    const conditions = publicationConditions(
      {
        branchKey: KEY,
        state: "Retrying",
        retryingSince: now,
        lastError: "base branch release does not exist: env/dev is created from it once it does",
        retryReason: "BaseBranchMissing",
        nextRetryAt: now + 10_000,
        intakePaused: false,
        retainedWrites: 1,
        retainedBytes: 100,
      },
      undefined,
      now,
    );
    expect(conditions.map((c) => [c.type, c.status, c.reason])).toEqual([
      ["Ready", "False", "BaseBranchMissing"],
      ["Reconciling", "True", "BaseBranchMissing"],
      ["Stalled", "False", "PublicationRetrying"],
    ]);
    expect(conditions[0]?.message).toContain("base branch release does not exist");
  });
});
