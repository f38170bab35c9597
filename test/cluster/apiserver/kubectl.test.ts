// The kubectl facts (kubectl-facts.ts) against the simulated API server, with the kubectl on PATH
// (skipped with a notice when there is none): the same test bodies test/real/kubectl.real.test.ts
// runs against a real kube-apiserver.
import { execFile } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { startApiServer } from "./index.js";
import { describeKubectlFacts } from "./kubectl-facts.js";

const run = promisify(execFile);

async function hasKubectl(): Promise<boolean> {
  try {
    await run("kubectl", ["version", "--client"]);
    return true;
  } catch {
    return false;
  }
}

const available = await hasKubectl();
if (!available)
  console.warn("kubectl is not installed: skipping the kubectl tests of the simulated API server");

describeKubectlFacts({
  backend: "simulated",
  skip: !available,
  timeoutMs: 30_000,
  start: async () => {
    const server = await startApiServer();
    const dir = await mkdtemp(join(tmpdir(), "apiserver-kubectl-config-"));
    const kubeconfigPath = join(dir, "kubeconfig");
    await server.writeKubeconfig(kubeconfigPath);
    return {
      kubectl: "kubectl",
      kubeconfigPath,
      installCrd: (file) => server.installCrdFile(file),
      // --raw takes a path from the server's root: the token path prefix of the kubeconfig's server
      // (kubectl sends no bearer token over plain HTTP) goes in front of it.
      rawPath: (path) => `/token/${server.token()}${path}`,
      addUser: async (name, rules, into) => {
        server.addUser(
          name,
          `${name}-token`,
          rules.map((r) => ({ verbs: r.verbs, groups: r.apiGroups, resources: r.resources })),
        );
        const path = join(into, name);
        await server.writeKubeconfig(path, name);
        return { user: name, kubeconfigPath: path };
      },
      stop: async () => {
        await server.close();
        await rm(dir, { recursive: true, force: true });
      },
    };
  },
});
