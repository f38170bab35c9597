/**
 * The approval check at the write, from the executor's own reads: a real Git smart-HTTP server
 * holding the branch, the simulated API server holding the claim, its GitTarget and GitProvider
 * and the keys Secret, and Redis holding the branch's decision state. An attempt is a queue entry
 * anyone with the dashboard or Redis can add: whatever approvals it lists, the commits an apply of
 * it would bring are read here, and each must be approved.
 */
import { execFile } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Attempt, branchKey } from "../queue/contract.js";
import { crdFiles } from "../queue/crds/files.js";
import { StatusReason } from "../queue/crds/reasons.js";
import { initialState } from "../queue/decide/index.js";
import { branchKeys } from "../queue/keys.js";
import { addressOf, type KObject, Kube, RESOURCES } from "../queue/kube/index.js";
import { type ApiServer, startApiServer } from "../test/cluster/apiserver/index.js";
import { GitPeer } from "../test/git/peer.js";
import { type GitServer, startGitServer } from "../test/git/server.js";
import { type IsolatedRedis, isolatedRedis } from "../test/redis/isolated.js";
import { makeAttempt } from "../test/support/attempts.js";
import { inControlStatus } from "../test/support/claims.js";
import { commitFile, sshKey } from "../test/support/signing.js";
import { approvalRecheck, publishedFromRedis } from "./approval-recheck.js";
import { GitAncestry, remoteFromCluster } from "./git-ancestry.js";
import { recheckStanding } from "./standing.js";

const NS = "apps";
let api: ApiServer;
let server: GitServer;
let kube: Kube;
let redis: IsolatedRedis;
let url: string;
let peer: GitPeer;
let git: GitAncestry;
let last: string;
let targetUid: string;
const cache = mkdtempSync(join(tmpdir(), "approval-recheck-"));
const keysDir = mkdtempSync(join(tmpdir(), "approval-keys-"));
const ada = sshKey(keysDir, "ed25519", "ada");

const inControl = inControlStatus();

/** Sets the claim's approval rule, its manual approvals (its Approvals) and its last applied commit. */
async function claimWith(approval: Record<string, unknown>, approved: readonly string[]): Promise<void> {
  const a = RESOURCES.approval;
  const given = await kube.list<KObject>(a, NS);
  for (const o of given.items)
    await kube.custom.deleteNamespacedCustomObject({ ...addressOf(a), namespace: NS, name: o.metadata.name });
  for (const sha of approved)
    await kube.custom.createNamespacedCustomObject({
      ...addressOf(a),
      namespace: NS,
      body: {
        apiVersion: "applygate.dev/v1alpha1",
        kind: "Approval",
        metadata: { name: `web-${sha.slice(0, 12)}` },
        spec: { claimRef: { kind: "FluxClaim", name: "web" }, approver: "ada", commit: sha, note: "CAB-1" },
      },
    });
  await kube.mergePatch(RESOURCES.fluxClaim, NS, "web", { spec: { approval: null } });
  await kube.mergePatch(RESOURCES.fluxClaim, NS, "web", { spec: { approval } });
  const now = await kube.get<KObject>(RESOURCES.fluxClaim, NS, "web");
  await kube.patchStatus(
    RESOURCES.fluxClaim,
    NS,
    "web",
    { ...inControl, lastAppliedCommit: last },
    now?.metadata.resourceVersion,
  );
}

const attemptFor = (commit: string, over: Partial<Attempt> = {}): Attempt =>
  makeAttempt({
    namespace: NS,
    commit,
    repository: url,
    branchKey: branchKey({ namespace: NS, name: "gp" }, url, "main"),
    targets: [{ uid: targetUid, namespace: NS, name: "one", reason: "ForeignCommit" }],
    ...over,
  });

const judge = (a: Attempt) =>
  recheckStanding(kube, a, {
    brought: approvalRecheck({ kube, git, published: publishedFromRedis(redis.client, redis.prefix) }),
  });

/**
 * Pushes one commit to the branch (signed by `signer` when given); answers its SHA. The push runs
 * beside the event loop: the Git server answering it is in this process.
 */
async function pushCommit(name: string, signer?: typeof ada): Promise<string> {
  const sha = commitFile(peer.dir, `${name}.txt`, name, signer);
  await promisify(execFile)("git", ["push", "-q", "origin", "HEAD:refs/heads/main"], { cwd: peer.dir });
  return sha;
}

beforeAll(async () => {
  api = await startApiServer();
  for (const f of crdFiles()) await api.installCrdFile(f);
  kube = new Kube(api.kubeConfig());
  server = await startGitServer();
  redis = await isolatedRedis("approval-recheck");
  url = await server.createRepo("r", { "apps/cm.yaml": "a: 1\n" });
  peer = await GitPeer.clone(url);
  last = (await server.tip("r")) as string;
  await kube.core.createNamespace({ body: { metadata: { name: NS } } });
  await kube.core.createNamespacedSecret({
    namespace: NS,
    body: { metadata: { name: "release-keys" }, stringData: { keys: `${ada.publicKey}\n` } },
  });
  await kube.apply(RESOURCES.gitProvider, {
    apiVersion: "applygate.dev/v1alpha1",
    kind: "GitProvider",
    metadata: { name: "gp", namespace: NS },
    spec: { url, type: "gitea", webhookSecretRef: { name: "hook" } },
  });
  await kube.apply(RESOURCES.fluxClaim, {
    apiVersion: "applygate.dev/v1alpha1",
    kind: "FluxClaim",
    metadata: { name: "web", namespace: NS },
    spec: { kustomizationRef: { name: "web", namespace: NS } },
  });
  await kube.apply(RESOURCES.gitTarget, {
    apiVersion: "applygate.dev/v1alpha1",
    kind: "GitTarget",
    metadata: { name: "one", namespace: NS },
    spec: {
      providerRef: { name: "gp" },
      branch: "main",
      path: "apps",
      claimRef: { kind: "FluxClaim", name: "web" },
    },
  });
  targetUid = (await kube.get<KObject>(RESOURCES.gitTarget, NS, "one"))?.metadata.uid as string;
  git = new GitAncestry({ cacheDir: cache, remoteFor: remoteFromCluster(kube) });
});

afterAll(async () => {
  await redis?.cleanup();
  await server?.close();
  await api?.close();
  await peer?.remove();
  await rm(cache, { recursive: true, force: true });
  await rm(keysDir, { recursive: true, force: true });
});

describe("approval at the write, read by the executor", () => {
  it("an attempt listing approvals for its tip only is refused for the unapproved commits under it, and goes once they are approved", async () => {
    const x1 = await pushCommit("x1");
    const x2 = await pushCommit("x2");
    const x3 = await pushCommit("x3");
    await claimWith({ manual: true }, [x3]);
    const forged = attemptFor(x3, { approvals: [{ commit: x3, sources: ["Manual"], by: ["ada"] }] });
    const out = await judge(forged);
    expect(out).toMatchObject({ ok: false, phase: "RequestFailed", reason: StatusReason.NotApproved });
    const message = (out as { message: string }).message;
    expect(message).toContain(`2 commit(s) since ${last.slice(0, 12)} that lack approval`);
    expect(message).toContain(`${x1.slice(0, 12)} (Manual)`);
    expect(message).toContain(`${x2.slice(0, 12)} (Manual)`);

    // No approvals listed at all (as a hand-made queue entry has): refused the same.
    expect(await judge(attemptFor(x3, { approvals: [] }))).toMatchObject({
      ok: false,
      reason: "NotApproved",
    });

    // The attempt's `repository` is only its word: the GitTarget's GitProvider names what is read.
    const elsewhere = attemptFor(x3, { repository: "http://127.0.0.1:9/other", approvals: [] });
    expect(await judge(elsewhere)).toMatchObject({ ok: false, reason: "NotApproved" });

    await claimWith({ manual: true }, [x1, x2, x3]);
    expect(await judge(attemptFor(x3, { approvals: [] }))).toMatchObject({ ok: true });
    last = x3;
  });

  it("the worker's own publications, as the branch's decision state records them, need no approval", async () => {
    const foreign = await pushCommit("foreign");
    const own = await pushCommit("own");
    await claimWith({ manual: true }, [foreign]);
    expect(await judge(attemptFor(own))).toMatchObject({ ok: false, reason: "NotApproved" });
    const state = {
      ...initialState(
        { key: branchKey({ namespace: NS, name: "gp" }, url, "main"), repository: url, branch: "main" },
        "t",
      ),
      published: [{ tip: own, base: foreign }],
    };
    await redis.client.set(
      branchKeys(redis.prefix, branchKey({ namespace: NS, name: "gp" }, url, "main")).decisions,
      JSON.stringify(state),
    );
    expect(await judge(attemptFor(own))).toMatchObject({ ok: true });
    // The foreign commit under it still counts.
    await claimWith({ manual: true }, []);
    const out = await judge(attemptFor(own));
    expect(out).toMatchObject({ ok: false, reason: "NotApproved" });
    expect((out as { message: string }).message).toContain(`1 commit(s)`);
    expect((out as { message: string }).message).toContain(foreign.slice(0, 12));
    last = own;
  });

  it("a signature counts only as checked at the write: an unsigned commit under a signed tip is refused whatever signer the attempt names", async () => {
    const unsigned = await pushCommit("unsigned");
    const signed = await pushCommit("signed", ada);
    const approval = { signature: { secretRef: { name: "release-keys" } } };
    await claimWith(approval, []);
    const claimed = attemptFor(signed, {
      approvals: [
        { commit: unsigned, sources: ["Signature"], signedBy: "SHA256:forged" },
        { commit: signed, sources: ["Signature"], signedBy: "SHA256:forged" },
      ],
    });
    const out = await judge(claimed);
    expect(out).toMatchObject({ ok: false, reason: StatusReason.NotApproved });
    expect((out as { message: string }).message).toContain(`${unsigned.slice(0, 12)} (Signature:`);
    expect((out as { message: string }).message).not.toContain(`${signed.slice(0, 12)} (Signature:`);

    // From the commit the claim last applied, only the signed one: it goes, until its key is removed.
    last = unsigned;
    await claimWith(approval, []);
    expect(await judge(attemptFor(signed))).toMatchObject({ ok: true });
    await kube.core.replaceNamespacedSecret({
      namespace: NS,
      name: "release-keys",
      body: { metadata: { name: "release-keys", namespace: NS }, stringData: { keys: "" } },
    });
    expect(await judge(attemptFor(signed))).toMatchObject({ ok: false, reason: StatusReason.NotApproved });
    last = signed;
  });

  it("a force-push back to an older signed commit is refused unless an Approval names it", async () => {
    await kube.core.replaceNamespacedSecret({
      namespace: NS,
      name: "release-keys",
      body: { metadata: { name: "release-keys", namespace: NS }, stringData: { keys: `${ada.publicKey}\n` } },
    });
    const older = await pushCommit("older", ada);
    const newer = await pushCommit("newer", ada);
    last = newer;
    const approval = { signature: { secretRef: { name: "release-keys" } } };
    await claimWith(approval, []);
    expect(await judge(attemptFor(newer))).toMatchObject({ ok: true });
    // The branch goes back to `older`, signed and once applied on the way to `newer`.
    const run = promisify(execFile);
    await run("git", ["reset", "-q", "--hard", older], { cwd: peer.dir });
    await run("git", ["push", "-q", "--force", "origin", "HEAD:refs/heads/main"], { cwd: peer.dir });
    const out = await judge(attemptFor(older));
    expect(out).toMatchObject({ ok: false, reason: StatusReason.NotApproved });
    expect((out as { message: string }).message).toContain(
      `${older.slice(0, 12)} (Manual: not a descendant of the last applied commit`,
    );
    await claimWith(approval, [older]);
    expect(await judge(attemptFor(older))).toMatchObject({ ok: true });
    last = older;
  });

  it("a commit that is not on the GitProvider's repository is refused: nothing proves what it would bring", async () => {
    await claimWith({ manual: true }, ["e".repeat(40)]);
    const out = await judge(attemptFor("e".repeat(40)));
    expect(out).toMatchObject({ ok: false, reason: StatusReason.NotApproved });
    expect((out as { message: string }).message).toContain("cannot be read at the write");
  });

  it("a claim requiring no approval is not read at all", async () => {
    await kube.mergePatch(RESOURCES.fluxClaim, NS, "web", { spec: { approval: null } });
    expect(
      await approvalRecheck({ kube, git })(
        attemptFor(last),
        (await kube.get<KObject>(RESOURCES.fluxClaim, NS, "web")) as KObject,
        [(await kube.get<KObject>(RESOURCES.gitTarget, NS, "one")) as KObject],
      ),
    ).toBeUndefined();
  });
});
