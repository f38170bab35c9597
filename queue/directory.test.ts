/** Which GitTargets a branch's worker takes, where a missing branch starts, and what a refused GitTarget says. */
import { describe, expect, it } from "vitest";
import { branchKey } from "./contract.js";
import type { GitProvider, GitTarget } from "./crds/index.js";
import { directoryFromObjects } from "./directory.js";
import { acceptanceConditions, acceptanceShown, publicationConditions } from "./worker/status.js";

const URL = "https://git.example/team/apps.git";
const KEY = branchKey({ namespace: "platform", name: "gp" }, URL, "env/dev");

function provider(
  namespace: string,
  extra: Partial<GitProvider["spec"]> = {},
  meta: Partial<GitProvider["metadata"]> = {},
): GitProvider {
  return {
    apiVersion: "applygate.dev/v1alpha1",
    kind: "GitProvider",
    metadata: { name: "gp", namespace, ...meta },
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

  it("a GitProvider of another namespace naming the platform's repository, in any spelling, is refused with its GitTargets; its branch has no credentials", async () => {
    const platform = provider(
      "platform",
      { credentialsSecretRef: { name: "creds" } },
      { creationTimestamp: "2026-01-01T00:00:00Z" },
    );
    const secrets = [
      {
        kind: "Secret" as const,
        metadata: { name: "creds", namespace: "platform" },
        stringData: { token: "p" },
      },
      {
        kind: "Secret" as const,
        metadata: { name: "creds", namespace: "a-team" },
        stringData: { token: "b" },
      },
    ];
    const own = target("platform", "infra");
    for (const url of [
      URL,
      "https://GIT.example:443/team/apps",
      "http://git.example/team/apps",
      "https://git.example/Team/Apps/",
      "https://git.example//team/x/../apps.git",
    ]) {
      // Named to sort first, created later: the listing order wins nothing.
      const squatter = provider(
        "a-team",
        { url, credentialsSecretRef: { name: "creds" } },
        { creationTimestamp: "2026-02-01T00:00:00Z" },
      );
      const hostile = target("a-team", "web", { providerRef: { name: "gp" } });
      const d = directoryFromObjects([squatter, platform], [hostile, own], secrets);
      const theirs = await d.branch(branchKey({ namespace: "a-team", name: "gp" }, url, "env/dev"));
      expect(theirs?.targets, url).toEqual([]);
      expect(theirs?.refused, url).toEqual([
        expect.objectContaining({
          namespace: "a-team",
          name: "web",
          reason: "RepositoryHeld",
          message: expect.stringContaining("held by GitProvider platform/gp"),
        }),
      ]);
      // A refused GitProvider is used for nothing, its own credentials included.
      expect(theirs?.remote, url).toEqual({ url });
      // The platform's branch: its own GitTarget, its own credentials, nobody else's.
      const ours = await d.branch(KEY);
      expect(ours?.targets.map((t) => `${t.namespace}/${t.name}`)).toEqual(["platform/infra"]);
      expect(ours?.remote).toEqual({ url: URL, auth: { username: "git", password: "p" } });
      expect(ours?.refused).toBeUndefined();
    }
    // Admitted by the holder: its own branch, with its own credentials.
    const admitted = directoryFromObjects(
      [
        provider(
          "a-team",
          { url: "https://GIT.example/team/apps.git", credentialsSecretRef: { name: "creds" } },
          { creationTimestamp: "2026-02-01T00:00:00Z" },
        ),
        { ...platform, spec: { ...platform.spec, accessFrom: { namespaces: ["a-team"] } } },
      ],
      [target("a-team", "web", { providerRef: { name: "gp" } }), own],
      secrets,
    );
    const theirs = await admitted.branch(
      branchKey({ namespace: "a-team", name: "gp" }, "https://GIT.example/team/apps.git", "env/dev"),
    );
    expect(theirs?.targets.map((t) => `${t.namespace}/${t.name}`)).toEqual(["a-team/web"]);
    expect(theirs?.remote.auth).toEqual({ username: "git", password: "b" });
    expect(admitted.keys()).toHaveLength(2);
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
