import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { gitOk } from "../../test/git/cli.js";
import { GitPeer } from "../../test/git/peer.js";
import { type GitServer, startGitServer } from "../../test/git/server.js";
import { BareRepo } from "./repo.js";
import { GitRemoteError, PushRejectedError } from "./smart-http.js";

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
});
