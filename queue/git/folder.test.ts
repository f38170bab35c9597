/** `BareRepo.hasFolder`: what the barrier reads in a tip's tree, against a real Git server. */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { type GitServer, startGitServer } from "../../test/git/server.js";
import { BareRepo } from "./repo.js";

describe("BareRepo.hasFolder", () => {
  let server: GitServer;
  let dir: string;
  beforeEach(async () => {
    server = await startGitServer();
    dir = await mkdtemp(join(tmpdir(), "applygate-folder-"));
  });
  afterEach(async () => {
    await server.close();
    await rm(dir, { recursive: true, force: true });
  });

  it("finds a folder only where the tip's tree holds one, never a file or a missing path", async () => {
    const url = await server.createRepo("r", {
      "clusters/dev/app.yaml": "a: 1\n",
      "clusters/prod": "a file\n",
    });
    const repo = await BareRepo.open(join(dir, "r.git"));
    const { tip } = await repo.fetchBranch({ url }, "main");
    const at = (path: string) => repo.hasFolder(tip as string, path);
    expect(await at("clusters/dev")).toBe(true);
    expect(await at("clusters")).toBe(true);
    expect(await at("/clusters/dev/")).toBe(true);
    expect(await at(".")).toBe(true);
    expect(await at("clusters/prod")).toBe(false);
    expect(await at("clusters/dev/app.yaml")).toBe(false);
    expect(await at("clusters/staging")).toBe(false);
    expect(await at("other/dev")).toBe(false);
  });
});
