// docs/install.md walked against the real kube-apiserver (test/real/cluster.ts), with the same
// test bodies as against the simulated one (test/manifests/install-walk.ts).
import { describeInstallWalk } from "../manifests/install-walk.js";
import { CONTROL_PLANE, findRealBinaries } from "./binaries.js";
import { startRealCluster } from "./cluster.js";

const bins = findRealBinaries(CONTROL_PLANE);
if (!bins.built) console.warn(`\n!!! SKIPPED test/real/install-walk.real.test.ts: ${bins.message}\n`);
else
  describeInstallWalk({
    name: "the real kube-apiserver",
    async start() {
      const cluster = await startRealCluster();
      return { kubeconfig: cluster.kubeconfigPath, stop: () => cluster.stop() };
    },
  });
