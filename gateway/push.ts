/**
 * Turns a verified delivery into what the gateway does with it: answer a ping, ignore a tag or
 * another ref, or build a branch push. Pure: headers and parsed payload in, a decision out.
 */
import type { EmitterWebhookEvent } from "@octokit/webhooks";
import { normalizeRepoUrl, remembered } from "../queue/contract.js";
import type { GitProviderType } from "../queue/crds/index.js";
import { type Headers, header } from "./verify.js";

export type DeliveryEvent = "push" | "ping" | "other";

/** Which event a delivery carries, from the headers each host sends. */
export function deliveryEvent(type: GitProviderType, headers: Headers): DeliveryEvent {
  const name = (() => {
    switch (type) {
      case "github":
        return header(headers, "x-github-event") ?? header(headers, "x-gitea-event");
      case "gitea":
        return header(headers, "x-gitea-event") ?? header(headers, "x-github-event");
      case "gitlab":
        return header(headers, "x-gitlab-event") === "Push Hook" ? "push" : "other";
      case "generic-hmac": {
        // A generic sender may say nothing; a GitHub-shaped one may say ping.
        const e = header(headers, "x-github-event") ?? header(headers, "x-gitea-event");
        return e ?? "push";
      }
    }
  })();
  const lower = name?.toLowerCase();
  return lower === "push" ? "push" : lower === "ping" ? "ping" : "other";
}

/** The delivery id the host gave, used to make a redelivery idempotent. */
export function deliveryIdOf(headers: Headers): string | undefined {
  return (
    header(headers, "x-github-delivery") ??
    header(headers, "x-gitea-delivery") ??
    header(headers, "x-gitlab-event-uuid") ??
    header(headers, "x-gitlab-webhook-uuid") ??
    header(headers, "x-delivery-id") ??
    header(headers, "x-request-id")
  );
}

/** Reads the JSON payload: the raw JSON body, or the `payload` field of a form-encoded one. */
export function parsePayload(body: Buffer, contentType: string | undefined): unknown {
  const mime = (contentType ?? "").split(";")[0]!.trim().toLowerCase();
  let text: string;
  if (mime === "application/x-www-form-urlencoded") {
    const payload = new URLSearchParams(body.toString("utf8")).get("payload");
    if (payload === null) return undefined;
    text = payload;
  } else if (mime === "application/json" || mime === "" || mime.endsWith("+json")) {
    text = body.toString("utf8");
  } else {
    return undefined;
  }
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}

export type PushReading =
  | {
      kind: "branch";
      repository: string[];
      branch: string;
      before: string;
      after: string;
      deleted: boolean;
      forced: boolean;
    }
  | { kind: "other-ref"; ref: string }
  | { kind: "invalid"; reason: string };

const ZERO = /^0+$/;
const SHA = /^[0-9a-f]{40}([0-9a-f]{24})?$/;

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === "object" && v !== null && !Array.isArray(v);
const str = (v: unknown): string | undefined => (typeof v === "string" && v.length > 0 ? v : undefined);

/**
 * GitHub's push payload as @octokit/webhooks types it. The fields read from a GitHub or Gitea push
 * (Gitea sends the same) are named through it, so a misspelt or renamed field fails to compile;
 * the values are still checked, as any sender may put anything there.
 */
type GitHubPush = EmitterWebhookEvent<"push">["payload"];
const pushField = (payload: Obj, field: keyof GitHubPush): unknown => payload[field];
const GITHUB_REPOSITORY_URLS: readonly (keyof GitHubPush["repository"])[] = [
  "clone_url",
  "html_url",
  "ssh_url",
  "git_url",
  "url",
];

/** The fields of a `repository` or `project` object that may hold its URL, on any host. */
const REPOSITORY_URL_FIELDS: readonly string[] = [
  ...GITHUB_REPOSITORY_URLS,
  "git_http_url",
  "git_ssh_url",
  "web_url",
  "http_url",
  "homepage",
];

/**
 * normalizeRepoUrl, null for what is not a URL (a host may report a bare name; other fields
 * identify the repository), remembered (every push of a repository carries the same few URLs).
 */
const normalisedOnce = remembered((url: string): string | null => {
  try {
    return normalizeRepoUrl(url);
  } catch {
    return null;
  }
});

/** Every URL a host reports for the repository, normalised and without duplicates. */
function repositoryUrls(payload: Obj): string[] {
  const candidates: unknown[] = [];
  for (const key of ["repository", "project"]) {
    const r = payload[key];
    if (typeof r === "string") candidates.push(r);
    else if (isObj(r)) {
      for (const f of REPOSITORY_URL_FIELDS) candidates.push(r[f]);
    }
  }
  const out = new Set<string>();
  for (const c of candidates) {
    const s = str(c);
    if (!s || s.length > 2048) continue;
    const n = normalisedOnce(s);
    if (n !== null) out.add(n);
  }
  return [...out];
}

/**
 * Reads a push payload of any supported host: GitHub and Gitea (`ref`, `before`, `after`,
 * `deleted`, `forced`, `repository.*_url`), GitLab (`ref`, `project.git_http_url`, ...), and the
 * generic `{repository, branch, after}`.
 */
export function readPush(payload: unknown): PushReading {
  if (!isObj(payload)) return { kind: "invalid", reason: "payload is not an object" };
  let branch: string | undefined;
  const ref = str(pushField(payload, "ref"));
  if (ref !== undefined) {
    if (!ref.startsWith("refs/heads/")) return { kind: "other-ref", ref };
    branch = ref.slice("refs/heads/".length);
  } else {
    branch = str(payload.branch);
    if (branch?.startsWith("refs/")) {
      if (!branch.startsWith("refs/heads/")) return { kind: "other-ref", ref: branch };
      branch = branch.slice("refs/heads/".length);
    }
  }
  if (!branch) return { kind: "invalid", reason: "no branch ref" };
  const after = str(pushField(payload, "after"))?.toLowerCase();
  if (!after || !SHA.test(after)) return { kind: "invalid", reason: "after is not a commit id" };
  const before = str(pushField(payload, "before"))?.toLowerCase() ?? "";
  if (before !== "" && !SHA.test(before)) return { kind: "invalid", reason: "before is not a commit id" };
  const repository = repositoryUrls(payload);
  if (repository.length === 0) return { kind: "invalid", reason: "no repository URL" };
  return {
    kind: "branch",
    repository,
    branch,
    before,
    after,
    deleted: pushField(payload, "deleted") === true || ZERO.test(after),
    forced: pushField(payload, "forced") === true,
  };
}
