// The simulated API server's fidelity facts (test/cluster/apiserver/fidelity-facts.ts) against a
// real kube-apiserver and etcd: the same test bodies the simulator passes in the default suite. A
// difference is the simulator's to fix (test/real/RESULTS.md lists those found).
import { describeFidelityFacts } from "../cluster/apiserver/fidelity-facts.js";
import { CONTROL_PLANE, findRealBinaries } from "./binaries.js";
import { startRealCluster } from "./cluster.js";

const bins = findRealBinaries(CONTROL_PLANE);
if (!bins.built) console.warn(`\n!!! SKIPPED test/real/apiserver-fidelity.real.test.ts: ${bins.message}\n`);

describeFidelityFacts({
  backend: "real",
  skip: !bins.built,
  timeoutMs: 30_000,
  start: async () => {
    const cluster = await startRealCluster();
    return {
      url: cluster.server,
      ca: cluster.caPem,
      token: cluster.adminToken,
      auditLogPath: cluster.auditLogPath,
      // kube-apiserver serves watches from its watch cache, which keeps every change since it
      // started (etcd's compaction does not shorten it; age and size do, after minutes): a
      // restart begins it anew at etcd's current revision, which puts `recent` out of it.
      expiredResourceVersion: async (recent) => {
        await cluster.restartApiServer();
        return recent;
      },
      stop: () => cluster.stop(),
    };
  },
});
