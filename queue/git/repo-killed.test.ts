/**
 * A worker killed while it writes an object to its clone (found by the soak: seed 5036 with 8
 * actions, a worker SIGKILL mid-publication). The next process, on the same clone, commits the
 * same content: the object must not be a truncated leftover it trusts, or every publication of
 * the branch fails from then on.
 */
import * as nodeFs from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { gitOk } from "../../test/git/cli.js";
import { type GitServer, startGitServer } from "../../test/git/server.js";
import { BareRepo, type GitFsPromises } from "./repo.js";

const sig = { name: "Ada", email: "ada@example.com", timestamp: 1_700_000_000 };

/** The file system of a process that dies halfway through its first write of a loose object. */
function diesMidWrite(): GitFsPromises {
  let died = false;
  return {
    ...nodeFs.promises,
    writeFile: (async (path: string, data: Uint8Array, options?: never) => {
      if (died || !/objects\/[0-9a-f]{2}\//.test(path)) return nodeFs.promises.writeFile(path, data, options);
      // A missing folder fails before anything is written (the caller makes it and writes again).
      await nodeFs.promises.writeFile(path, data.subarray(0, Math.floor(data.length / 2)), options);
      died = true;
      throw new Error("killed");
    }) as GitFsPromises["writeFile"],
  };
}

describe("a process killed while writing an object", () => {
  let server: GitServer;
  let dir: string;
  beforeEach(async () => {
    server = await startGitServer();
    dir = await mkdtemp(join(tmpdir(), "applygate-killed-"));
  });
  afterEach(async () => {
    await server.close();
    await rm(dir, { recursive: true, force: true });
  });

  it("leaves no truncated object: the next process commits the same content and pushes it", async () => {
    const url = await server.createRepo("r", { "apps/cm.yaml": "greeting: hello\n" });
    const gitdir = join(dir, "r.git");
    const change = [{ path: "apps/cm.yaml", content: "greeting: e3\n" }];
    const first = await BareRepo.open(gitdir, diesMidWrite());
    const { tip } = await first.fetchBranch({ url }, "main");
    await expect(first.commitChanges(tip, change, { message: "e3", author: sig })).rejects.toThrow("killed");

    const next = await BareRepo.open(gitdir);
    const written = await next.commitChanges(tip, change, { message: "e3", author: sig });
    expect(written).toBeDefined();
    await next.push({ url }, "main", tip, written!.commit, written!.newOids);
    expect(await server.tip("r")).toBe(written!.commit);
    await gitOk(["fsck", "--strict"], { cwd: join(server.root, "r.git") });
  });
});
