/**
 * The sidecar's ancestry clones against the real Git server: a proof after one fetch, a
 * descendant, unrelated commits, an unknown commit (one fetch, still unknown), the fetch deadline
 * on a stalled server, and credentials found through GitTarget → GitProvider → Secret.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as k8s from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { crdFiles } from "../queue/crds/files.js";
import { API_VERSION } from "../queue/crds/index.js";
import { Kube } from "../queue/kube/index.js";
import { type ApiServer, startApiServer } from "../test/cluster/apiserver/index.js";
import { gitOk } from "../test/git/cli.js";
import { GitPeer } from "../test/git/peer.js";
import { type GitServer, startGitServer } from "../test/git/server.js";
import { type AncestryRepo, GitAncestry, remoteFromCluster } from "./git-ancestry.js";

const dirs: string[] = [];
const cacheDir = async () => {
  const d = await mkdtemp(join(tmpdir(), "git-ancestry-"));
  dirs.push(d);
  return d;
};
afterAll(async () => {
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});

const claim = { kind: "ArgoCDClaim" as const, namespace: "argocd", name: "web" };

describe("GitAncestry against the Git server", () => {
  let server: GitServer;
  let url: string;
  /** main: c1 ← c2 ← c3 ← merge(c3, side), with side branching off c1. */
  let c1: string;
  let c2: string;
  let c3: string;
  let side: string;
  let merge: string;
  const q = (): AncestryRepo => ({ repoUrl: url, branch: "main", claim });
  const ancestry = async (deadlineMs = 10_000) =>
    new GitAncestry({
      cacheDir: await cacheDir(),
      remoteFor: async () => ({ url }),
      fetchDeadlineMs: deadlineMs,
    });

  beforeAll(async () => {
    server = await startGitServer();
    url = await server.createRepo("r", { "a.txt": "0" });
    const peer = await GitPeer.clone(url);
    try {
      c1 = await peer.commitAndPush("a.txt", "1", "one");
      c2 = await peer.commitAndPush("a.txt", "2", "two");
      c3 = await peer.commitAndPush("a.txt", "3", "three");
      await gitOk(["checkout", "-q", "-b", "side", c1], { cwd: peer.dir });
      await peer.writeFile("b.txt", "side");
      side = await peer.commit("side");
      await gitOk(["checkout", "-q", "main"], { cwd: peer.dir });
      await gitOk(["merge", "-q", "--no-edit", "side"], { cwd: peer.dir });
      merge = (await gitOk(["rev-parse", "HEAD"], { cwd: peer.dir })).trim();
      expect((await peer.push()).ok).toBe(true);
    } finally {
      await peer.remove();
    }
  });
  afterAll(async () => server?.close());

  it("proves an ancestor after fetching the branch once, then answers from the clone", async () => {
    const a = await ancestry();
    server.resetCounts();
    expect(await a.ask(q(), c1, c3)).toBe("ancestor");
    // Two ref reads on a repository read the first time: the one `info/refs` that learns the
    // host speaks protocol v2, then the `ls-refs` of the branch.
    expect(server.counts()).toMatchObject({ advertisement: 2, fetch: 1 });
    expect(await a.ask(q(), c1.slice(0, 10), c2)).toBe("ancestor");
    expect(server.counts()).toMatchObject({ advertisement: 2, fetch: 1 });
  });

  it("answers a descendant and unrelated commits not-ancestor", async () => {
    const a = await ancestry();
    expect(await a.ask(q(), c3, c1)).toBe("not-ancestor");
    expect(await a.ask(q(), side, c3)).toBe("not-ancestor");
    expect(await a.ask(q(), c3, side)).toBe("not-ancestor");
    expect(await a.ask(q(), side, merge)).toBe("ancestor");
    expect(await a.ask(q(), c3, c3)).toBe("not-ancestor");
  });

  it("leaves a commit unknown after one fetch, and makes one fetch per question", async () => {
    const a = await ancestry();
    expect(await a.ask(q(), c1, c2)).toBe("ancestor");
    server.resetCounts();
    expect(await a.ask(q(), "0123456789abcdef0123456789abcdef01234567", c3)).toBe("unknown");
    // The tip is already held: the advertisement is the whole fetch.
    expect(server.counts()).toMatchObject({ advertisement: 1, fetch: 0 });
    expect(await a.ask(q(), c1, "fedcba9876543210fedcba9876543210fedcba98")).toBe("unknown");
    expect(server.counts()).toMatchObject({ advertisement: 2, fetch: 0 });
  });

  it("fetches a commit pushed since the last fetch", async () => {
    const a = await ancestry();
    expect(await a.ask(q(), c1, c2)).toBe("ancestor");
    const peer = await GitPeer.clone(url);
    const newer = await peer.commitAndPush("a.txt", "4", "four");
    await peer.remove();
    expect(await a.ask(q(), merge, newer)).toBe("ancestor");
  });

  it("gives up a stalled server at the deadline: unknown, and the next question fetches again", async () => {
    const a = await ancestry(300);
    const stall = server.faults.stallNext(1, "advertisement");
    try {
      const started = Date.now();
      expect(await a.ask(q(), c1, c3)).toBe("unknown");
      expect(Date.now() - started).toBeGreaterThanOrEqual(290);
    } finally {
      stall.release();
    }
    expect(await a.ask(q(), c1, c3)).toBe("ancestor");
  });

  it("answers from the clone alone when no GitProvider is known", async () => {
    const a = new GitAncestry({ cacheDir: await cacheDir(), remoteFor: async () => undefined });
    server.resetCounts();
    expect(await a.ask(q(), c1, c3)).toBe("unknown");
    expect(server.counts()).toMatchObject({ advertisement: 0, fetch: 0 });
  });
});

describe("credentials through the claim's GitTarget and GitProvider", () => {
  let api: ApiServer;
  let server: GitServer;
  let kube: Kube;
  let url: string;
  let c1: string;
  let c2: string;
  beforeAll(async () => {
    api = await startApiServer();
    for (const f of crdFiles()) await api.installCrdFile(f);
    const kc = api.kubeConfig();
    await kc.makeApiClient(k8s.CoreV1Api).createNamespace({ body: { metadata: { name: "argocd" } } });
    kube = new Kube(kc);
    server = await startGitServer({ auth: { username: "bot", password: "s3cret" } });
    await server.createRepo("private", { "a.txt": "0" });
    url = server.repoUrl("private");
    const peer = await GitPeer.clone(server.repoUrl("private", true));
    try {
      c1 = await peer.commitAndPush("a.txt", "1", "one");
      c2 = await peer.commitAndPush("a.txt", "2", "two");
    } finally {
      await peer.remove();
    }
    const provider = (name: string, secret: string) => `
apiVersion: ${API_VERSION}
kind: GitProvider
metadata: {name: ${name}, namespace: argocd}
spec: {url: "${url}", type: gitea, webhookSecretRef: {name: hook}, credentialsSecretRef: {name: ${secret}}}`;
    const target = (name: string, providerName: string, claimName: string) => `
apiVersion: ${API_VERSION}
kind: GitTarget
metadata: {name: ${name}, namespace: argocd}
spec: {providerRef: {name: ${providerName}}, branch: main, path: apps/${name}, claimRef: {kind: ArgoCDClaim, name: ${claimName}}}`;
    await api.applyYaml(
      [
        provider("with-creds", "git-creds"),
        provider("missing-creds", "nowhere"),
        target("web", "with-creds", "web"),
        target("other", "missing-creds", "other"),
        `
apiVersion: v1
kind: Secret
metadata: {name: git-creds, namespace: argocd}
stringData: {username: bot, password: s3cret}`,
      ].join("\n---\n"),
    );
  });
  afterAll(async () => {
    await server?.close();
    await api?.close();
  });

  it("fetches with the basic-auth credentials of the GitProvider the claim's GitTarget names", async () => {
    // The test's Git server speaks plain http: credentials go over it only with the operator's flag.
    const remoteFor = remoteFromCluster(kube, undefined, { allowHttpCredentials: true });
    // The Application may spell the URL differently: the normalised URL is what matches.
    const repoUrl = `${url.replace(/\.git$/, "")}/`;
    const remote = await remoteFor({ repoUrl, branch: "main", claim });
    expect(remote).toEqual({
      url,
      auth: { username: "bot", password: "s3cret" },
      allowHttpCredentials: true,
    });
    const a = new GitAncestry({ cacheDir: await cacheDir(), remoteFor });
    expect(await a.ask({ repoUrl, branch: "main", claim }, c1, c2)).toBe("ancestor");
  });

  it("without the operator's flag, credentials are not sent over plain http: fetched anonymously, left unknown", async () => {
    const remoteFor = remoteFromCluster(kube);
    const repoUrl = `${url.replace(/\.git$/, "")}/`;
    expect(await remoteFor({ repoUrl, branch: "main", claim })).toEqual({ url });
    const before = server.counts().fetch;
    const a = new GitAncestry({ cacheDir: await cacheDir(), remoteFor });
    expect(await a.ask({ repoUrl, branch: "main", claim }, c1, c2)).toBe("unknown");
    expect(server.counts().fetch).toBe(before);
  });

  it("fetches anonymously when the Secret cannot be read, and the private repository leaves it unknown", async () => {
    const remoteFor = remoteFromCluster(kube);
    const other = { repoUrl: url, branch: "main", claim: { ...claim, name: "other" } };
    expect(await remoteFor(other)).toEqual({ url });
    const a = new GitAncestry({ cacheDir: await cacheDir(), remoteFor });
    expect(await a.ask(other, c1, c2)).toBe("unknown");
  });

  it("finds no remote for another branch, another repository or another claim", async () => {
    const remoteFor = remoteFromCluster(kube);
    expect(await remoteFor({ repoUrl: url, branch: "dev", claim })).toBeUndefined();
    expect(await remoteFor({ repoUrl: "https://git.example/else", branch: "main", claim })).toBeUndefined();
    expect(await remoteFor({ repoUrl: url, branch: "main", claim: { ...claim, name: "x" } })).toBeUndefined();
  });
});
