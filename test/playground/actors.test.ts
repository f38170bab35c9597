/**
 * The Git reads the playground's waits poll: while the branch does not move they start no git
 * process (a wait polls every 25 ms, several at once, in the process that runs the worker), and
 * they follow the branch when it moves.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { gitOk, gitSpawns } from "../git/cli.js";
import { gitValue, holds } from "./actors.js";
import type { Assembly } from "./assembly.js";
import { DEMO_BRANCH, DEMO_REPO, demoConfigPath } from "./demo.js";

const dirs: string[] = [];
afterEach(async () => {
  for (const d of dirs.splice(0)) await rm(d, { recursive: true, force: true });
});

/** A bare demo repository and a work tree that pushes to it, as the Git server holds it. */
async function demoRepo() {
  const root = await mkdtemp(join(tmpdir(), "actors-"));
  dirs.push(root);
  const bare = join(root, `${DEMO_REPO}.git`);
  const work = join(root, "work");
  await gitOk(["init", "-q", "--bare", "-b", DEMO_BRANCH, bare]);
  await gitOk(["init", "-q", "-b", DEMO_BRANCH, work]);
  const commit = async (greeting: string) => {
    const path = demoConfigPath("flux");
    await gitOk(["-C", work, "checkout", "-q", "-B", DEMO_BRANCH]);
    const { mkdir, writeFile } = await import("node:fs/promises");
    await mkdir(join(work, path, ".."), { recursive: true });
    await writeFile(join(work, path), `data:\n  greeting: ${greeting}\n`);
    await gitOk(["-C", work, "add", "-A"]);
    await gitOk(["-C", work, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", greeting]);
    await gitOk(["-C", work, "push", "-q", bare, `HEAD:refs/heads/${DEMO_BRANCH}`]);
    return (await gitOk(["-C", work, "rev-parse", "HEAD"])).trim();
  };
  const a = {
    git: {
      root,
      tip: async () => (await gitOk(["--git-dir", bare, "rev-parse", DEMO_BRANCH])).trim(),
    },
    demo: { branch: DEMO_BRANCH },
  } as unknown as Assembly;
  return { a, commit };
}

describe("the Git reads waits poll", () => {
  it("start no git process while the branch stays, and follow it when it moves", async () => {
    const { a, commit } = await demoRepo();
    const first = await commit("blue");
    expect(await gitValue(a, "flux")).toBe("blue");
    const before = gitSpawns.n;
    for (let i = 0; i < 40; i++) expect(await gitValue(a, "flux")).toBe("blue");
    expect(gitSpawns.n - before).toBe(0);

    const second = await commit("green");
    expect(await gitValue(a, "flux")).toBe("green");

    expect(await holds(a, first, second)).toBe(false);
    expect(await holds(a, second, first)).toBe(true);
    const asked = gitSpawns.n;
    for (let i = 0; i < 40; i++) {
      expect(await holds(a, first, second)).toBe(false);
      expect(await holds(a, second, first)).toBe(true);
    }
    expect(gitSpawns.n - asked).toBe(0);
  });

  it("asks again about a commit the repository does not hold yet", async () => {
    const { a, commit } = await demoRepo();
    const first = await commit("blue");
    const later = "0123456789abcdef0123456789abcdef01234567";
    expect(await holds(a, later, first)).toBe(false);
    const asked = gitSpawns.n;
    expect(await holds(a, later, first)).toBe(false);
    expect(gitSpawns.n - asked).toBe(1);
  });
});
