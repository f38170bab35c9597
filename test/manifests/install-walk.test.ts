// docs/install.md walked against the simulated API server (test bodies in install-walk.ts; the
// real kube-apiserver walks the same in test/real/install-walk.real.test.ts).
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startApiServer } from "../cluster/apiserver/index.js";
import { describeInstallWalk } from "./install-walk.js";

describeInstallWalk({
  name: "the simulated cluster",
  async start() {
    const server = await startApiServer();
    const dir = await mkdtemp(join(tmpdir(), "install-walk-sim-"));
    const kubeconfig = join(dir, "kubeconfig");
    await server.writeKubeconfig(kubeconfig);
    return {
      kubeconfig,
      async stop() {
        await server.close();
        await rm(dir, { recursive: true, force: true });
      },
    };
  },
});
