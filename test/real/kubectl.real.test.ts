// The kubectl facts (test/cluster/apiserver/kubectl-facts.ts) with the real kubectl against a real
// kube-apiserver and etcd: the same test bodies the simulator passes in the default suite with the
// kubectl on PATH. A difference is the simulator's to fix (test/real/RESULTS.md lists those found).
import { execFile } from "node:child_process";
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import { stringify } from "yaml";
import { describeKubectlFacts } from "../cluster/apiserver/kubectl-facts.js";
import { until } from "../support/wait.js";
import { CONTROL_PLANE, findRealBinaries } from "./binaries.js";
import { kubeconfigYaml, startRealCluster } from "./cluster.js";

const run = promisify(execFile);
const bins = findRealBinaries([...CONTROL_PLANE, "kubectl"]);
if (!bins.built) console.warn(`\n!!! SKIPPED test/real/kubectl.real.test.ts: ${bins.message}\n`);

describeKubectlFacts({
  backend: "real",
  skip: !bins.built,
  timeoutMs: 60_000,
  start: async () => {
    if (!bins.built) throw new Error(bins.message);
    const kubectl = bins.path("kubectl");
    const cluster = await startRealCluster();
    const k = (...args: string[]) => run(kubectl, ["--kubeconfig", cluster.kubeconfigPath, ...args]);
    return {
      kubectl,
      kubeconfigPath: cluster.kubeconfigPath,
      installCrd: async (file) => {
        await k("apply", "-f", file);
        const { stdout: name } = await k("get", "-f", file, "-o", "name");
        await k("wait", "--for=condition=Established", name.trim(), "--timeout=60s");
        // A new kind answers 429 "storage is (re)initializing" to lists for a few seconds.
        const plural = name.trim().replace(/^customresourcedefinition\.apiextensions\.k8s\.io\//, "");
        await until(() => k("get", plural, "-A").then(() => true), `${plural} to be listable`, {
          timeoutMs: 60_000,
          everyMs: 250,
          retryErrors: true,
        });
      },
      rawPath: (path) => path,
      // A ServiceAccount bound to a ClusterRole of `rules`, with a token from TokenRequest: the
      // real server has no users but its static token file's.
      addUser: async (name, rules, into) => {
        const manifest = [
          { apiVersion: "v1", kind: "ServiceAccount", metadata: { name, namespace: "default" } },
          { apiVersion: "rbac.authorization.k8s.io/v1", kind: "ClusterRole", metadata: { name }, rules },
          {
            apiVersion: "rbac.authorization.k8s.io/v1",
            kind: "ClusterRoleBinding",
            metadata: { name },
            roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name },
            subjects: [{ kind: "ServiceAccount", name, namespace: "default" }],
          },
        ]
          .map((o) => stringify(o))
          .join("---\n");
        const file = join(into, `${name}-rbac.yaml`);
        await writeFile(file, manifest);
        await k("apply", "-f", file);
        const { stdout: token } = await k("-n", "default", "create", "token", name);
        const path = join(into, name);
        await writeFile(path, kubeconfigYaml(cluster.server, cluster.caPem, name, token.trim()), {
          mode: 0o600,
        });
        return { user: `system:serviceaccount:default:${name}`, kubeconfigPath: path };
      },
      stop: () => cluster.stop(),
    };
  },
});
