/**
 * Ancestry answered from the sidecar's own persistent bare clone of each repository (one folder
 * per normalised repository URL under the cache folder). A question the clone cannot answer
 * (a commit it does not hold) fetches the branch once, within a deadline, and asks again; what is
 * still unknown after that stays "unknown", which never terminates anything.
 *
 * The remote and its credentials are found the way the branch worker finds them: the claim's
 * GitTarget on that branch → its GitProvider (whose normalised URL must be the repository's, which
 * admits the GitTarget's namespace and holds the repository, or is admitted by its holder) → the
 * provider's credentialsSecretRef. A provider without one is fetched anonymously.
 */
import { createHash } from "node:crypto";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { branchKey, normalizeRepoUrl } from "../queue/contract.js";
import type { GitProvider, GitTarget } from "../queue/crds/index.js";
import { type DirectoryOptions, directoryFromObjects } from "../queue/directory.js";
import { errorMessage } from "../queue/errors.js";
import { BareRepo, type RemoteTag } from "../queue/git/repo.js";
import type { Remote } from "../queue/git/smart-http.js";
import { type Kube, RESOURCES } from "../queue/kube/index.js";
import type { Logger } from "../queue/log.js";
import { judgeHolding, providerFacts, targetFacts } from "../queue/tenancy.js";
import { cloneAncestry } from "./argocd/ancestry.js";
import type { Ancestry, AncestryAnswer } from "./argocd/stale.js";

/** Where the clones live when no folder is set: a folder under the OS temp dir. */
export function defaultCacheDir(): string {
  return join(tmpdir(), "applygate-sidecar");
}

/** Deadline of the one fetch a question may make (default). */
export const DEFAULT_FETCH_DEADLINE_MS = 20_000;

/** The repository and branch a question is about, and the claim whose GitTarget names them. */
export interface AncestryRepo {
  repoUrl: string;
  branch: string;
  claim: { kind: "FluxClaim" | "ArgoCDClaim" | "WebhookClaim"; namespace: string; name: string };
}

/** Reads of one repository's objects from the sidecar's clone: what the approval check at the write walks. */
export interface CommitSource {
  parentsOf(oid: string): Promise<string[]>;
  rawCommitOf(oid: string): Promise<Uint8Array>;
  /** The server's tags pointing at one of `commits` (kept by name), their tag objects fetched. */
  tagsAt(commits: readonly string[], keep?: (name: string) => boolean): Promise<RemoteTag[]>;
  rawTagOf(oid: string): Promise<Uint8Array>;
}

/** The remote to fetch `q`'s repository from, with credentials; undefined when none is known. */
export type RemoteFor = (q: AncestryRepo) => Promise<Remote | undefined>;

export interface GitAncestryOptions {
  cacheDir: string;
  remoteFor: RemoteFor;
  fetchDeadlineMs?: number;
  log?: Logger;
}

interface Clone {
  repo: BareRepo;
  local: Ancestry;
}

export class GitAncestry {
  private readonly clones = new Map<string, Promise<Clone>>();
  /** One fetch per repository at a time; a question arriving meanwhile waits for that one. */
  private readonly fetching = new Map<string, Promise<void>>();
  private readonly deadlineMs: number;

  constructor(private readonly o: GitAncestryOptions) {
    this.deadlineMs = o.fetchDeadlineMs ?? DEFAULT_FETCH_DEADLINE_MS;
  }

  /** The clone's folder for a repository URL: readable, and unique by the normalised URL. */
  gitdirOf(repoUrl: string): string {
    const normalised = normalizeRepoUrl(repoUrl);
    const hash = createHash("sha256").update(normalised).digest("hex").slice(0, 12);
    const slug = normalised.replace(/[^A-Za-z0-9._-]+/g, "_").slice(-60);
    return join(this.o.cacheDir, `${slug}-${hash}.git`);
  }

  /** Is `revision` an ancestor of `commit` on `q`'s repository? */
  async ask(q: AncestryRepo, revision: string, commit: string): Promise<AncestryAnswer> {
    const key = normalizeRepoUrl(q.repoUrl);
    const clone = await this.clone(key, q.repoUrl);
    const first = await clone.local(revision, commit);
    if (first !== "unknown") return first;
    const log = this.o.log?.child({ branch: `${key}@${q.branch}`, revision, commit });
    const remote = await this.remoteOf(q, log);
    if (!remote) return "unknown";
    const fetched = await this.fetchOnce(key, clone.repo, remote, q.branch, log);
    if (!fetched) return "unknown";
    return clone.local(revision, commit);
  }

  /**
   * The clone of `q`'s repository once it holds `commit` (the branch fetched once, within the
   * deadline, when it lacks it); undefined when the commit cannot be had. A commit's ancestors
   * come with it: a fetch downloads all history the clone lacks.
   */
  async holding(q: AncestryRepo, commit: string): Promise<CommitSource | undefined> {
    const key = normalizeRepoUrl(q.repoUrl);
    const { repo } = await this.clone(key, q.repoUrl);
    const log = this.o.log?.child({ branch: `${key}@${q.branch}`, commit });
    const has = () =>
      repo.readCommit(commit).then(
        () => true,
        () => false,
      );
    if (!(await has())) {
      const remote = await this.remoteOf(q, log);
      if (!remote || !(await this.fetchOnce(key, repo, remote, q.branch, log)) || !(await has()))
        return undefined;
    }
    return {
      parentsOf: async (oid) => (await repo.readCommit(oid)).parents,
      rawCommitOf: (oid) => repo.readRawCommit(oid),
      tagsAt: async (commits, keep = () => true) => {
        const remote = await this.o.remoteFor(q);
        if (!remote) throw new Error(`no GitProvider names ${key} for the tags`);
        const on = new Set(commits);
        const tags = (await repo.remoteTags(remote)).filter((t) => on.has(t.commit) && keep(t.name));
        const objects = tags.filter((t) => t.annotated).map((t) => t.object);
        await repo.fetchObjects(remote, objects, commits.slice(0, 1));
        return tags;
      },
      rawTagOf: (oid) => repo.readRawTag(oid),
    };
  }

  private async remoteOf(q: AncestryRepo, log: Logger | undefined): Promise<Remote | undefined> {
    try {
      const remote = await this.o.remoteFor(q);
      if (!remote) log?.info("ancestry: commit unknown and no GitProvider to fetch it from");
      return remote;
    } catch (err) {
      log?.warn({ err: errorMessage(err) }, "ancestry: could not find the repository's GitProvider");
      return undefined;
    }
  }

  private clone(key: string, repoUrl: string): Promise<Clone> {
    let c = this.clones.get(key);
    if (!c) {
      const gitdir = this.gitdirOf(repoUrl);
      c = BareRepo.open(gitdir).then((repo) => ({ repo, local: cloneAncestry(gitdir) }));
      // A failed open (disk full, permissions) is tried again on the next question.
      c.catch(() => this.clones.delete(key));
      this.clones.set(key, c);
    }
    return c;
  }

  /** True when a fetch of the branch completed within the deadline. */
  private async fetchOnce(
    key: string,
    repo: BareRepo,
    remote: Remote,
    branch: string,
    log: Logger | undefined,
  ): Promise<boolean> {
    let inflight = this.fetching.get(key);
    if (!inflight) {
      const started = Date.now();
      inflight = (async () => {
        // Each call carries the deadline too, so a stalled server is given up on, not leaked.
        const { tip, downloaded } = await repo.fetchBranch({ ...remote, timeoutMs: this.deadlineMs }, branch);
        if (tip) await repo.writeRef(`refs/heads/${branch}`, tip);
        log?.info({ tip, downloaded, ms: Date.now() - started }, "ancestry: fetched the branch");
      })().finally(() => this.fetching.delete(key));
      this.fetching.set(key, inflight);
    }
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<"deadline">((resolve) => {
      timer = setTimeout(() => resolve("deadline"), this.deadlineMs);
    });
    try {
      const outcome = await Promise.race([inflight.then(() => "done" as const), deadline]);
      if (outcome === "deadline") {
        log?.warn({ deadlineMs: this.deadlineMs }, "ancestry: fetch missed its deadline; commit unknown");
        return false;
      }
      return true;
    } catch (err) {
      log?.warn({ err: errorMessage(err) }, "ancestry: fetch failed; commit unknown");
      return false;
    } finally {
      clearTimeout(timer);
      inflight.catch(() => undefined);
    }
  }
}

/**
 * The remote of a claim's repository from the cluster: GitTargets naming the claim on that branch,
 * their GitProviders, and the Secret a provider names. Unreadable credentials (the namespace did
 * not bind applygate-secret-reader to the sidecar, or the Secret is missing) mean anonymous.
 */
export function remoteFromCluster(kube: Kube, log?: Logger, options: DirectoryOptions = {}): RemoteFor {
  return async (q) => {
    const wanted = normalizeRepoUrl(q.repoUrl);
    const [{ items }, { items: providers }] = await Promise.all([
      kube.list<GitTarget>(RESOURCES.gitTarget),
      kube.list<GitProvider>(RESOURCES.gitProvider),
    ]);
    // Only a GitProvider that may be used, for a GitTarget it admits (queue/tenancy.ts).
    const holding = judgeHolding(providers.map(providerFacts), items.map(targetFacts));
    for (const t of items) {
      const ns = t.metadata.namespace ?? "default";
      const ref = t.spec.claimRef;
      if (!ref || ref.kind !== q.claim.kind || ref.name !== q.claim.name) continue;
      if ((ref.namespace ?? ns) !== q.claim.namespace || t.spec.branch !== q.branch) continue;
      const pns = t.spec.providerRef.namespace ?? ns;
      const provider = providers.find(
        (p) => p.metadata.name === t.spec.providerRef.name && (p.metadata.namespace ?? "default") === pns,
      );
      if (!provider || normalizeRepoUrl(provider.spec.url) !== wanted) continue;
      if (
        holding.target({
          namespace: ns,
          name: t.metadata.name,
          providerNamespace: pns,
          providerName: provider.metadata.name,
        })
      )
        continue;
      const secrets = [];
      const secretRef = provider.spec.credentialsSecretRef;
      if (secretRef) {
        try {
          const s = await kube.request(() =>
            kube.core.readNamespacedSecret({ name: secretRef.name, namespace: pns }),
          );
          secrets.push({
            kind: "Secret" as const,
            metadata: { name: secretRef.name, namespace: pns },
            data: s.data ?? {},
          });
        } catch (err) {
          log?.warn(
            { secret: `${pns}/${secretRef.name}`, err: errorMessage(err) },
            "ancestry: credentials unreadable; fetching anonymously",
          );
        }
      }
      const spec = await directoryFromObjects([provider], [t], secrets, [], options).branch(
        branchKey({ namespace: pns, name: provider.metadata.name }, provider.spec.url, q.branch),
      );
      if (spec) return spec.remote;
    }
    return undefined;
  };
}
