/**
 * Objects and signing helpers shared by the gateway's tests and benchmark: one GitProvider of
 * every type with a GitTarget, plus an intake-enabled target.
 */
import { createHmac } from "node:crypto";
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { stringify } from "yaml";
import type { CatalogObjects, SecretData } from "../../gateway/catalog.js";
import { hookPath } from "../../gateway/verify.js";
import { API_VERSION, type GitProvider, type GitTarget } from "../../queue/crds/index.js";

export const NS = "apps";

export const SECRETS = {
  github: "gh-webhook-token",
  gitea: "gitea-webhook-token",
  gitlab: "gitlab-webhook-token",
  generic: "generic-webhook-token",
  vector: "It's a Secret to Everybody",
  intakeToken: "intake-bearer-token",
  intakeHmac: "intake-hmac-key",
} as const;

function provider(
  name: string,
  type: GitProvider["spec"]["type"],
  url: string,
  extra: Partial<GitProvider["spec"]> = {},
): GitProvider {
  return {
    apiVersion: API_VERSION,
    kind: "GitProvider",
    metadata: { name, namespace: NS },
    spec: { url, type, allowSha1Signature: false, webhookSecretRef: { name: `${name}-webhook` }, ...extra },
  };
}

function target(
  name: string,
  providerName: string,
  branch: string,
  extra: Partial<GitTarget["spec"]> = {},
): GitTarget {
  return {
    apiVersion: API_VERSION,
    kind: "GitTarget",
    metadata: { name, namespace: NS, uid: `uid-${name}` },
    spec: {
      providerRef: { name: providerName },
      branch,
      path: `clusters/${name}`,
      onRefusal: "Ignore",
      ...extra,
    },
  };
}

const secret = (name: string, data: Record<string, string>): SecretData => ({ namespace: NS, name, data });

export const URLS = {
  github: "https://github.com/Codertocat/Hello-World.git",
  gitea: "http://gitea.local:3000/team/app.git",
  gitlab: "https://gitlab.example.com/group/app.git",
  generic: "https://git.example.com/acme/infra.git",
  vector: "https://github.com/acme/vector",
} as const;

export function fixtureObjects(): CatalogObjects {
  return {
    providers: [
      provider("github", "github", URLS.github),
      provider("gitea", "gitea", URLS.gitea),
      provider("gitlab", "gitlab", URLS.gitlab),
      provider("generic", "generic-hmac", URLS.generic),
      provider("vector", "github", URLS.vector),
      provider("legacy", "github", URLS.github, { allowSha1Signature: true }),
      provider("nosecret", "github", "https://github.com/acme/missing"),
    ],
    targets: [
      target("hello", "github", "master"),
      target("gitea-app", "gitea", "main"),
      target("gitlab-app", "gitlab", "main"),
      target("infra", "generic", "main", { intakeSecretRef: { name: "infra-intake" } }),
    ],
    secrets: [
      secret("github-webhook", { token: SECRETS.github }),
      secret("gitea-webhook", { token: SECRETS.gitea }),
      secret("gitlab-webhook", { token: SECRETS.gitlab }),
      secret("generic-webhook", { token: SECRETS.generic }),
      secret("vector-webhook", { token: SECRETS.vector }),
      secret("legacy-webhook", { token: "legacy-token" }),
      secret("infra-intake", { token: SECRETS.intakeToken, hmacKey: SECRETS.intakeHmac }),
    ],
  };
}

export const pathOf = (token: string, name: string) => hookPath(token, name, NS);

export function hmacHex(algo: "sha1" | "sha256" | "sha512", secret: string, body: string | Buffer): string {
  return createHmac(algo, secret).update(body).digest("hex");
}

/** GitHub's recorded push payloads from @octokit/webhooks-examples. */
export function githubPushExamples(): Record<string, any>[] {
  const require = createRequire(import.meta.url);
  const file = require.resolve("@octokit/webhooks-examples/api.github.com/index.json");
  const defs = JSON.parse(readFileSync(file, "utf8")) as { name: string; examples: Record<string, any>[] }[];
  return defs.find((d) => d.name === "push")!.examples;
}

export function branchPushExample(): Record<string, any> {
  return githubPushExamples().find((e) => String(e.ref).startsWith("refs/heads/"))!;
}

/** A write as a client posts it to the intake: ConfigMap `web` in `namespace` upserted with `data`, by Dev. */
export function webConfigMapWrite(namespace: string, data: Record<string, string>, message?: string) {
  return {
    changes: [
      {
        op: "upsert",
        object: { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "web", namespace }, data },
      },
    ],
    author: { name: "Dev", email: "dev@example.com" },
    ...(message === undefined ? {} : { message }),
  };
}

/**
 * The recorded branch push, signed for the fixture's github receiver, as a request to inject:
 * `delivery` is its X-GitHub-Delivery id.
 */
export function signedGithubPush(delivery: string) {
  const body = JSON.stringify(branchPushExample());
  return {
    method: "POST" as const,
    url: pathOf(SECRETS.github, "github"),
    headers: {
      "content-type": "application/json",
      "x-github-event": "push",
      "x-github-delivery": delivery,
      "x-hub-signature-256": `sha256=${hmacHex("sha256", SECRETS.github, body)}`,
    },
    payload: body,
  };
}

/** The fixture objects as a multi-document YAML file, Secrets with base64 `data`. */
export function fixtureYaml(objects: CatalogObjects = fixtureObjects()): string {
  const docs: unknown[] = [
    ...objects.secrets.map((s) => ({
      apiVersion: "v1",
      kind: "Secret",
      metadata: { name: s.name, namespace: s.namespace },
      data: Object.fromEntries(
        Object.entries(s.data).map(([k, v]) => [k, Buffer.from(v).toString("base64")]),
      ),
    })),
    ...objects.providers,
    ...objects.targets,
  ];
  return docs.map((d) => stringify(d)).join("---\n");
}
