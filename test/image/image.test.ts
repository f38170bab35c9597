/**
 * The container image (manifests/Containerfile), built offline and run as a cluster runs it: as its
 * numeric user, with a read-only root filesystem and an emptyDir-like /tmp, node as PID 1.
 *
 * Offline: the Containerfile's base image is replaced by a stand-in made here from Debian packages
 * (mmdebstrap) plus this machine's own node and npm, tagged with the exact name the Containerfile's
 * FROM uses, and the build runs with --pull=never; npm inside the build reads packages only from a
 * cache filled beforehand from the lock file. buildah runs with the vfs storage driver and chroot
 * isolation (no daemon, no overlayfs). The image is run by mounting it (buildah mount) and starting
 * its entrypoint in a private mount and PID namespace (unshare + chroot).
 *
 * The stand-in, the npm cache and buildah's storage live in one fixed folder that nothing else uses
 * (~/.cache/applygate/image-test), so the stand-in's borrowed name never shadows a real image and
 * later runs reuse it: the stand-in is rebuilt when its recipe, node or npm changes.
 */
import { type ChildProcess, execFile, spawn, spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { homedir, tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parse } from "yaml";
import { type IsolatedRedis, isolatedRedis } from "../redis/isolated.js";
import { fixtureYaml } from "../support/gateway.js";
import { processAlive } from "../support/machine-lock.js";
import { until } from "../support/wait.js";

const REPO_ROOT = join(import.meta.dirname, "../..");
const CONTAINERFILE = join(REPO_ROOT, "manifests/Containerfile");
const CACHE = join(process.env.XDG_CACHE_HOME ?? join(homedir(), ".cache"), "applygate", "image-test");
const STORE = ["--root", join(CACHE, "storage"), "--runroot", join(CACHE, "run"), "--storage-driver", "vfs"];
const BUILD_TIMEOUT_MS = 30 * 60_000;
const run = promisify(execFile);

/** The one reason this machine cannot build and run the image, or undefined when it can. */
function cannotRun(): string | undefined {
  if (process.platform !== "linux") return `buildah needs Linux, this is ${process.platform}`;
  if (process.getuid?.() !== 0)
    return "it needs root (buildah with vfs and chroot isolation, mount, unshare)";
  for (const tool of ["buildah", "mmdebstrap", "unshare", "chroot"]) {
    if (spawnSync("sh", ["-c", `command -v ${tool}`]).status !== 0)
      return `${tool} is not installed (apt-get install buildah mmdebstrap)`;
  }
  const ns = spawnSync("unshare", ["--mount", "--pid", "--fork", "sh", "-c", "mount -t tmpfs tmpfs /mnt"], {
    encoding: "utf8",
  });
  if (ns.status !== 0) return `this machine does not allow mount and PID namespaces: ${ns.stderr.trim()}`;
  return undefined;
}

const skipped = cannotRun();
if (skipped)
  console.warn(`\n!!!!! SKIPPED test/image (the container image is NOT tested): ${skipped} !!!!!\n`);

const buildah = async (...args: string[]) =>
  (await run("buildah", [...STORE, ...args], { maxBuffer: 64 << 20 })).stdout.trim();

/** The one external base the Containerfile builds on, as its FROM lines name it (ARG defaults resolved). */
function baseImageOf(containerfile: string): string {
  const args = new Map<string, string>();
  const stages = new Set<string>();
  const bases = new Set<string>();
  for (const line of containerfile.split("\n").map((l) => l.trim())) {
    const arg = /^ARG\s+(\w+)=(\S+)$/i.exec(line);
    if (arg) args.set(arg[1]!, arg[2]!);
    const from = /^FROM\s+(\S+)(?:\s+AS\s+(\S+))?$/i.exec(line);
    if (!from) continue;
    const image = from[1]!.replace(/\$\{(\w+)\}|\$(\w+)/g, (_, a, b) => args.get(a ?? b) ?? "");
    if (!stages.has(image)) bases.add(image);
    if (from[2]) stages.add(from[2]);
  }
  if (bases.size !== 1) throw new Error(`expected one base image in the Containerfile, found ${[...bases]}`);
  return [...bases][0]!;
}

// The stand-in's recipe: Debian bookworm (the base's tag says bookworm), the minimal variant, without
// documentation and translations, as Debian's slim images are.
const SUITE = "bookworm";
const MMDEBSTRAP_ARGS = [
  "--variant=minbase",
  "--mode=root",
  "--format=tar",
  "--dpkgopt=path-exclude=/usr/share/man/*",
  "--dpkgopt=path-exclude=/usr/share/locale/*",
  "--dpkgopt=path-exclude=/usr/share/info/*",
  "--dpkgopt=path-exclude=/usr/share/doc/*",
  "--dpkgopt=path-include=/usr/share/doc/*/copyright",
];
const LABEL = "dev.applygate.test.stand-in";

/** Makes (or keeps) the stand-in for `name`: Debian from mmdebstrap, node and npm where the node image has them. */
async function ensureStandIn(name: string): Promise<"kept" | "built"> {
  const npmDir = join((await run("npm", ["root", "-g"])).stdout.trim(), "npm");
  const npmVersion = JSON.parse(readFileSync(join(npmDir, "package.json"), "utf8")).version as string;
  const key = createHash("sha256")
    .update(JSON.stringify([SUITE, MMDEBSTRAP_ARGS, process.version, npmVersion, name]))
    .digest("hex")
    .slice(0, 16);
  const existing = await buildah("inspect", "--type", "image", name).catch(() => undefined);
  if (existing && JSON.parse(existing).OCIv1?.config?.Labels?.[LABEL] === key) return "kept";
  if (existing) await buildah("rmi", "--force", name);

  const work = mkdtempSync(join(tmpdir(), "applygate-stand-in-"));
  try {
    const rootfs = join(work, "rootfs.tar");
    await run("mmdebstrap", [...MMDEBSTRAP_ARGS, SUITE, rootfs, "http://deb.debian.org/debian"], {
      maxBuffer: 64 << 20,
    });
    const c = await buildah("from", "scratch");
    try {
      await buildah("add", c, rootfs, "/");
      await buildah("copy", c, process.execPath, "/usr/local/bin/node");
      await buildah("copy", c, npmDir, "/usr/local/lib/node_modules/npm");
      await buildah(
        "run",
        "--isolation",
        "chroot",
        c,
        "--",
        "sh",
        "-c",
        "ln -s ../lib/node_modules/npm/bin/npm-cli.js /usr/local/bin/npm && " +
          "ln -s ../lib/node_modules/npm/bin/npx-cli.js /usr/local/bin/npx && node --version && npm --version",
      );
      await buildah(
        "config",
        "--env",
        "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "--cmd",
        "node",
        "--label",
        `${LABEL}=${key}`,
        c,
      );
      await buildah("commit", c, name);
    } finally {
      await buildah("rm", c).catch(() => undefined);
    }
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
  return "built";
}

/**
 * An npm cache holding every package the lock file names, so `npm ci` in the build needs no network.
 * Seeded from this machine's own npm cache, filled by an `npm ci` here once per lock file.
 */
function ensureNpmCache(): { dir: string; npmrc: string; filled: boolean } {
  const dir = join(CACHE, "npm-cache");
  const lock = readFileSync(join(REPO_ROOT, "package-lock.json"));
  const marker = join(dir, `.filled-${createHash("sha256").update(lock).digest("hex").slice(0, 16)}`);
  const npmrc = join(CACHE, "npmrc");
  writeFileSync(npmrc, "offline=true\ncache=/npm-cache\n");
  if (existsSync(marker)) return { dir, npmrc, filled: false };
  const own = join(homedir(), ".npm", "_cacache");
  if (!existsSync(join(dir, "_cacache")) && existsSync(own))
    cpSync(own, join(dir, "_cacache"), { recursive: true });
  const work = mkdtempSync(join(tmpdir(), "applygate-npm-fill-"));
  try {
    cpSync(join(REPO_ROOT, "package.json"), join(work, "package.json"));
    writeFileSync(join(work, "package-lock.json"), lock);
    const r = spawnSync(
      "npm",
      ["ci", "--prefer-offline", "--ignore-scripts", "--no-audit", "--no-fund", "--cache", dir],
      { cwd: work, encoding: "utf8" },
    );
    if (r.status !== 0) throw new Error(`filling the npm cache failed:\n${r.stdout}\n${r.stderr}`);
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
  for (const old of readdirSync(dir).filter((f) => f.startsWith(".filled-"))) rmSync(join(dir, old));
  writeFileSync(marker, "");
  return { dir, npmrc, filled: true };
}

/**
 * Removes what an earlier run that was killed left in the test's storage: its image (tagged with
 * that run's pid) and the containers made from it. Dangling images (a build cut short) go too, but
 * only when no other run is alive, as a build under way keeps its stages untagged.
 */
async function removeLeftovers(): Promise<void> {
  const tags = (await buildah("images", "--format", "{{.Name}}:{{.Tag}}")).split("\n");
  let othersAlive = false;
  for (const tag of tags) {
    const pid = /^localhost\/applygate:test-(\d+)$/.exec(tag)?.[1];
    if (!pid || Number(pid) === process.pid) continue;
    if (processAlive(Number(pid))) othersAlive = true;
    else await buildah("rmi", "--force", tag);
  }
  if (!othersAlive) await buildah("rmi", "--prune").catch(() => undefined);
}

interface ImageConfig {
  User?: string;
  Env?: string[];
  Entrypoint?: string[];
  Cmd?: string[];
  WorkingDir?: string;
}

/** A process started from the image as a kubelet would: its user, env, workdir and entrypoint. */
interface InImage {
  child: ChildProcess;
  output(): string;
  exited: Promise<number | null>;
  /** The host's pid of the entrypoint process (PID 1 in its namespace). */
  pid(): number;
}

const SETUP = `set -e
M="$1"; R="$2"; FILES="$3"; USERSPEC="$4"; shift 4
mount --bind "$M" "$R"
mount -o remount,bind,ro "$R"
mount -t tmpfs -o mode=1777,size=64m tmpfs "$R/tmp"
if [ -n "$FILES" ]; then cp -R "$FILES/." "$R/tmp/"; fi
mount -t proc proc "$R/proc"
mount --rbind /dev "$R/dev"
exec chroot --userspec="$USERSPEC" "$R" "$@"`;

function startInImage(
  rootfs: string,
  config: ImageConfig,
  args: string[],
  opts: { env?: Record<string, string>; files?: string; entrypoint?: string[] } = {},
): InImage {
  const mountpoint = mkdtempSync(join(tmpdir(), "applygate-image-root-"));
  const env = [...(config.Env ?? []), ...Object.entries(opts.env ?? {}).map(([k, v]) => `${k}=${v}`)];
  const command = [
    "/usr/bin/env",
    "-i",
    "-C",
    config.WorkingDir || "/",
    ...env,
    ...(opts.entrypoint ?? config.Entrypoint ?? []),
    ...args,
  ];
  const child = spawn(
    "unshare",
    [
      "--mount",
      "--pid",
      "--fork",
      "--kill-child",
      "sh",
      "-c",
      SETUP,
      "sh",
      rootfs,
      mountpoint,
      opts.files ?? "",
      config.User || "0:0",
      ...command,
    ],
    { stdio: ["ignore", "pipe", "pipe"] },
  );
  let out = "";
  child.stdout!.on("data", (c) => (out += c));
  child.stderr!.on("data", (c) => (out += c));
  const exited = new Promise<number | null>((resolve) =>
    child.once("exit", (code) => {
      rmSync(mountpoint, { recursive: true, force: true });
      resolve(code);
    }),
  );
  return {
    child,
    output: () => out,
    exited,
    pid() {
      const children = readFileSync(`/proc/${child.pid}/task/${child.pid}/children`, "utf8").trim();
      return Number(children.split(/\s+/)[0]);
    },
  };
}

async function runInImage(
  rootfs: string,
  config: ImageConfig,
  args: string[],
  opts: { entrypoint?: string[] } = {},
): Promise<{ code: number | null; output: string }> {
  const p = startInImage(rootfs, config, args, opts);
  const code = await p.exited;
  return { code, output: p.output() };
}

describe("the image the manifests name", () => {
  it("is applygate's, through the versions component, tagged with package.json's version", () => {
    const versions = parse(
      readFileSync(join(REPO_ROOT, "manifests/components/versions/kustomization.yaml"), "utf8"),
    ) as { images: { name: string; newName: string; newTag: string }[] };
    const pkg = JSON.parse(readFileSync(join(REPO_ROOT, "package.json"), "utf8")) as { version: string };
    expect(versions.images.find((i) => i.name === "applygate")).toEqual({
      name: "applygate",
      newName: "ghcr.io/applygate/applygate",
      newTag: pkg.version,
    });
  });

  it("is built on one base image, named in the Containerfile's FROM", () => {
    expect(baseImageOf(readFileSync(CONTAINERFILE, "utf8"))).toBe("docker.io/library/node:20-bookworm-slim");
  });
});

describe.skipIf(skipped)("the container image", () => {
  const tag = `localhost/applygate:test-${process.pid}`;
  let container: string;
  let rootfs: string;
  let config: ImageConfig;

  beforeAll(async () => {
    mkdirSync(CACHE, { recursive: true });
    await removeLeftovers();
    const started = Date.now();
    const base = baseImageOf(readFileSync(CONTAINERFILE, "utf8"));
    const standIn = await ensureStandIn(base);
    const baseReady = Date.now();
    const npm = ensureNpmCache();
    const npmReady = Date.now();
    try {
      await buildah(
        "build",
        "--isolation",
        "chroot",
        "--pull=never",
        "--volume",
        `${npm.dir}:/npm-cache`,
        "--volume",
        `${npm.npmrc}:/usr/local/etc/npmrc:ro`,
        "-f",
        CONTAINERFILE,
        "-t",
        tag,
        REPO_ROOT,
      );
    } catch (err) {
      const e = err as { stdout?: string; stderr?: string };
      throw new Error(`the image did not build:\n${e.stdout?.slice(-4000)}\n${e.stderr?.slice(-4000)}`);
    }
    const built = Date.now();
    config = JSON.parse(await buildah("inspect", "--type", "image", tag)).OCIv1.config;
    container = await buildah("from", "--pull=never", tag);
    rootfs = await buildah("mount", container);
    const [size, baseSize] = await Promise.all(
      [tag, base].map((i) => buildah("images", "--format", "{{.Size}}", i)),
    );
    const s = (ms: number) => `${(ms / 1000).toFixed(0)}s`;
    console.log(
      `image ${tag}: ${size} (its base, the stand-in for ${base}: ${baseSize}); ` +
        `stand-in ${standIn} in ${s(baseReady - started)}, npm cache ${npm.filled ? "filled" : "kept"} in ` +
        `${s(npmReady - baseReady)}, image built in ${s(built - npmReady)}`,
    );
  }, BUILD_TIMEOUT_MS);

  afterAll(async () => {
    if (container) await buildah("rm", container).catch(() => undefined);
    await buildah("rmi", "--force", tag).catch(() => undefined);
  });

  it("runs as a non-root numeric user, its root filesystem read-only and /tmp writable", async () => {
    expect(config.User).toMatch(/^[1-9]\d*:[1-9]\d*$/);
    const probe = `
      const fs = require("node:fs");
      const wrote = (p) => { try { fs.writeFileSync(p, "x"); return "written"; } catch (e) { return e.code; } };
      console.log(JSON.stringify({ uid: process.getuid(), pid: process.pid, app: wrote("/app/x"), tmp: wrote("/tmp/x") }));`;
    const r = await runInImage(rootfs, config, [], { entrypoint: ["node", "-e", probe] });
    expect(r.code, r.output).toBe(0);
    expect(JSON.parse(r.output)).toEqual({
      uid: Number(config.User!.split(":")[0]),
      pid: 1,
      app: "EROFS",
      tmp: "written",
    });
  });

  it("answers `applygate --help` with every command", async () => {
    expect(config.Entrypoint).toEqual(["node", "/app/queue/cli/applygate.mjs"]);
    const r = await runInImage(rootfs, config, ["--help"]);
    expect(r.code, r.output).toBe(0);
    for (const command of ["gateway", "worker", "sidecar"])
      expect(r.output).toMatch(new RegExp(`^  ${command} `, "m"));
    const sidecar = await runInImage(rootfs, config, ["sidecar", "--help"]);
    expect(sidecar.code, sidecar.output).toBe(0);
    expect(sidecar.output).toContain("usage: applygate sidecar");
  });

  it("says in one line that the playground is not part of it", async () => {
    const r = await runInImage(rootfs, config, ["playground"]);
    expect(r.code).not.toBe(0);
    expect(r.output.trim().split("\n")).toHaveLength(1);
    expect(r.output).toMatch(/^applygate playground: the playground is not part of this build/);
  });

  it("holds compiled JavaScript and production dependencies only: no TypeScript, tests or dev tools", () => {
    const app = join(rootfs, "app");
    expect(readdirSync(app).sort()).toEqual(["gateway", "node_modules", "package.json", "queue", "sidecar"]);
    const files = (readdirSync(app, { recursive: true }) as string[]).filter(
      (f) => !f.startsWith("node_modules"),
    );
    expect(files.filter((f) => f.endsWith(".ts"))).toEqual([]);
    expect(files.filter((f) => /\.test\.|testing\.js|bench-server/.test(f))).toEqual([]);
    expect(files).toContain(join("queue", "cli", "main.js"));
    // Packages the lock file marks as needed only by the dev dependencies (a dev dependency that a
    // production one also needs, such as ajv under fastify, is not marked and rightly stays), and
    // typescript, which the Containerfile removes (an optional peer of a production dependency).
    const lock = JSON.parse(readFileSync(join(REPO_ROOT, "package-lock.json"), "utf8")) as {
      packages: Record<string, { dev?: boolean }>;
    };
    const devOnly = Object.entries(lock.packages)
      .filter(([path, p]) => path.startsWith("node_modules/") && p.dev)
      .map(([path]) => path)
      .concat("node_modules/typescript");
    expect(devOnly).toEqual(expect.arrayContaining(["node_modules/vitest", "node_modules/tsx"]));
    const present = devOnly.filter((path) => existsSync(join(app, path)));
    expect(present).toEqual([]);
  });

  describe("applygate gateway", () => {
    let redis: IsolatedRedis;
    beforeAll(async () => {
      redis = await isolatedRedis("image");
    });
    afterAll(async () => {
      await redis?.cleanup();
    });

    it("starts against Redis with a config file, answers /healthz, and stops on SIGTERM", async () => {
      const files = mkdtempSync(join(tmpdir(), "applygate-image-files-"));
      writeFileSync(join(files, "config.yaml"), fixtureYaml());
      const gateway = startInImage(rootfs, config, ["gateway", "--config", "/tmp/config.yaml"], {
        files,
        env: {
          REDIS_URL: redis.url,
          APPLYGATE_REDIS_PREFIX: redis.prefix,
          APPLYGATE_GATEWAY_HOST: "127.0.0.1",
          APPLYGATE_GATEWAY_PORT: "0",
          APPLYGATE_GATEWAY_METRICS_PORT: "0",
          APPLYGATE_DASHBOARD_TOKEN: "image-test-token",
        },
      });
      try {
        const url = await until(
          () => {
            if (gateway.child.exitCode !== null) throw new Error(`the gateway exited:\n${gateway.output()}`);
            return /"url":"(http:\/\/127\.0\.0\.1:\d+)"/.exec(gateway.output())?.[1];
          },
          "the gateway's listening line",
          { timeoutMs: 60_000, everyMs: 100 },
        );
        const health = await fetch(`${url}/healthz`);
        expect(health.status).toBe(200);
        process.kill(gateway.pid(), "SIGTERM");
        expect(await gateway.exited, gateway.output()).toBe(0);
        expect(gateway.output()).toMatch(/"signal":"SIGTERM".*"msg":"gateway stopping"/);
      } finally {
        gateway.child.kill("SIGKILL");
        rmSync(files, { recursive: true, force: true });
      }
    });
  });
});
