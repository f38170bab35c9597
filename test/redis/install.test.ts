import { chmod, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { freePort, RedisUnavailableError, resolveEmbeddedRedis } from "../../queue/redis.js";
import { ensureRedisServer, INSTALL_COMMAND, type MachineFacts, redisInstallPlan } from "./install.js";

describe("how a machine without redis-server gets one", () => {
  const cases: Array<[MachineFacts, "install" | "instruct", string[] | undefined]> = [
    [{ root: true, sudo: false, aptGet: true }, "install", []],
    [{ root: true, sudo: true, aptGet: true }, "install", []],
    [{ root: false, sudo: true, aptGet: true }, "install", ["sudo", "-n"]],
    [{ root: false, sudo: false, aptGet: true }, "instruct", undefined],
    [{ root: true, sudo: false, aptGet: false }, "instruct", undefined],
    [{ root: false, sudo: true, aptGet: false }, "instruct", undefined],
    [{ root: false, sudo: false, aptGet: false }, "instruct", undefined],
    [{ root: true, sudo: true, aptGet: false }, "instruct", undefined],
  ];
  it.each(cases)("%o → %s", (facts, kind, prefix) => {
    const plan = redisInstallPlan(facts);
    expect(plan.kind).toBe(kind);
    if (plan.kind === "install") {
      for (const c of plan.commands) expect(c.slice(0, prefix!.length)).toEqual(prefix);
      expect(plan.commands.at(-1)).toEqual([...prefix!, "apt-get", "install", "-y", "-q", "redis-server"]);
    } else {
      expect(plan.command).toEqual(facts.aptGet ? INSTALL_COMMAND : expect.stringContaining("REDIS_URL"));
    }
  });
});

describe("ensureRedisServer", () => {
  let dir: string | undefined;
  afterEach(async () => {
    if (dir) await rm(dir, { recursive: true, force: true });
    dir = undefined;
  });

  /** A PATH holding only a stand-in apt-get, which "installs" redis-server into the same folder. */
  async function machineWithoutRedis(aptSucceeds: boolean): Promise<NodeJS.ProcessEnv> {
    dir = await mkdtemp(join(tmpdir(), "applygate-noredis-"));
    const apt = aptSucceeds
      ? `#!/bin/sh\necho "$@" >> "${dir}/apt.log"\n[ "$1" = install ] && printf '#!/bin/sh\\n' > "${dir}/redis-server" && /bin/chmod +x "${dir}/redis-server"\nexit 0\n`
      : `#!/bin/sh\necho "$@" >> "${dir}/apt.log"\nexit 100\n`;
    await writeFile(join(dir, "apt-get"), apt);
    await chmod(join(dir, "apt-get"), 0o755);
    return { PATH: dir };
  }

  it("installs Debian's package and says so in one line when the machine allows it", async () => {
    const env = await machineWithoutRedis(true);
    const said: string[] = [];
    await ensureRedisServer("redis-server", (l) => said.push(l), env, {
      root: true,
      sudo: false,
      aptGet: true,
    });
    expect(said).toHaveLength(1);
    expect(said[0]).toMatch(/installing Debian's redis-server/);
  });

  it("names the one command when the install fails", async () => {
    const env = await machineWithoutRedis(false);
    await expect(
      ensureRedisServer("redis-server", () => {}, env, { root: true, sudo: false, aptGet: true }),
    ).rejects.toThrow(new RedisUnavailableError(`installing redis-server failed; run: ${INSTALL_COMMAND}`));
  });

  it("names the one command and installs nothing when it may not install", async () => {
    const env = await machineWithoutRedis(true);
    const said: string[] = [];
    await expect(
      ensureRedisServer("redis-server", (l) => said.push(l), env, { root: false, sudo: false, aptGet: true }),
    ).rejects.toThrow(INSTALL_COMMAND);
    expect(said).toEqual([]);
  });

  it("does nothing when redis-server is on PATH", async () => {
    const said: string[] = [];
    await ensureRedisServer("redis-server", (l) => said.push(l));
    expect(said).toEqual([]);
  });

  it("stops the embedded-default rule before any server is started", async () => {
    const unused = await freePort();
    await expect(
      resolveEmbeddedRedis(
        {},
        {
          localPort: unused,
          ensureServer: async () => {
            throw new RedisUnavailableError(`run: ${INSTALL_COMMAND}`);
          },
        },
      ),
    ).rejects.toThrow(INSTALL_COMMAND);
  });
});
