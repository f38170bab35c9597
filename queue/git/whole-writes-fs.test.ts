import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import git from "isomorphic-git";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { wholeWritesFs } from "./repo.js";

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "whole-writes-"));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe("the clone's file system", () => {
  it("answers isomorphic-git's no-path readFile question with a promise, not a thrown TypeError", async () => {
    const { promises } = wholeWritesFs();
    const read = promises.readFile as unknown as () => Promise<unknown>;
    await expect(read()).resolves.toBeUndefined();
  });

  it("reads, refuses a missing file, and writes whole files as node's does", async () => {
    const { promises } = wholeWritesFs();
    await writeFile(join(dir, "a"), "hello");
    expect(await promises.readFile(join(dir, "a"), "utf8")).toBe("hello");
    await expect(promises.readFile(join(dir, "missing"))).rejects.toMatchObject({ code: "ENOENT" });
    await promises.writeFile(join(dir, "b"), "whole");
    expect(await promises.readFile(join(dir, "b"), "utf8")).toBe("whole");
  });

  it("serves isomorphic-git: a ref written is read back", async () => {
    const fs = wholeWritesFs();
    await git.init({ fs, gitdir: dir, bare: true, defaultBranch: "main" });
    await git.writeRef({ fs, gitdir: dir, ref: "refs/heads/x", value: "a".repeat(40), force: true });
    expect(await git.resolveRef({ fs, gitdir: dir, ref: "refs/heads/x" })).toBe("a".repeat(40));
  });
});
