/**
 * Who holds what between tenants. A repository is held by one GitProvider: the oldest naming it
 * (creation time as the API server stamped it, then namespace, then name). Another GitProvider
 * naming the same repository is refused unless the holder admits its namespace in
 * `spec.accessFrom` — the consent that already lets a GitTarget of another namespace name the
 * holder. A GitTarget may write only through a GitProvider that is not refused and that admits
 * its namespace.
 *
 * A folder of a branch is held by the GitTargets of one namespace: GitTargets writing one branch of
 * one repository (through any GitProvider) whose folders overlap — one is the other, or holds it —
 * must be of the same namespace, since the applier of the outer folder applies the inner one too.
 * The oldest GitTarget holds (the same order as GitProviders); one of another namespace whose
 * folder overlaps a held folder is refused, naming the GitTarget that holds it.
 *
 * Why the oldest: creation time is set by the API server, not by the client, and a GitProvider's
 * URL cannot change (CEL), so a provider has named its repository since it was created. A tenant
 * who comes later cannot take a repository away from its holder, however its objects are named or
 * listed; one who came first holds a repository it has no credentials for, and the team that
 * owns it sees its own GitProvider refused with a condition naming the squatter. Deleting the
 * holder lets the next oldest hold the repository.
 *
 * Repositories are compared by `repositoryOf`, which errs towards sameness: every spelling a Git
 * host would serve as one repository (scheme, host case, default ports, userinfo, `.git`,
 * slashes, percent-encoding, path case) is one repository here. Pure: the gateway, the worker and
 * the sidecars judge with the same function.
 */
import { remembered } from "./contract.js";
import { type AccessFrom, admitsNamespace, providerRefusal } from "./crds/common.js";
import { StatusReason } from "./crds/reasons.js";

/** What holding reads of a GitProvider. */
export interface ProviderFacts {
  namespace: string;
  name: string;
  url: string;
  /** `metadata.creationTimestamp`; an object without one (a file) counts as the newest. */
  createdAt?: string | undefined;
  accessFrom?: AccessFrom | undefined;
}

/** What holding reads of a GitTarget. */
export interface TargetFacts {
  namespace: string;
  name: string;
  providerNamespace: string;
  providerName: string;
  /** Its branch and folder: what folder holding compares (absent: only its GitProvider is judged). */
  branch?: string;
  path?: string;
  createdAt?: string | undefined;
}

export interface HoldingRefusal {
  reason:
    | typeof StatusReason.ProviderNamespaceNotAllowed
    | typeof StatusReason.RepositoryHeld
    | typeof StatusReason.FolderHeld;
  message: string;
}

const DEFAULT_PORTS = new Set(["", "22", "80", "443", "9418"]);

/** Percent-decodes until stable (a double-encoded `%252e` is a dot too); undefined when malformed. */
function decoded(path: string): string | undefined {
  let s = path;
  for (let i = 0; i < 4; i++) {
    let next: string;
    try {
      next = decodeURIComponent(s);
    } catch {
      return undefined;
    }
    if (next === s) return s;
    s = next;
  }
  return s;
}

/**
 * The repository a clone URL names, as holding compares them: `host[:port]/path`, the host as the
 * URL parser canonicalises it (lower case, IPv4 and IPv6 in canonical form, punycode) without a
 * trailing dot, no default port (22, 80, 443, 9418), no userinfo, query or fragment, the path
 * decoded, its dot segments resolved and repeated slashes collapsed, without `.git` and trailing
 * slashes, in lower case (GitHub, GitLab and Gitea ignore case in owner and repository names).
 * `git@host:owner/repo` and `ssh://git@host/owner/repo` are the same repository as
 * `https://host/owner/repo`. Undefined for what is not a repository URL.
 */
export function repositoryOf(url: string): string | undefined {
  return repositories(url);
}

const repositories = remembered(repositoryUncached);

function repositoryUncached(url: string): string | undefined {
  const s = url.trim();
  let rawHost: string;
  let rawPath: string;
  let port = "";
  const scp = /^[^@/\s]+@([^:/\s]+):(?!\/)(.*)$/.exec(s);
  if (scp && !s.includes("://")) {
    rawHost = scp[1] as string;
    rawPath = scp[2] as string;
  } else {
    let u: URL;
    try {
      u = new URL(s.includes("://") ? s : `https://${s}`);
    } catch {
      return undefined;
    }
    if (!["http:", "https:", "ssh:", "git:"].includes(u.protocol)) return undefined;
    rawHost = u.hostname;
    port = u.port;
    rawPath = u.pathname;
  }
  let host: string;
  try {
    host = new URL(`https://${rawHost}`).hostname;
  } catch {
    return undefined;
  }
  host = host.replace(/\.+$/, "");
  if (host === "") return undefined;
  const path = decoded(rawPath);
  if (path === undefined) return undefined;
  const segments: string[] = [];
  for (const seg of path.replace(/\\/g, "/").split("/")) {
    if (seg === "" || seg === ".") continue;
    if (seg === "..") segments.pop();
    else segments.push(seg);
  }
  let joined = segments.join("/");
  for (;;) {
    const trimmed = joined.replace(/\.git$/i, "").replace(/\/+$/, "");
    if (trimmed === joined) break;
    joined = trimmed;
  }
  if (joined === "") return undefined;
  const where = DEFAULT_PORTS.has(port) ? host : `${host}:${port}`;
  return `${where}/${joined.normalize("NFC").toLowerCase()}`;
}

/**
 * A GitTarget's folder as folder holding compares it: its segments, `.` and empty ones dropped,
 * in NFC and lower case (a case-insensitive checkout, or a host that folds case, must not let two
 * namespaces share a folder). The root is no segment at all.
 */
export function folderSegments(path: string): string[] {
  return path
    .replace(/\\/g, "/")
    .split("/")
    .filter((s) => s !== "" && s !== ".")
    .map((s) => s.normalize("NFC").toLowerCase());
}

/** Whether two folders overlap: one is the other, or holds it (by whole segments). */
export function foldersOverlap(a: readonly string[], b: readonly string[]): boolean {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) if (a[i] !== b[i]) return false;
  return true;
}

const nn = (o: { namespace: string; name: string }) => `${o.namespace}/${o.name}`;

/** Oldest first: creation time, then namespace, then name. A missing or unreadable time is newest. */
export function byAge(
  a: { namespace: string; name: string; createdAt?: string | undefined },
  b: { namespace: string; name: string; createdAt?: string | undefined },
): number {
  const t = (x: { createdAt?: string | undefined }) => {
    const ms = x.createdAt ? Date.parse(x.createdAt) : Number.NaN;
    return Number.isFinite(ms) ? ms : Number.POSITIVE_INFINITY;
  };
  const d = t(a) - t(b);
  if (d !== 0 && !Number.isNaN(d)) return d < 0 ? -1 : 1;
  if (a.namespace !== b.namespace) return a.namespace < b.namespace ? -1 : 1;
  return a.name < b.name ? -1 : a.name > b.name ? 1 : 0;
}

/** A node of the held folders of one branch: who holds it, and the oldest of each namespace below. */
interface FolderNode {
  holder: TargetFacts | undefined;
  below: Map<string, TargetFacts>;
  children: Map<string, FolderNode>;
}

/**
 * The folders held on one branch, as a tree of segments: whether a folder overlaps a held one of
 * another namespace costs its depth, not the number of GitTargets on the branch.
 */
class FolderTree {
  private readonly root: FolderNode = { holder: undefined, below: new Map(), children: new Map() };

  add(folder: readonly string[], t: TargetFacts): void {
    let node = this.root;
    for (let i = 0; ; i++) {
      if (!node.below.has(t.namespace)) node.below.set(t.namespace, t);
      if (i === folder.length) break;
      const seg = folder[i] as string;
      let next = node.children.get(seg);
      if (!next) {
        next = { holder: undefined, below: new Map(), children: new Map() };
        node.children.set(seg, next);
      }
      node = next;
    }
    node.holder ??= t;
  }

  /** The oldest held GitTarget of another namespace whose folder overlaps `folder`, if any. */
  overlapping(folder: readonly string[], namespace: string): TargetFacts | undefined {
    const found: TargetFacts[] = [];
    let node: FolderNode | undefined = this.root;
    for (let i = 0; node; i++) {
      // A folder holding this one (or this one itself).
      if (node.holder && node.holder.namespace !== namespace) found.push(node.holder);
      if (i === folder.length) {
        // Folders this one holds.
        for (const [ns, t] of node.below) if (ns !== namespace) found.push(t);
        break;
      }
      node = node.children.get(folder[i] as string);
    }
    return found.sort(byAge)[0];
  }
}

export interface Holding {
  /** Why this GitProvider may not be used (another holds its repository), or undefined. */
  provider(namespace: string, name: string): HoldingRefusal | undefined;
  /** The GitProvider holding the repository this one names (itself when it holds it). */
  holderOf(namespace: string, name: string): ProviderFacts | undefined;
  /**
   * Why this GitTarget may not write: its GitProvider does not admit its namespace, or is refused,
   * or (when the targets were given) another namespace's GitTarget holds an overlapping folder of
   * the branch. Undefined when it may, or when its provider does not exist (the caller says
   * ProviderNotFound).
   */
  target(t: TargetFacts): HoldingRefusal | undefined;
}

/**
 * Judges which GitProvider holds each repository, which GitTargets hold each folder of a branch,
 * and what that means for each GitTarget. Pure.
 */
export function judgeHolding(
  providers: readonly ProviderFacts[],
  targets: readonly TargetFacts[] = [],
): Holding {
  const byName = new Map(providers.map((p) => [nn(p), p]));
  const holders = new Map<string, ProviderFacts>();
  for (const p of [...providers].sort(byAge)) {
    const repo = repositoryOf(p.url);
    if (repo !== undefined && !holders.has(repo)) holders.set(repo, p);
  }
  const holderOf = (namespace: string, name: string) => {
    const p = byName.get(`${namespace}/${name}`);
    const repo = p && repositoryOf(p.url);
    return repo === undefined ? undefined : holders.get(repo);
  };
  const provider = (namespace: string, name: string): HoldingRefusal | undefined => {
    const p = byName.get(`${namespace}/${name}`);
    if (!p) return undefined;
    const repo = repositoryOf(p.url);
    const holder = repo === undefined ? undefined : holders.get(repo);
    if (!holder || holder === p || admitsNamespace(holder.namespace, holder.accessFrom, p.namespace))
      return undefined;
    return {
      reason: StatusReason.RepositoryHeld,
      message: `repository ${repo} is held by GitProvider ${nn(holder)}, which does not admit namespace ${p.namespace} (its spec.accessFrom.namespaces); the oldest GitProvider naming a repository holds it`,
    };
  };
  const providerVerdict = (t: TargetFacts): HoldingRefusal | undefined => {
    const p = byName.get(`${t.providerNamespace}/${t.providerName}`);
    if (!p) return undefined;
    const notAdmitted = providerRefusal(
      { namespace: t.namespace },
      { namespace: p.namespace, name: p.name, accessFrom: p.accessFrom },
    );
    if (notAdmitted) return notAdmitted;
    const held = provider(p.namespace, p.name);
    if (held)
      return {
        reason: held.reason,
        message: `GitProvider ${nn(p)} may not be used: ${held.message}`,
      };
    return undefined;
  };
  // Folders: per branch of a repository, the GitTargets that may write it, oldest first; each
  // holds its folder unless one of another namespace holds an overlapping one already.
  const folderRefusals = new Map<string, HoldingRefusal>();
  const branches = new Map<string, Array<{ t: TargetFacts; folder: string[] }>>();
  for (const t of targets) {
    if (t.branch === undefined || t.path === undefined || providerVerdict(t)) continue;
    const p = byName.get(`${t.providerNamespace}/${t.providerName}`);
    const repo = p && repositoryOf(p.url);
    if (repo === undefined) continue;
    const key = `${repo}@${t.branch}`;
    const list = branches.get(key) ?? [];
    list.push({ t, folder: folderSegments(t.path) });
    branches.set(key, list);
  }
  for (const [key, list] of branches) {
    const held = new FolderTree();
    for (const x of list.sort((a, b) => byAge(a.t, b.t))) {
      const holder = held.overlapping(x.folder, x.t.namespace);
      if (!holder) {
        held.add(x.folder, x.t);
        continue;
      }
      folderRefusals.set(nn(x.t), {
        reason: StatusReason.FolderHeld,
        message: `folder ${x.t.path} overlaps folder ${holder.path} of GitTarget ${nn(holder)} on ${key}, which holds it: only GitTargets of namespace ${holder.namespace} write there`,
      });
    }
  }
  return {
    provider,
    holderOf,
    target(t) {
      return providerVerdict(t) ?? folderRefusals.get(nn(t));
    },
  };
}

/** A GitTarget object as holding reads it. */
export function targetFacts(t: {
  metadata: { name: string; namespace?: string | undefined; creationTimestamp?: string | undefined };
  spec: { providerRef: { name: string; namespace?: string | undefined }; branch: string; path: string };
}): TargetFacts {
  const namespace = t.metadata.namespace ?? "default";
  return {
    namespace,
    name: t.metadata.name,
    providerNamespace: t.spec.providerRef.namespace ?? namespace,
    providerName: t.spec.providerRef.name,
    branch: t.spec.branch,
    path: t.spec.path,
    ...(t.metadata.creationTimestamp ? { createdAt: t.metadata.creationTimestamp } : {}),
  };
}

/** A GitProvider object as holding reads it. */
export function providerFacts(p: {
  metadata: { name: string; namespace?: string | undefined; creationTimestamp?: string | undefined };
  spec: { url: string; accessFrom?: AccessFrom | undefined };
}): ProviderFacts {
  return {
    namespace: p.metadata.namespace ?? "default",
    name: p.metadata.name,
    url: p.spec.url,
    ...(p.metadata.creationTimestamp ? { createdAt: p.metadata.creationTimestamp } : {}),
    ...(p.spec.accessFrom ? { accessFrom: p.spec.accessFrom } : {}),
  };
}
