/**
 * The commit status an apply's approval rests on, read at the moment of the write for each commit
 * the apply would bring: the pure rule (`judgeStanding` → `judgeGovernance`), and the read from a real HTTP host answering
 * the GitHub and Gitea shapes, the GitProvider's API, with its credentials from the simulated API
 * server. Where the API is is the GitProvider's to say: a claim naming another host sends nothing
 * there.
 */
import * as k8s from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Attempt } from "../queue/contract.js";
import { crdFiles } from "../queue/crds/files.js";
import { errorMessage } from "../queue/errors.js";
import { type KObject, Kube, RESOURCES } from "../queue/kube/index.js";
import { type ApiServer, startApiServer } from "../test/cluster/apiserver/index.js";
import { type StatusHost, startStatusHost } from "../test/git/status-host.js";
import { makeAttempt } from "../test/support/attempts.js";
import { inControlStatus } from "../test/support/claims.js";
import { commitStatusesAtWrite } from "./commit-status-check.js";
import type { BroughtRead } from "./governance-check.js";
import { judgeStanding } from "./standing.js";

const A = "a".repeat(40);
const B = "b".repeat(40);

/** The commits an attempt lists, as the commits the apply would bring. */
const commitsOf = (a: Attempt) => (a.approvals ?? []).map((x) => x.commit);
const attemptWith = (approvals: Attempt["approvals"]): Attempt =>
  makeAttempt({ commit: B, ...(approvals ? { approvals } : {}) });

function claim(approval: Record<string, unknown>): KObject {
  return {
    metadata: { name: "web", namespace: "team-a" },
    spec: { kustomizationRef: { name: "web" }, approval },
    status: inControlStatus(),
  };
}
const target: KObject = {
  metadata: { name: "one", namespace: "team-a", uid: "u1" },
  spec: { branch: "main", claimRef: { kind: "FluxClaim", name: "web" }, providerRef: { name: "repo" } },
};
const statusApproval = (api = "github", stored: Record<string, string> = {}) => ({
  commitStatus: { context: "release/approved", api, ...stored },
});
/** The GitTarget, naming the GitProvider whose API is `root`. */
const targetOf = (provider: string): KObject => ({
  ...target,
  spec: { ...(target.spec as Record<string, unknown>), providerRef: { name: provider } },
});
/** Judged as the executor does when the apply would bring `commits`, with the statuses read then. */
const judge = (c: KObject, a: Attempt, statuses?: Record<string, string>, commits = [A]) => {
  const brought: BroughtRead | undefined = statuses
    ? { ok: true, since: null, commits, statuses }
    : undefined;
  return judgeStanding({
    attempt: a,
    claim: c,
    grants: [],
    targets: new Map([["team-a/one", target]]),
    ...(brought ? { brought } : {}),
  });
};

describe("commit status approval re-checked at the write (pure)", () => {
  const carried = attemptWith([{ commit: A, sources: ["CommitStatus"] }]);

  it("still success at the write: the attempt may start", () => {
    expect(judge(claim(statusApproval()), carried, { [A]: "success" })).toMatchObject({ ok: true });
  });

  it("turned pending, failure or missing since the send, or not readable: nothing starts, NotApproved", () => {
    for (const state of ["pending", "failure", "missing", "error"]) {
      const s = judge(claim(statusApproval()), carried, { [A]: state });
      expect(s, state).toMatchObject({ ok: false, phase: "RequestFailed", reason: "NotApproved" });
      if (!s.ok) expect(s.message).toContain(`${A.slice(0, 12)} (CommitStatus)`);
    }
    // No read at all is no approval.
    expect(judge(claim(statusApproval()), carried)).toMatchObject({ ok: false, reason: "NotApproved" });
  });

  it("a claim that requires no commit status is not asked for one", () => {
    expect(judge(claim({ manual: false }), carried)).toMatchObject({ ok: true });
  });
});

describe("commit status read at the write, from the Git host", () => {
  let api: ApiServer;
  let kube: Kube;
  const hosts: StatusHost[] = [];

  beforeAll(async () => {
    api = await startApiServer({});
    for (const f of crdFiles()) await api.installCrdFile(f);
    const kc = api.kubeConfig();
    await kc.makeApiClient(k8s.CoreV1Api).createNamespace({ body: { metadata: { name: "team-a" } } });
    kube = new Kube(kc);
    await kube.core.createNamespacedSecret({
      namespace: "team-a",
      body: { metadata: { name: "creds" }, stringData: { username: "git", password: "s3cret" } },
    });
  });
  let providers = 0;
  /** A GitProvider of team-a whose commit-status API is `root`; its GitTarget. */
  const providerAt = async (root: string): Promise<KObject> => {
    const name = `repo-${++providers}`;
    await kube.apply(RESOURCES.gitProvider, {
      apiVersion: "applygate.dev/v1alpha1",
      kind: "GitProvider",
      metadata: { name, namespace: "team-a" },
      spec: {
        url: "https://git.example/team/apps.git",
        type: "gitea",
        webhookSecretRef: { name: "hook" },
        credentialsSecretRef: { name: "creds" },
        commitStatus: { apiURL: root },
      },
    } as KObject);
    return targetOf(name);
  };
  const http = { allowHttpCredentials: true };
  afterAll(async () => {
    for (const h of hosts) await h.close();
    await kube?.close();
    await api?.close();
  });

  for (const hostApi of ["github", "gitea"] as const) {
    it(`${hostApi}: reads the context on each commit the apply would bring from the GitProvider's API with its token`, async () => {
      const h = await startStatusHost({ api: hostApi, owner: "team", repo: "apps", token: "s3cret" });
      hosts.push(h);
      const t = await providerAt(h.root);
      const c = claim(statusApproval(hostApi));
      const a = attemptWith([
        { commit: A, sources: ["CommitStatus"] },
        { commit: B, sources: ["CommitStatus"] },
      ]);
      h.setStatus(A, "release/approved", "success");
      h.setStatus(B, "release/approved", "success");
      expect(await commitStatusesAtWrite(kube, commitsOf(a), c, [t], http)).toEqual({
        [A]: "success",
        [B]: "success",
      });
      // The status turns red after the send: the write finds it so.
      h.setStatus(B, "release/approved", "failure");
      const read = await commitStatusesAtWrite(kube, commitsOf(a), c, [t], http);
      expect(read).toEqual({ [A]: "success", [B]: "failure" });
      expect(judge(c, a, read, [A, B])).toMatchObject({ ok: false, reason: "NotApproved" });
      expect(h.badRequests).toEqual([]);
    });
  }

  it("an apiURL or repository a claim still carries (stored before they moved) is not read: the token goes to the provider's API only", async () => {
    const own = await startStatusHost({ api: "github", owner: "team", repo: "apps", token: "s3cret" });
    const listener = await startStatusHost({ api: "github", owner: "evil", repo: "loot", token: "s3cret" });
    hosts.push(own, listener);
    own.setStatus(A, "release/approved", "success");
    listener.setStatus(A, "release/approved", "success");
    const t = await providerAt(own.root);
    const a = attemptWith([{ commit: A, sources: ["CommitStatus"] }]);
    const c = claim(statusApproval("github", { apiURL: listener.root, repository: "evil/loot" }));
    expect(await commitStatusesAtWrite(kube, commitsOf(a), c, [t], http)).toEqual({ [A]: "success" });
    expect(listener.requests).toEqual([]);
    expect(own.requests.map((r) => r.path)).toEqual([`/repos/team/apps/commits/${A}/status`]);
  });

  it("the API server refuses apiURL and repository on a claim or a GitTarget, pointing to the GitProvider", async () => {
    const refused = async (
      type: (typeof RESOURCES)[keyof typeof RESOURCES],
      body: KObject,
      field: string,
    ) => {
      const err = await kube.apply(type, body).catch((e: unknown) => e);
      expect(err, field).toMatchObject({ code: 422 });
      expect(errorMessage(err)).toContain(`${field} is set on the GitProvider (spec.commitStatus.${field})`);
    };
    for (const [field, value] of [
      ["apiURL", "http://127.0.0.1:9/api/v1"],
      ["repository", "evil/loot"],
    ] as const) {
      await refused(
        RESOURCES.fluxClaim,
        {
          apiVersion: "applygate.dev/v1alpha1",
          kind: "FluxClaim",
          metadata: { name: `c-${field.toLowerCase()}`, namespace: "team-a" },
          spec: {
            kustomizationRef: { name: "web", namespace: "team-a" },
            approval: { commitStatus: { context: "ci", api: "gitea", [field]: value } },
          },
        } as KObject,
        field,
      );
      await refused(
        RESOURCES.fluxClaim,
        {
          apiVersion: "applygate.dev/v1alpha1",
          kind: "FluxClaim",
          metadata: { name: `r-${field.toLowerCase()}`, namespace: "team-a" },
          spec: {
            kustomizationRef: { name: "web", namespace: "team-a" },
            commitStatusReport: { api: "gitea", [field]: value },
          },
        } as KObject,
        field,
      );
      await refused(
        RESOURCES.gitTarget,
        {
          apiVersion: "applygate.dev/v1alpha1",
          kind: "GitTarget",
          metadata: { name: `t-${field.toLowerCase()}`, namespace: "team-a" },
          spec: {
            providerRef: { name: "repo-1" },
            branch: "main",
            path: "apps",
            approval: { commitStatus: { context: "ci", api: "gitea", [field]: value } },
          },
        } as KObject,
        field,
      );
    }
  });

  it("over plain http without the operator's flag the token is not sent, and the read counts as not approved", async () => {
    const h = await startStatusHost({ api: "github", owner: "team", repo: "apps", token: "s3cret" });
    hosts.push(h);
    h.setStatus(A, "release/approved", "success");
    const t = await providerAt(h.root);
    const a = attemptWith([{ commit: A, sources: ["CommitStatus"] }]);
    expect(await commitStatusesAtWrite(kube, commitsOf(a), claim(statusApproval()), [t])).toEqual({
      [A]: "error",
    });
    expect(h.requests).toEqual([]);
  });

  it("a host that does not answer, or refuses the credentials, counts as not approved", async () => {
    const h = await startStatusHost({ api: "github", owner: "team", repo: "apps", token: "other" });
    hosts.push(h);
    h.setStatus(A, "release/approved", "success");
    const a = attemptWith([{ commit: A, sources: ["CommitStatus"] }]);
    expect(
      await commitStatusesAtWrite(
        kube,
        commitsOf(a),
        claim(statusApproval()),
        [await providerAt(h.root)],
        http,
      ),
    ).toEqual({ [A]: "error" });
    const closed = await startStatusHost({ api: "github", owner: "team", repo: "apps", token: "s3cret" });
    const root = closed.root;
    await closed.close();
    const read = await commitStatusesAtWrite(
      kube,
      commitsOf(a),
      claim(statusApproval()),
      [await providerAt(root)],
      {
        ...http,
        timeoutMs: 2000,
      },
    );
    expect(read).toEqual({ [A]: "error" });
  });

  it("no commit status required, or no commit to read: nothing is read", async () => {
    expect(await commitStatusesAtWrite(kube, [], claim(statusApproval()), [target])).toBe(undefined);
    expect(await commitStatusesAtWrite(kube, [A], claim({ manual: true }), [target])).toBe(undefined);
  });
});
