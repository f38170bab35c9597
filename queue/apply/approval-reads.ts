/**
 * What the decisions ask to be read of the branch's history and the Git host, read for them:
 * for each applier whose claim requires approval, the foreign commits since its last applied
 * commit with the required commit statuses and signatures; whether an overtaken operation's
 * commit is an ancestor of the tip; and the commit status an operation's report posts. The
 * decision driver queues these reads and feeds what they found as events.
 */
import type { PhaseReport } from "../contract.js";
import type { AncestryAsked, DecisionState, ForeignRead } from "../decide/index.js";
import { targetsNaming } from "../decide/index.js";
import type { BranchSpec } from "../directory.js";
import { errorMessage } from "../errors.js";
import {
  type CommitStatusApi,
  postStatus,
  readStatusOf,
  type StatusReadOptions,
  statusAccess,
  statusOfReport,
} from "../git/commit-status.js";
import { readForeign } from "../governance/approval-walk.js";
import type { SignatureReader } from "../governance/signatures.js";
import { tagMatches } from "../governance/tag-approval.js";
import type { Logger } from "../log.js";
import type { BranchHistory } from "../worker/history.js";
import type { ApprovalReadAsked, CommitStatusSpec } from "./governance.js";

/** Where approvals are read: the clone's history, the Git host as the branch's spec says, the keys. */
export interface ApprovalSources {
  history: BranchHistory;
  /** The branch's spec as listed now: its GitProvider's current credentials and endpoints. */
  spec(): BranchSpec;
  signatures: SignatureReader;
  log: Logger;
}

/**
 * Each applier's read on its own: a setting one claim or GitTarget has that the worker cannot
 * use, or a read that fails for it, holds that applier alone (`unreadable`) and shows on its
 * claim; the others' reads go on. `waiting`: something may still change on the host.
 */
export async function readApprovals(
  src: ApprovalSources,
  asked: readonly ApprovalReadAsked[],
  published: readonly { tip: string; base: string | null }[],
): Promise<{ reads: Record<string, ForeignRead>; waiting: boolean }> {
  const reads: Record<string, ForeignRead> = {};
  let waiting = false;
  for (const q of asked) {
    try {
      const r = await readOne(src, q, published);
      reads[q.key] = r.read;
      waiting ||= r.waiting;
    } catch (err) {
      const message = errorMessage(err).slice(0, 512);
      src.log.warn({ claim: q.key, err: message }, "reading the commits awaiting approval failed");
      reads[q.key] = {
        tip: q.tip,
        since: q.since,
        commits: [],
        unreadable: message,
        ...(q.signature?.keys !== undefined ? { keys: q.signature.keys } : {}),
      };
      waiting = true;
    }
  }
  return { reads, waiting };
}

/**
 * One applier's read: the foreign commits since its last applied commit, with the commit
 * statuses and signatures its claim requires.
 */
async function readOne(
  src: ApprovalSources,
  q: ApprovalReadAsked,
  published: readonly { tip: string; base: string | null }[],
): Promise<{ read: ForeignRead; waiting: boolean }> {
  const { history } = src;
  let waiting = false;
  const line: string[] = [];
  const read = await readForeign((oid) => history.parentsOf(oid), q.tip, q.since, published, undefined, line);
  if (q.commitStatus) {
    read.statuses = await readStatuses(src, q.commitStatus, read.commits);
    waiting ||= read.commits.some((c) => read.statuses?.[c] !== "success");
  }
  const sig = q.signature;
  if (sig) {
    // A tag mode reads the repository's tags on the line (only then are tags fetched).
    const tagged =
      sig.mode === "HEAD"
        ? undefined
        : {
            line,
            tags: () => history.tagsAt(line, (name) => tagMatches(name, sig.tagPattern)),
            rawTagOf: (oid: string) => history.rawTagOf(oid),
          };
    Object.assign(
      read,
      await src.signatures.read(sig, read.commits, (oid) => history.rawCommitOf(oid), tagged),
    );
    // A tag pushed later moves no tip: a commit no tag approves yet is read again.
    waiting ||= tagged !== undefined && read.commits.some((c) => !read.signatures?.[c]?.ok);
  }
  return { read, waiting };
}

/**
 * The branch's GitProvider's commit-status API, with its current token bound to the provider's
 * own origins: where it is comes from the provider alone, never from a claim or a GitTarget.
 */
function statusOptions(spec: BranchSpec, api: CommitStatusApi): StatusReadOptions {
  return statusAccess(spec.provider ?? { url: spec.remote.url }, api, spec.remote.auth?.password, {
    allowHttp: spec.remote.allowHttpCredentials === true,
  });
}

/**
 * The state of the required context on each commit; a failed read of one counts as not success.
 * Where the API is is decided first: a setting that cannot tell it throws (the applier's read
 * fails, and its claim says why).
 */
async function readStatuses(
  src: ApprovalSources,
  spec: CommitStatusSpec,
  commits: string[],
): Promise<Record<string, string>> {
  const o = statusOptions(src.spec(), spec.api);
  const out: Record<string, string> = {};
  for (const c of commits) {
    try {
      out[c] = await readStatusOf(o, c, spec.context);
    } catch (err) {
      out[c] = "error";
      src.log.warn({ commit: c, err: errorMessage(err) }, "reading a commit status failed");
    }
  }
  return out;
}

/**
 * Whether an overtaken operation's commit is an ancestor of the tip, read from the clone; a read
 * that fails is unknown, which ends nothing.
 */
export async function readAncestry(history: BranchHistory, q: AncestryAsked, log: Logger) {
  const ancestry = await history.ancestry(q.commit, q.tip).catch((err: unknown) => {
    log.warn({ token: q.token, err: errorMessage(err) }, "reading an operation's ancestry failed");
    return "unknown" as const;
  });
  log.info(
    { token: q.token, commit: q.commit, tip: q.tip, ancestry },
    "an operation out was overtaken by a foreign tip: its commit's ancestry read",
  );
  return ancestry;
}

/**
 * Posts the commit status of an operation's report when its claim asks for one
 * (`spec.commitStatusReport`), in the background: the Git host never holds a decision.
 */
export function postReportStatus(s: DecisionState, r: PhaseReport, spec: BranchSpec, log: Logger): void {
  const key = `${r.claim.kind}/${r.claim.namespace}/${r.claim.name}`;
  const a = s.appliers[key];
  const report = targetsNaming(s, key).find((t) => t.governance?.statusReport)?.governance?.statusReport;
  const commit = r.commit ?? a?.operation?.commit;
  const post = statusOfReport(r.phase, r.claim, r.message);
  if (!report || !commit || !post) return;
  let o: StatusReadOptions;
  try {
    o = statusOptions(spec, report.api);
  } catch (err) {
    log.warn({ claim: r.claim, commit, err: errorMessage(err) }, "posting the commit status failed");
    return;
  }
  void postStatus(o, commit, post).catch((err) =>
    log.warn({ claim: r.claim, commit, err: errorMessage(err) }, "posting the commit status failed"),
  );
}
