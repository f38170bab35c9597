import { chmod, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { gitOk } from "../../test/git/cli.js";
import { GitPeer } from "../../test/git/peer.js";
import { type GitServer, startGitServer } from "../../test/git/server.js";
import { untilWith } from "../../test/support/wait.js";
import { errorMessage } from "../errors.js";
import { BareRepo } from "./repo.js";
import { GitRemoteError, isContention, PushRejectedError } from "./smart-http.js";

const until = untilWith({ timeoutMs: 10_000, everyMs: 10 });

const sig = { name: "Ada", email: "ada@example.com", timestamp: 1_700_000_000 };

describe("BareRepo against a real Git server", () => {
  let server: GitServer;
  let dir: string;
  beforeEach(async () => {
    server = await startGitServer();
    dir = await mkdtemp(join(tmpdir(), "applygate-repo-"));
  });
  afterEach(async () => {
    await server.close();
    await rm(dir, { recursive: true, force: true });
  });

  it("fetches, commits a tree-only change and pushes just the new objects", async () => {
    const files: Record<string, string> = {};
    for (let i = 0; i < 200; i++) files[`apps/f${i}.yaml`] = `n: ${i}\n`;
    const url = await server.createRepo("r", files);
    const repo = await BareRepo.open(join(dir, "r.git"));
    const { tip, downloaded } = await repo.fetchBranch({ url }, "main");
    expect(downloaded).toBe(true);
    const written = await repo.commitChanges(
      tip,
      [
        { path: "apps/f1.yaml", content: "n: one\n" },
        { path: "apps/f2.yaml", content: null },
        { path: "new/deep/x.yaml", content: "x: 1\n" },
      ],
      { message: "edit", author: sig },
    );
    expect(written).toBeDefined();
    // blob f1, apps tree, blob x, deep tree, new tree, root tree, commit
    expect(written?.newOids.length).toBe(7);
    await repo.push({ url }, "main", tip, written!.commit, written!.newOids);
    expect(await server.tip("r")).toBe(written!.commit);
    const peer = await GitPeer.clone(url);
    expect(await peer.readFile("apps/f1.yaml")).toBe("n: one\n");
    expect(await peer.readFile("new/deep/x.yaml")).toBe("x: 1\n");
    await expect(peer.readFile("apps/f2.yaml")).rejects.toThrow();
    await gitOk(["fsck", "--strict"], { cwd: join(server.root, "r.git") });
    await peer.remove();
  });

  it("lists the server's tags (annotated peeled to their commit, lightweight as is) and downloads only the tag objects it lacks", async () => {
    const url = await server.createRepo("r", { "a.txt": "a\n" });
    const bare = join(server.root, "r.git");
    const repo = await BareRepo.open(join(dir, "r.git"));
    const { tip } = await repo.fetchBranch({ url }, "main");
    await gitOk(["tag", "-a", "-m", "release 1", "v1", "main"], { cwd: bare });
    await gitOk(["tag", "light", "main"], { cwd: bare });
    const tags = await repo.remoteTags({ url });
    const v1 = (await gitOk(["rev-parse", "refs/tags/v1"], { cwd: bare })).trim();
    expect(tags.sort((a, b) => (a.name < b.name ? -1 : 1))).toEqual([
      { name: "light", object: tip, commit: tip, annotated: false },
      { name: "v1", object: v1, commit: tip, annotated: true },
    ]);
    expect(await repo.hasObject(v1)).toBe(false);
    const before = server.counts().fetch;
    await repo.fetchObjects({ url }, [v1], [tip as string]);
    expect(server.counts().fetch).toBe(before + 1);
    const raw = Buffer.from(await repo.readRawTag(v1)).toString("utf8");
    expect(raw).toContain(`object ${tip}\ntype commit\ntag v1\n`);
    await repo.fetchObjects({ url }, [v1], [tip as string]);
    expect(server.counts().fetch).toBe(before + 1);
    await expect(repo.readRawTag(tip as string)).rejects.toThrow(/not a tag/);
  });

  it("branches of one repository at one tip fetched at once into one clone all get it", async () => {
    const files: Record<string, string> = {};
    for (let i = 0; i < 50; i++) files[`apps/f${i}.yaml`] = `n: ${i}\n`;
    const url = await server.createRepo("r", files);
    const bare = join(server.root, "r.git");
    const main = (await server.tip("r")) as string;
    const branches = Array.from({ length: 12 }, (_, i) => `b${i}`);
    for (const b of branches) await gitOk(["update-ref", `refs/heads/${b}`, main], { cwd: bare });
    const repo = await BareRepo.open(join(dir, "r.git"));
    // A worker replica takes every branch at once: each baseline reads the same objects.
    const fetched = await Promise.all(branches.map((b) => repo.fetchBranch({ url }, b)));
    expect(fetched.map((f) => f.tip)).toEqual(branches.map(() => main));
    expect(fetched.filter((f) => f.downloaded).length).toBe(1);
    expect(await repo.readFile(main, "apps/f7.yaml")).toEqual(Buffer.from("n: 7\n"));
  });

  it("makes no commit for a change that leaves the tree as it was", async () => {
    const url = await server.createRepo("r", { "a.yaml": "a: 1\n" });
    const repo = await BareRepo.open(join(dir, "r.git"));
    const { tip } = await repo.fetchBranch({ url }, "main");
    expect(
      await repo.commitChanges(tip, [{ path: "a.yaml", content: "a: 1\n" }], { message: "m", author: sig }),
    ).toBeUndefined();
    expect(
      await repo.commitChanges(tip, [{ path: "b.yaml", content: null }], { message: "m", author: sig }),
    ).toBeUndefined();
  });

  it("refuses to overwrite a commit somebody else pushed (compare-and-swap)", async () => {
    const url = await server.createRepo("r", { "a.yaml": "a: 1\n" });
    const repo = await BareRepo.open(join(dir, "r.git"));
    const { tip } = await repo.fetchBranch({ url }, "main");
    const peer = await GitPeer.clone(url);
    const theirs = await peer.commitAndPush("b.yaml", "b: 1\n", "theirs");
    const ours = await repo.commitChanges(tip, [{ path: "c.yaml", content: "c: 1\n" }], {
      message: "ours",
      author: sig,
    });
    const err = await repo.push({ url }, "main", tip, ours!.commit, ours!.newOids).catch((e) => e);
    expect(err).toBeInstanceOf(PushRejectedError);
    expect(await server.tip("r")).toBe(theirs);
    // After a fetch, only their objects are downloaded and our replay lands on top.
    const again = await repo.fetchBranch({ url }, "main", [tip!]);
    expect(again).toEqual({ tip: theirs, downloaded: true });
    const replay = await repo.commitChanges(theirs, [{ path: "c.yaml", content: "c: 1\n" }], {
      message: "ours",
      author: sig,
    });
    await repo.push({ url }, "main", theirs, replay!.commit, replay!.newOids);
    expect((await peer.log()).map((l) => l.split(" ")[1])).toEqual(["ours", "theirs", "initial"]);
    await peer.remove();
  });

  it("creates a branch that does not exist yet, and reports an unreachable server", async () => {
    const url = await server.createRepo("r");
    const repo = await BareRepo.open(join(dir, "r.git"));
    expect((await repo.fetchBranch({ url }, "main")).tip).toBeUndefined();
    const first = await repo.commitChanges(undefined, [{ path: "a.yaml", content: "a\n" }], {
      message: "first",
      author: sig,
    });
    await repo.push({ url }, "main", undefined, first!.commit, first!.newOids);
    expect(await server.tip("r")).toBe(first!.commit);
    server.faults.setDown(true);
    const err = await repo.fetchBranch({ url }, "main").catch((e) => e);
    expect(err).toBeInstanceOf(GitRemoteError);
    expect((err as GitRemoteError).kind).toBe("server");
  });

  it("a hook's refusal and an authentication failure are failures, never contention to retry", async () => {
    const url = await server.createRepo("r", { "a.yaml": "a\n" });
    const repo = await BareRepo.open(join(dir, "r.git"));
    const { tip } = await repo.fetchBranch({ url }, "main");
    const c = await repo.commitChanges(tip, [{ path: "b.yaml", content: "b\n" }], {
      message: "b",
      author: sig,
    });
    const hook = join(server.root, "r.git", "hooks", "pre-receive");
    await writeFile(hook, "#!/bin/sh\necho 'protected branch: pushes need review' >&2\nexit 1\n");
    await chmod(hook, 0o755);
    const refused = await repo.push({ url }, "main", tip, c!.commit, c!.newOids).catch((e) => e);
    expect(refused).not.toBeInstanceOf(PushRejectedError);
    expect(refused).toBeInstanceOf(GitRemoteError);
    expect((refused as GitRemoteError).kind).toBe("refused");
    expect(await server.tip("r")).toBe(tip);
    await rm(hook);

    const guarded = await startGitServer({ auth: { username: "bot", password: "right" } });
    try {
      const gurl = await guarded.createRepo("r", { "a.yaml": "a\n" });
      const denied = await repo
        .push(
          { url: gurl, auth: { username: "bot", password: "wrong" }, allowHttpCredentials: true },
          "main",
          tip,
          c!.commit,
          c!.newOids,
        )
        .catch((e) => e);
      expect(denied).not.toBeInstanceOf(PushRejectedError);
      expect((denied as GitRemoteError).kind).toBe("auth");
    } finally {
      await guarded.close();
    }
  });
});

describe("every Git call has its deadline", () => {
  let server: GitServer;
  let dir: string;
  beforeEach(async () => {
    server = await startGitServer();
    dir = await mkdtemp(join(tmpdir(), "applygate-repo-"));
  });
  afterEach(async () => {
    await server.close();
    await rm(dir, { recursive: true, force: true });
  });

  const timedOut = async (what: Promise<unknown>, path: RegExp) => {
    const err = await what.catch((e) => e);
    expect(err).toBeInstanceOf(GitRemoteError);
    expect((err as GitRemoteError).kind).toBe("timeout");
    expect(errorMessage(err)).toMatch(path);
    return err as GitRemoteError;
  };

  it("the advertisement, the first download, the tip probe and the push each end at their deadline against a stalled remote", async () => {
    const url = await server.createRepo("r", { "a.yaml": "a\n" });
    // Short enough for a test, long enough that a call answering on a busy machine makes it.
    const remote = { url, timeoutMs: 1000 };
    const repo = await BareRepo.open(join(dir, "r.git"));
    server.faults.stallNext(1, "advertisement");
    await timedOut(repo.fetchBranch(remote, "main"), /^no answer from .*info\/refs.* within 1000 ms$/);
    // The clone's first download (upload-pack), after an advertisement that answered.
    server.faults.stallNext(1, "fetch");
    await timedOut(repo.fetchBranch(remote, "main"), /git-upload-pack within 1000 ms$/);
    // The tip probe: once the host is known to speak protocol v2, one ls-refs upload-pack post.
    server.faults.stallNext(1, "advertisement");
    await timedOut(repo.remoteTip(remote, "main"), /git-upload-pack within 1000 ms$/);
    const { tip } = await repo.fetchBranch({ url }, "main");
    const c = await repo.commitChanges(tip, [{ path: "b.yaml", content: "b\n" }], {
      message: "b",
      author: sig,
    });
    server.faults.stallNext(1, "push");
    await timedOut(repo.push(remote, "main", tip, c!.commit, c!.newOids), /git-receive-pack within 1000 ms$/);
  });

  it("a call under way ends when its caller's signal aborts, naming the caller's reason", async () => {
    const url = await server.createRepo("r", { "a.yaml": "a\n" });
    const repo = await BareRepo.open(join(dir, "r.git"));
    const cycle = new AbortController();
    server.faults.stallNext(1, "advertisement");
    const pending = repo.fetchBranch({ url, timeoutMs: 60_000, signal: cycle.signal }, "main");
    await until(() => server.counts().advertisement === 1, "the call reached the server");
    cycle.abort(new Error("the cycle passed its deadline"));
    await timedOut(pending, /abandoned: the cycle passed its deadline$/);
    // Once aborted, no further call is even made.
    await timedOut(repo.remoteTip({ url, signal: cycle.signal }, "main"), /not called: the cycle/);
    expect(server.counts().advertisement).toBe(1);
  });
});

describe("isContention: only a moved branch or its ref lock is retried as contention", () => {
  it("classifies the receive-pack reasons", () => {
    for (const reason of [
      "failed to update ref",
      "cannot lock ref 'refs/heads/main': is at 1234abcd but expected 5678ef90",
      "non-fast-forward",
      "fetch first",
      "stale info",
    ])
      expect(isContention(reason), reason).toBe(true);
    for (const reason of [
      "pre-receive hook declined",
      "hook declined",
      "protected branch hook declined",
      "deny updating a hidden ref",
      "Authentication failed",
      "permission denied",
      "funny refname",
    ])
      expect(isContention(reason), reason).toBe(false);
  });
});
