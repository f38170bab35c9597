/**
 * Commit statuses on the Git host, read for approval: a named status context is `success` for a
 * commit. GitHub and Gitea answer the same question at the same path (the combined status of a
 * ref: the latest status per context), GitHub under its API host (`https://api.github.com`, or
 * `<host>/api/v3` for GitHub Enterprise), Gitea under `<host>/api/v1`; GitHub names a status's
 * state `state`, Gitea `status`. Where the API is, and which repository, is the GitProvider's to
 * say (derived from its clone URL, or its own `spec.commitStatus`), never a claim's or a
 * GitTarget's: its token goes there, and only to the provider's own origins
 * (queue/git/credentials.ts).
 */
import type { CommitStatusApi } from "../crds/governance.js";
import { type CredentialPolicy, credentialRefusal, providerOrigins } from "./credentials.js";

export type { CommitStatusApi };

export type StatusState = "success" | "pending" | "failure" | "error" | "missing";

/** What a GitProvider says of its commit-status API: its clone URL and its `spec.commitStatus`. */
export interface StatusEndpoint {
  url: string;
  commitStatus?: { apiURL?: string | undefined; repository?: string | undefined } | undefined;
}

/** The repository's API base, from the provider's clone URL or its own settings, e.g. `…/repos/team/apps`. */
export function repoApiBase(provider: StatusEndpoint, api: CommitStatusApi): string {
  const u = new URL(provider.url);
  const path = u.pathname
    .replace(/^\/+/, "")
    .replace(/\.git$/, "")
    .replace(/\/+$/, "");
  const apiURL = provider.commitStatus?.apiURL;
  const [owner, repo] = (provider.commitStatus?.repository ?? path).split("/").slice(-2);
  if (!owner || !repo) throw new Error(`cannot tell owner and repository from ${provider.url}`);
  const root = apiURL
    ? apiURL.replace(/\/+$/, "")
    : api === "gitea"
      ? `${u.origin}${pathPrefix(u.pathname, 2)}/api/v1`
      : u.host === "github.com"
        ? "https://api.github.com"
        : `${u.origin}/api/v3`;
  return `${root}/repos/${encodeURIComponent(owner)}/${encodeURIComponent(repo)}`;
}

/** The path before the last `n` segments (a Gitea served under a sub-path). */
function pathPrefix(pathname: string, n: number): string {
  const segs = pathname.split("/").filter(Boolean);
  return segs.length > n ? `/${segs.slice(0, -n).join("/")}` : "";
}

/** A GitProvider's token, bound to the origins it may be sent to. */
export interface StatusCredential {
  token: string;
  origins: readonly string[];
  allowHttp?: boolean;
}

/** How to reach a provider's commit-status API: its base and its token, bound to its own origins. */
export function statusAccess(
  provider: StatusEndpoint,
  api: CommitStatusApi,
  token: string | undefined,
  policy: CredentialPolicy = {},
): Pick<StatusReadOptions, "api" | "base" | "credential"> {
  return {
    api,
    base: repoApiBase(provider, api),
    ...(token
      ? {
          credential: {
            token,
            origins: providerOrigins(provider),
            ...(policy.allowHttp ? { allowHttp: true } : {}),
          },
        }
      : {}),
  };
}

export interface StatusReadOptions {
  api: CommitStatusApi;
  base: string;
  /** Sent only to its origins, and not over a redirect (a 3xx answer is an error). */
  credential?: StatusCredential | undefined;
  timeoutMs?: number;
  fetch?: typeof fetch;
}

/**
 * The headers of a call to `url` with the credential, checked first: a destination the credential
 * may not go to ends the call before any connection.
 */
function headersFor(
  o: StatusReadOptions,
  url: string,
  extra: Record<string, string> = {},
): Record<string, string> {
  const headers: Record<string, string> =
    o.api === "github"
      ? { accept: "application/vnd.github+json", "x-github-api-version": "2022-11-28", ...extra }
      : { accept: "application/json", ...extra };
  const c = o.credential;
  if (!c) return headers;
  const refused = credentialRefusal(url, c.origins, { allowHttp: c.allowHttp === true });
  if (refused) throw new Error(refused.message);
  headers.authorization = o.api === "github" ? `Bearer ${c.token}` : `token ${c.token}`;
  return headers;
}

/** The state of `context` on `sha`: the host's latest status of that context, or `missing`. */
export async function readStatusOf(o: StatusReadOptions, sha: string, context: string): Promise<StatusState> {
  const url = `${o.base}/commits/${sha}/status`;
  const res = await (o.fetch ?? fetch)(url, {
    headers: headersFor(o, url),
    redirect: o.credential ? "manual" : "follow",
    signal: AbortSignal.timeout(o.timeoutMs ?? 10_000),
  });
  if (res.status === 404) return "missing";
  if (!res.ok) throw new Error(`commit status of ${sha.slice(0, 12)}: HTTP ${res.status}`);
  const body = (await res.json()) as { statuses?: Array<Record<string, unknown>> };
  const key = o.api === "github" ? "state" : "status";
  const mine = (body.statuses ?? []).filter((s) => s.context === context);
  // Both hosts list the latest per context first; take the first one of the context.
  const state = mine[0]?.[key];
  return state === "success" || state === "pending" || state === "failure" || state === "error"
    ? state
    : mine.length === 0
      ? "missing"
      : "error";
}

export interface StatusPost {
  state: "pending" | "success" | "failure";
  context: string;
  description: string;
}

/** Posts a commit status (`POST <repo>/statuses/{sha}`, the same shape on GitHub and Gitea). */
export async function postStatus(o: StatusReadOptions, sha: string, post: StatusPost): Promise<void> {
  const url = `${o.base}/statuses/${sha}`;
  const res = await (o.fetch ?? fetch)(url, {
    method: "POST",
    headers: headersFor(o, url, { "content-type": "application/json" }),
    redirect: o.credential ? "manual" : "follow",
    body: JSON.stringify({
      state: post.state,
      context: post.context,
      description: post.description.slice(0, 140),
    }),
    signal: AbortSignal.timeout(o.timeoutMs ?? 10_000),
  });
  if (!res.ok) throw new Error(`posting the status of ${sha.slice(0, 12)}: HTTP ${res.status}`);
}

/**
 * The status an operation's report posts for its commit (pure): pending once the apply runs,
 * success or failure at its end; an attempt that started nothing posts nothing. A superseded
 * operation was ended unfinished: its commit was not applied (failure), and says why.
 */
export function statusOfReport(
  phase: string,
  claim: { namespace: string; name: string },
  message?: string,
): StatusPost | undefined {
  const context = `applygate/${claim.namespace}/${claim.name}`;
  if (phase === "Running") return { state: "pending", context, description: "applying" };
  if (phase === "Succeeded") return { state: "success", context, description: message ?? "applied" };
  if (phase === "Failed") return { state: "failure", context, description: message ?? "the apply failed" };
  if (phase === "Superseded")
    return { state: "failure", context, description: "not applied: a newer commit superseded it" };
  return undefined;
}
