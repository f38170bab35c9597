import { spawnSync } from "node:child_process";
import { RedisUnavailableError } from "../../queue/redis.js";

/**
 * Getting a `redis-server` onto a machine that has none, for the two README commands (`npm start`,
 * `npm test`) and the benches: Debian's package when this process may install packages, else the
 * one command that installs it. The product never does this; it only runs on developer machines.
 */

export interface MachineFacts {
  /** Whether this process runs as root. */
  root: boolean;
  /** Whether `sudo -n` works without asking for a password. */
  sudo: boolean;
  /** Whether apt-get is on PATH (a Debian-like machine). */
  aptGet: boolean;
}

export type InstallPlan = { kind: "install"; commands: string[][] } | { kind: "instruct"; command: string };

/** The one command that installs redis-server, as a user would type it. */
export const INSTALL_COMMAND = "sudo apt-get update && sudo apt-get install -y redis-server";

/** Decides how redis-server can be had: installed here and now, or only by the user. */
export function redisInstallPlan(facts: MachineFacts): InstallPlan {
  if (!facts.aptGet || (!facts.root && !facts.sudo)) {
    return {
      kind: "instruct",
      command: facts.aptGet
        ? INSTALL_COMMAND
        : "install redis-server with your package manager, or set REDIS_URL",
    };
  }
  const as = facts.root ? [] : ["sudo", "-n"];
  // An install from the package lists at hand first; a machine whose lists are stale or absent
  // needs an update before the package is found.
  return {
    kind: "install",
    commands: [
      [...as, "apt-get", "install", "-y", "-q", "redis-server"],
      [...as, "apt-get", "update", "-q"],
      [...as, "apt-get", "install", "-y", "-q", "redis-server"],
    ],
  };
}

type Env = NodeJS.ProcessEnv;

function onPath(command: string, env: Env): boolean {
  return (
    spawnSync("/bin/sh", ["-c", 'command -v "$1"', "sh", command], { stdio: "ignore", env }).status === 0
  );
}

function succeeds(argv: string[], env: Env): boolean {
  const [cmd, ...args] = argv as [string, ...string[]];
  return (
    spawnSync(cmd, args, { stdio: "ignore", env: { ...env, DEBIAN_FRONTEND: "noninteractive" } }).status === 0
  );
}

function machineFacts(env: Env): MachineFacts {
  return {
    root: process.getuid?.() === 0,
    sudo: onPath("sudo", env) && succeeds(["sudo", "-n", "true"], env),
    aptGet: onPath("apt-get", env),
  };
}

/**
 * Makes sure `command` (redis-server) can be run: nothing when it is on PATH; else installs
 * Debian's package, saying so in one line, or throws naming the one command that installs it.
 */
export async function ensureRedisServer(
  command: string,
  say: (line: string) => void = (line) => process.stderr.write(`${line}\n`),
  env: Env = process.env,
  facts: MachineFacts = machineFacts(env),
): Promise<void> {
  if (onPath(command, env)) return;
  // A command given by path or under another name is the caller's choice; only the usual one is
  // installed.
  if (command !== "redis-server") {
    throw new RedisUnavailableError(`no Redis: ${command} is not installed; set REDIS_URL or install it`);
  }
  const plan = redisInstallPlan(facts);
  if (plan.kind === "instruct") {
    throw new RedisUnavailableError(
      `no Redis answers and redis-server is not installed; run: ${plan.command}`,
    );
  }
  say("no Redis answers and redis-server is not installed: installing Debian's redis-server (apt-get)");
  const [first, ...rest] = plan.commands as [string[], ...string[][]];
  if ((succeeds(first, env) || rest.every((c) => succeeds(c, env))) && onPath(command, env)) return;
  throw new RedisUnavailableError(`installing redis-server failed; run: ${INSTALL_COMMAND}`);
}
