/** Kubeconfigs for the simulated API server: a client-node KubeConfig, or a YAML file for kubectl. */
import { writeFile } from "node:fs/promises";
import { KubeConfig } from "@kubernetes/client-node";
import { stringify } from "yaml";

export interface Identity {
  server: string;
  user: string;
  token: string;
  namespace?: string;
}

/**
 * client-node 1.4.0 refuses an http:// server unless skipTLSVerify is set (it then uses a plain
 * http.Agent), so the cluster entry carries it even though there is no TLS at all.
 */
export function makeKubeConfig(id: Identity): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: "applygate-sim", server: id.server, skipTLSVerify: true }],
    users: [{ name: id.user, token: id.token }],
    contexts: [
      {
        name: `${id.user}@applygate-sim`,
        cluster: "applygate-sim",
        user: id.user,
        namespace: id.namespace ?? "default",
      },
    ],
    currentContext: `${id.user}@applygate-sim`,
  });
  return kc;
}

/**
 * The same identity as a kubeconfig file, for kubectl and for a process reading a kubeconfig
 * (`applygate status --kubeconfig`). kubectl (client-go) sends no credentials at
 * all to a plain-http server, so the token also travels in the server URL
 * (`http://host:port/token/<token>`), which the simulated server reads as a bearer token.
 */
export function kubeconfigYaml(id: Identity): string {
  return stringify({
    apiVersion: "v1",
    kind: "Config",
    clusters: [
      {
        name: "applygate-sim",
        // client-node, as in makeKubeConfig, reads a file's http:// server only with this set;
        // kubectl ignores it on plain http.
        cluster: {
          server: `${id.server}/token/${encodeURIComponent(id.token)}`,
          "insecure-skip-tls-verify": true,
        },
      },
    ],
    users: [{ name: id.user, user: { token: id.token } }],
    contexts: [
      {
        name: `${id.user}@applygate-sim`,
        context: { cluster: "applygate-sim", user: id.user, namespace: id.namespace ?? "default" },
      },
    ],
    "current-context": `${id.user}@applygate-sim`,
    preferences: {},
  });
}

export async function writeKubeconfigFile(path: string, id: Identity): Promise<void> {
  await writeFile(path, kubeconfigYaml(id), { mode: 0o600 });
}
