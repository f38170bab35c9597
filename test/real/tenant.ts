// A tenant's objects on the real control plane, as a namespace's owner writes them (YAML, one
// object each; join them with `---`): the Secrets, GitProvider and GitTarget of a repository's
// folder, the consent of an applier's namespace, a claim, a team's webhook applier.
import { randomBytes } from "node:crypto";
import type { CustomObjectsApi } from "@kubernetes/client-node";
import { DEPLOYER_FIELD_MANAGER } from "../playground/deployer.js";

export const API = "applygate.dev/v1alpha1";

export const secretYaml = (ns: string, name: string, data: Record<string, string>) => `apiVersion: v1
kind: Secret
metadata: {name: ${name}, namespace: ${ns}}
stringData: {${Object.entries(data)
  .map(([k, v]) => `${k}: ${v}`)
  .join(", ")}}
`;

/** The receiver path the gateway wrote on GitProvider `repo` of `ns`; undefined until it did. */
export async function webhookPathOf(custom: CustomObjectsApi, ns: string): Promise<string | undefined> {
  const p = (await custom.getNamespacedCustomObject({
    group: "applygate.dev",
    version: "v1alpha1",
    plural: "gitproviders",
    namespace: ns,
    name: "repo",
  })) as { status?: { webhookPath?: string } };
  return p.status?.webhookPath;
}

/**
 * The kubectl arguments of the RoleBindings by which namespace `ns` lets applygate read its
 * Secrets (docs/install.md step 4): the gateway the webhook and intake secrets, the worker the
 * push credentials.
 */
export const secretAccessBindings = (ns: string): string[][] =>
  [
    ["applygate-secret-reader", "applygate-gateway"],
    ["applygate-secret-watcher", "applygate-worker"],
  ].map(([role, sa]) => [
    "-n",
    ns,
    "create",
    "rolebinding",
    role as string,
    `--clusterrole=${role}`,
    `--serviceaccount=applygate-system:${sa}`,
  ]);

/** GitProvider `repo` of type gitea, its webhook secret in Secret `hook`. */
export const gitProviderYaml = (ns: string, repoUrl: string) => `apiVersion: ${API}
kind: GitProvider
metadata: {name: repo, namespace: ${ns}}
spec: {url: "${repoUrl}", type: gitea, webhookSecretRef: {name: hook}}
`;

/** A GitTarget on `folder` of main; `intake`: its intake token in Secret `intake`, a 1 s window. */
export const gitTargetYaml = (
  ns: string,
  o: { name: string; folder: string; claim: { kind: string; name: string }; intake?: boolean },
) => `apiVersion: ${API}
kind: GitTarget
metadata: {name: ${o.name}, namespace: ${ns}}
spec:
  providerRef: {name: repo}
  branch: main
  path: ${o.folder}
  claimRef: {kind: ${o.claim.kind}, name: ${o.claim.name}}
${o.intake ? "  intakeSecretRef: {name: intake}\n  commitWindow: {idleSeconds: 1, maxSeconds: 10}\n" : ""}`;

/** The applier namespace's consent that claims of `from` hold its applier `name`. */
export const applierGrantYaml = (
  applierNamespace: string,
  o: { from: string; kind: string; name: string },
) => `apiVersion: ${API}
kind: ApplierGrant
metadata: {name: ${o.from}, namespace: ${applierNamespace}}
spec:
  from: [{namespace: ${o.from}, kind: ${o.kind}}]
  to: [{name: ${o.name}}]
`;

/** ApplierGrant and claim `web` of `ns` holding the applier named `ns` in `applierNamespace`. */
export const heldYaml = (ns: string, applierNamespace: string, claim: "FluxClaim" | "ArgoCDClaim") =>
  `${applierGrantYaml(applierNamespace, { from: ns, kind: claim, name: ns })}---
apiVersion: ${API}
kind: ${claim}
metadata: {name: web, namespace: ${ns}}
spec: {${claim === "FluxClaim" ? "kustomizationRef" : "applicationRef"}: {name: ${ns}, namespace: ${applierNamespace}}}
`;

/** A webhook team's secrets: the push webhook's token, the intake API's, the deployer's HMAC key. */
export const teamTokens = () => ({
  hookToken: randomBytes(16).toString("hex"),
  intakeToken: randomBytes(16).toString("hex"),
  hmacKey: randomBytes(16).toString("hex"),
});

/**
 * A team's webhook applier, as its namespace editor writes it: the Secrets of `teamTokens`,
 * GitProvider `repo`, WebhookClaim `deployer` calling `deployerUrl` (completion by callback, the
 * deployer's field manager its own) and GitTarget `web` on `folder`.
 */
export const webhookTeamYaml = (
  ns: string,
  o: { repoUrl: string; folder: string; deployerUrl: string } & ReturnType<typeof teamTokens>,
) =>
  [
    secretYaml(ns, "hook", { token: o.hookToken }),
    secretYaml(ns, "intake", { token: o.intakeToken }),
    secretYaml(ns, "deployer-hmac", { hmacKey: o.hmacKey }),
    gitProviderYaml(ns, o.repoUrl),
    `apiVersion: ${API}
kind: WebhookClaim
metadata: {name: deployer, namespace: ${ns}}
spec:
  url: ${o.deployerUrl}
  insecure: true
  secretRef: {name: deployer-hmac}
  signature: generic-hmac
  completion: {mode: callback, budgetSeconds: 60}
  fieldManagers: [${DEPLOYER_FIELD_MANAGER}]
`,
    gitTargetYaml(ns, {
      name: "web",
      folder: o.folder,
      claim: { kind: "WebhookClaim", name: "deployer" },
      intake: true,
    }),
  ].join("---\n");
