/**
 * What `applygate status` reads: GitTargets and the claims they name from the API server, as the
 * kubeconfig's identity may (a namespace viewer is enough), and from Redis the decision state and
 * the inbox of each branch those GitTargets write (where that information lives only). Nothing is
 * written. Only what the identity may read is asked of Redis' answers: a branch's decision state
 * holds other tenants' GitTargets too, and the report keeps only those the API server showed.
 */
import type { Redis } from "ioredis";
import type { DecisionState } from "../decide/index.js";
import { errorMessage } from "../errors.js";
import { branchKeys, knownBranchesKey } from "../keys.js";
import { claimTypeOf, type KObject, Kube, RESOURCES, targetField } from "../kube/index.js";
import { connectRedis } from "../redis.js";
import { compareEntryIds } from "../worker/inbox.js";

/** A claim as read, or why it could not be (403: the identity may not read it; 404: none). */
export type ClaimRead = { object: KObject } | { error: string; code?: number };

export interface ClusterView {
  /** The namespaces listed; "all" with `-A`. */
  scope: string[] | "all";
  targets: KObject[];
  /** By `Kind/namespace/name` (the decision core's claim key). */
  claims: Record<string, ClaimRead>;
}

/** An inbox's entries by kind; the writes per GitTarget (`namespace/name`), oldest first. */
export interface InboxView {
  entries: number;
  byKind: Record<string, number>;
  writesByTarget: Record<string, string[]>;
  /** More entries than were read. */
  truncated: boolean;
}

export interface BranchView {
  key: string;
  state: DecisionState;
  inbox: InboxView;
  /** The intake gate of the branch (`branchKeys(…).intake`). */
  intake: { paused: boolean; retrying: boolean; chargedBytes: number; budgetBytes?: number };
}

export type DecisionsView = { branches: BranchView[] } | { unread: string };

/** Entries of one inbox read at most (a branch holds every write not yet published). */
export const INBOX_READ_LIMIT = 10_000;

const claimKeyOf = (kind: string, namespace: string, name: string) => `${kind}/${namespace}/${name}`;

/** The claim a GitTarget names, as the decision core keys it; undefined when it names none. */
export function targetClaimKey(t: KObject): string | undefined {
  const ref = targetField(t, "claimRef");
  if (!ref) return undefined;
  return claimKeyOf(ref.kind, ref.namespace ?? t.metadata.namespace ?? "default", ref.name);
}

/** Lists the GitTargets of the scope and reads every claim they name. */
export async function readCluster(kube: Kube, scope: string[] | "all"): Promise<ClusterView> {
  const targets: KObject[] = [];
  if (scope === "all") targets.push(...(await kube.list(RESOURCES.gitTarget)).items);
  else for (const ns of scope) targets.push(...(await kube.list(RESOURCES.gitTarget, ns)).items);
  const claims: Record<string, ClaimRead> = {};
  for (const t of targets) {
    const key = targetClaimKey(t);
    if (!key || key in claims) continue;
    const [kind, namespace, name] = key.split("/") as [string, string, string];
    if (kind !== "FluxClaim" && kind !== "ArgoCDClaim" && kind !== "WebhookClaim") {
      claims[key] = { error: `unknown claim kind ${kind}` };
      continue;
    }
    try {
      const object = await kube.get(claimTypeOf(kind), namespace, name);
      claims[key] = object ? { object } : { error: "not found", code: 404 };
    } catch (err) {
      const e = err as { code?: number; message?: string };
      claims[key] = {
        error: e.code === 403 ? "forbidden: this identity may not read it" : String(e.message ?? err),
        ...(e.code !== undefined ? { code: e.code } : {}),
      };
    }
  }
  return { scope, targets, claims };
}

async function readInbox(redis: Redis, key: string): Promise<InboxView> {
  const rows = (await redis.xrange(key, "-", "+", "COUNT", INBOX_READ_LIMIT)) as [string, string[]][];
  const entries = await redis.xlen(key);
  const byKind: Record<string, number> = {};
  const writesByTarget: Record<string, string[]> = {};
  for (const [id, fields] of rows) {
    const f: Record<string, string> = {};
    for (let i = 0; i + 1 < fields.length; i += 2) f[fields[i] as string] = fields[i + 1] as string;
    const kind = f.kind ?? "write";
    byKind[kind] = (byKind[kind] ?? 0) + 1;
    if (kind !== "write") continue;
    try {
      const w = JSON.parse(f.data ?? "") as { target?: { namespace?: string; name?: string } };
      if (!w.target?.namespace || !w.target.name) continue;
      const t = `${w.target.namespace}/${w.target.name}`;
      (writesByTarget[t] ??= []).push(id);
    } catch {
      // an unreadable entry is the worker's to settle; it still counts in the depth
    }
  }
  for (const ids of Object.values(writesByTarget)) ids.sort(compareEntryIds);
  return { entries, byKind, writesByTarget, truncated: entries > rows.length };
}

/**
 * The decision state of every branch holding one of `uids`, with its inbox and intake gate. The
 * branches are found from the set of branches that ever had work, so a GitTarget is found however
 * its branch is keyed and whether or not its GitProvider is readable to this identity.
 */
export async function readDecisions(redis: Redis, prefix: string, uids: Set<string>): Promise<BranchView[]> {
  const keys = (await redis.smembers(knownBranchesKey(prefix))).sort();
  if (keys.length === 0 || uids.size === 0) return [];
  const raws = await redis.mget(...keys.map((k) => branchKeys(prefix, k).decisions));
  const out: BranchView[] = [];
  for (const [i, key] of keys.entries()) {
    const raw = raws[i];
    if (!raw) continue;
    let state: DecisionState;
    try {
      state = JSON.parse(raw) as DecisionState;
    } catch {
      continue;
    }
    if (!Object.keys(state.targets ?? {}).some((uid) => uids.has(uid))) continue;
    const k = branchKeys(prefix, key);
    const [inbox, intake] = await Promise.all([readInbox(redis, k.inbox), redis.hgetall(k.intake)]);
    const budget = Number(intake.budget);
    out.push({
      key,
      state,
      inbox,
      intake: {
        paused: intake.paused === "1",
        retrying: intake.retrying === "1",
        chargedBytes: Number(intake.charged ?? 0) || 0,
        ...(Number.isFinite(budget) && intake.budget !== undefined ? { budgetBytes: budget } : {}),
      },
    });
  }
  return out;
}

/** A Redis connection for one command: it gives up after a few tries instead of waiting for ever. */
export function cliRedis(url: string): Redis {
  return connectRedis(url, {
    maxRetriesPerRequest: 1,
    connectTimeout: 3_000,
    retryStrategy: (times) => (times > 2 ? null : 200),
  });
}

/** Reads the decisions, or says in one line why they could not be read. */
export async function readDecisionsView(
  redis: Redis | undefined,
  prefix: string,
  uids: Set<string>,
  why: string,
): Promise<DecisionsView> {
  if (!redis) return { unread: why };
  try {
    return { branches: await readDecisions(redis, prefix, uids) };
  } catch (err) {
    return { unread: `Redis did not answer: ${errorMessage(err)}` };
  }
}

export { Kube };
