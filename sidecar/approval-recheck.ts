/**
 * What an apply would bring, read by the executor at the write from sources an attempt cannot
 * forge (judged by governance-check.ts):
 *  - since: the claim's last applied commit (`status.lastAppliedCommit`, which the sidecar writes
 *    when an operation succeeds);
 *  - the repository and branch: those of the GitProvider the claim's GitTarget names, never the
 *    attempt's words;
 *  - the commits: the first-parent line from the attempt's commit back to `since` in the
 *    sidecar's own clone (sidecar/git-ancestry.ts; the branch is fetched when the clone lacks the
 *    commit), leaving out the worker's own publications as the branch's decision state records
 *    them, by the worker's own walk (`readForeign`);
 *  - for each commit, the required commit status as the Git host answers now, and its signature
 *    (or its tag's) checked against the keys Secret as read now.
 * Any of it that cannot be read makes the read fail, which approves nothing.
 */
import type { Redis } from "ioredis";
import { type Attempt, branchKey } from "../queue/contract.js";
import type { GitProvider } from "../queue/crds/index.js";
import { errorMessage } from "../queue/errors.js";
import { readForeign } from "../queue/governance/approval-walk.js";
import { approvalRequired } from "../queue/governance/judge.js";
import { governanceOf } from "../queue/governance/objects.js";
import { SignatureReader } from "../queue/governance/signatures.js";
import { tagMatches } from "../queue/governance/tag-approval.js";
import { claimStatusField, type KObject, type Kube, RESOURCES, targetField } from "../queue/kube/index.js";
import { type OwnPublication, readOwnPublications } from "../queue/records.js";
import { commitStatusesAtWrite } from "./commit-status-check.js";
import type { GitAncestry } from "./git-ancestry.js";
import type { BroughtRead } from "./governance-check.js";
import { keysFromKube, signatureSpecOf } from "./signature-check.js";

/** The worker's own publications on a branch, newest last: the commits after `base` up to `tip`. */
export type OwnPublications = (branchKey: string) => Promise<readonly OwnPublication[]>;

/** Reads what the attempt's apply would bring; undefined when the claim requires no approval. */
export type BroughtReader = (
  attempt: Attempt,
  claim: KObject,
  targets: readonly KObject[],
) => Promise<BroughtRead | undefined>;

export interface ApprovalRecheckDeps {
  kube: Kube;
  git: Pick<GitAncestry, "holding">;
  /** Default: none (every commit is foreign), as for a branch no worker has decided for. */
  published?: OwnPublications;
  /** Keeps signature verdicts per key set and commit (default: one reading keys Secrets by name). */
  signatures?: SignatureReader;
  /** Deadline of each commit status read from the Git host. */
  statusTimeoutMs?: number;
  /** The operator allows credentials over plain http (`--allow-http-credentials`): status reads. */
  allowHttpCredentials?: boolean;
}

/** The worker's own publications as the branch's decision state in Redis holds them (read only). */
export function publishedFromRedis(redis: Redis, prefix: string): OwnPublications {
  return (key) => readOwnPublications(redis, prefix, key);
}

const SHA = /^[0-9a-f]{40}$/;

export function approvalRecheck(d: ApprovalRecheckDeps): BroughtReader {
  const signatures = d.signatures ?? new SignatureReader(keysFromKube(d.kube));
  return async (attempt, claim, targets) => {
    const named = targets.map((t) => governanceOf(t, claim)).map((g) => (g ? { governance: g } : {}));
    const sources = approvalRequired(named);
    if (sources.length === 0) return undefined;
    try {
      const repo = await repositoryOf(d.kube, attempt, targets);
      const last = claimStatusField(claim, "lastAppliedCommit");
      const since = last !== undefined && SHA.test(last) ? last : null;
      const source = await d.git.holding(
        { repoUrl: repo.url, branch: attempt.branch, claim: attempt.claim },
        attempt.commit,
      );
      if (!source) return { ok: false, message: `${attempt.commit} is not on ${repo.url} ${attempt.branch}` };
      const own = d.published ? await d.published(repo.key) : [];
      const line: string[] = [];
      const { commits, notDescendant } = await readForeign(
        (oid) => source.parentsOf(oid),
        attempt.commit,
        since,
        own,
        undefined,
        line,
      );
      const read: Extract<BroughtRead, { ok: true }> = {
        ok: true,
        since,
        commits,
        ...(notDescendant ? { notDescendant } : {}),
      };
      if (sources.includes("CommitStatus")) {
        const statuses = await commitStatusesAtWrite(d.kube, commits, claim, targets, {
          ...(d.statusTimeoutMs !== undefined ? { timeoutMs: d.statusTimeoutMs } : {}),
          ...(d.allowHttpCredentials ? { allowHttpCredentials: true } : {}),
        });
        if (statuses) read.statuses = statuses;
      }
      const spec = sources.includes("Signature") ? signatureSpecOf(claim, targets) : undefined;
      if (spec) {
        const tagged =
          spec.mode === "HEAD"
            ? undefined
            : {
                line,
                tags: () => source.tagsAt(line, (name) => tagMatches(name, spec.tagPattern)),
                rawTagOf: (oid: string) => source.rawTagOf(oid),
              };
        read.signatures = (
          await signatures.read(spec, commits, (oid) => source.rawCommitOf(oid), tagged)
        ).signatures;
      }
      return read;
    } catch (err) {
      return { ok: false, message: errorMessage(err) };
    }
  };
}

/**
 * The repository the attempt's apply reads: the GitProvider named by a GitTarget of the attempt
 * that names its claim on its branch, as the cluster has it now (an attempt's `repository` is
 * only its word).
 */
async function repositoryOf(
  kube: Kube,
  attempt: Attempt,
  targets: readonly KObject[],
): Promise<{ url: string; key: string }> {
  for (const t of targets) {
    const ns = t.metadata.namespace ?? "";
    const ref = targetField(t, "claimRef");
    if (
      targetField(t, "branch") !== attempt.branch ||
      ref?.kind !== attempt.claim.kind ||
      ref.name !== attempt.claim.name
    )
      continue;
    if ((ref.namespace ?? ns) !== attempt.claim.namespace) continue;
    const p = targetField(t, "providerRef");
    if (!p) continue;
    const pns = p.namespace ?? ns;
    const provider = await kube.get<GitProvider>(RESOURCES.gitProvider, pns, p.name);
    if (!provider) continue;
    return {
      url: provider.spec.url,
      key: branchKey({ namespace: pns, name: p.name }, provider.spec.url, attempt.branch),
    };
  }
  throw new Error(
    `no GitTarget of the attempt names ${attempt.claim.kind} ${attempt.claim.name} on ${attempt.branch} through a GitProvider`,
  );
}
