/**
 * For tests: signed commits made by the real `git` CLI, with SSH keys made by `ssh-keygen` and
 * OpenPGP keys made by `gpg`, in a temporary folder.
 */
import { execFileSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

export const hasGpg = (() => {
  try {
    execFileSync("gpg", ["--version"], { stdio: "ignore" });
    return true;
  } catch {
    return false;
  }
})();

export interface SshSigner {
  format: "ssh";
  /** Path of the private key (its `.pub` beside it). */
  keyPath: string;
  /** The authorized_keys line of its public key. */
  publicKey: string;
}

export interface GpgSigner {
  format: "openpgp";
  home: string;
  fingerprint: string;
  /** The armored public key. */
  publicKey: string;
}

export type Signer = SshSigner | GpgSigner;

export function sshKey(
  dir: string,
  type: "ed25519" | "ecdsa" | "ecdsa384" | "ecdsa521" | "rsa",
  comment = `${type}@test`,
): SshSigner {
  const keyPath = join(dir, `id_${type}_${Math.random().toString(36).slice(2, 8)}`);
  const bits = {
    ecdsa: ["-b", "256"],
    ecdsa384: ["-b", "384"],
    ecdsa521: ["-b", "521"],
    rsa: ["-b", "2048"],
    ed25519: [],
  }[type];
  const t = type.startsWith("ecdsa") ? "ecdsa" : type;
  execFileSync("ssh-keygen", ["-q", "-t", t, ...bits, "-N", "", "-C", comment, "-f", keyPath]);
  return { format: "ssh", keyPath, publicKey: readFileSync(`${keyPath}.pub`, "utf8").trim() };
}

/**
 * Each GNUPGHOME gets its own gpg-agent daemon, which outlives the test process and holds two
 * inotify instances; left running they exhaust `fs.inotify.max_user_instances` (128) within a
 * dozen suite runs, and then `fs.watch` fails with EMFILE. Test files stop them in `afterAll`.
 */
const gpgHomes = new Set<string>();

/**
 * Stops the gpg-agent of every home `gpgKey` made in this process, and waits (bounded) until
 * they have exited: `gpgconf --kill` only asks.
 */
export async function stopGpgAgents(): Promise<void> {
  // Homes stay known: a later signature starts their agent again.
  const homes = [...gpgHomes];
  for (const home of homes) {
    try {
      execFileSync("gpgconf", ["--kill", "gpg-agent"], {
        env: { ...process.env, GNUPGHOME: home },
        stdio: "ignore",
      });
    } catch {
      // No agent was started for this home.
    }
  }
  const deadline = Date.now() + 10_000;
  while (homes.some((home) => gpgAgentsOf(home).length > 0)) {
    if (Date.now() > deadline) throw new Error(`gpg-agents still running for ${homes.join(", ")}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** Process ids of gpg-agents serving `home` (read from /proc). */
export function gpgAgentsOf(home: string): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const argv = readFileSync(`/proc/${entry}/cmdline`, "utf8").split("\0");
      if (argv[0]?.endsWith("gpg-agent") && argv.includes(home)) pids.push(Number(entry));
    } catch {
      // The process ended while we read.
    }
  }
  return pids;
}

export function gpgKey(dir: string, uid = "Ada Release <ada@example.test>", algo = "ed25519"): GpgSigner {
  const home = mkdtempSync(join(dir, "gnupg-"));
  gpgHomes.add(home);
  const env = { ...process.env, GNUPGHOME: home };
  execFileSync("gpg", ["--batch", "--passphrase", "", "--quick-gen-key", uid, algo, "sign", "never"], {
    env,
    stdio: "ignore",
  });
  const list = execFileSync("gpg", ["--batch", "--with-colons", "--list-keys", uid], {
    env,
    encoding: "utf8",
    stdio: "pipe",
  });
  const fingerprint = /^fpr:+([0-9A-F]+):/m.exec(list)?.[1] as string;
  const publicKey = execFileSync("gpg", ["--batch", "--armor", "--export", fingerprint], {
    env,
    encoding: "utf8",
    stdio: "pipe",
  });
  return { format: "openpgp", home, fingerprint, publicKey };
}

/** git with the identity and, when given, the signer; `GNUPGHOME` for an OpenPGP signer. */
export function gitWith(dir: string, signer?: Signer) {
  const env = {
    ...process.env,
    GIT_AUTHOR_NAME: "Ada",
    GIT_AUTHOR_EMAIL: "ada@example.test",
    GIT_COMMITTER_NAME: "Ada",
    GIT_COMMITTER_EMAIL: "ada@example.test",
    GIT_CONFIG_NOSYSTEM: "1",
    HOME: dir,
    ...(signer?.format === "openpgp" ? { GNUPGHOME: signer.home } : {}),
  };
  const config =
    signer === undefined
      ? []
      : signer.format === "ssh"
        ? ["-c", "gpg.format=ssh", "-c", `user.signingkey=${signer.keyPath}`]
        : ["-c", "gpg.format=openpgp", "-c", `user.signingkey=${signer.fingerprint}`];
  return (args: string[], input?: string) =>
    execFileSync("git", [...config, ...args], {
      cwd: dir,
      env,
      stdio: "pipe",
      ...(input !== undefined ? { input } : {}),
    });
}

/** A working repository in a fresh folder under the OS temp dir. */
export function workRepo(): { dir: string } {
  const dir = mkdtempSync(join(tmpdir(), "sig-"));
  execFileSync("git", ["init", "-q", "-b", "main", dir]);
  return { dir };
}

/** Commits a file change (signed with `signer`, or unsigned); returns the SHA. */
export function commitFile(dir: string, path: string, content: string, signer?: Signer): string {
  writeFileSync(join(dir, path), content);
  const git = gitWith(dir, signer);
  git(["add", path]);
  git(["commit", "-q", ...(signer ? ["-S"] : []), "-m", `change ${path}`]);
  return git(["rev-parse", "HEAD"]).toString().trim();
}

/** The raw commit object, as `git cat-file` prints it. */
export function rawCommit(dir: string, sha: string): Buffer {
  return execFileSync("git", ["cat-file", "commit", sha], { cwd: dir });
}

/** An SSHSIG signature of `data` by `signer` in `namespace` (ssh-keygen -Y sign). */
export function sshSign(signer: SshSigner, data: Buffer, namespace: string): string {
  return execFileSync("ssh-keygen", ["-Y", "sign", "-n", namespace, "-f", signer.keyPath, "-q"], {
    input: data,
  }).toString();
}

/** A commit object with `signature` put in its `gpgsig` header (as Git writes it). */
export function withSignature(payload: Buffer, signature: string): Buffer {
  const end = payload.indexOf("\n\n");
  const header = `gpgsig ${signature.trimEnd().split("\n").join("\n ")}\n`;
  return Buffer.concat([payload.subarray(0, end + 1), Buffer.from(header), payload.subarray(end + 1)]);
}
