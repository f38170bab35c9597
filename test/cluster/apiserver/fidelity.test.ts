// The fidelity facts (fidelity-facts.ts) against the simulated API server: the same test bodies
// test/real/apiserver-fidelity.real.test.ts runs against a real kube-apiserver.
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describeFidelityFacts } from "./fidelity-facts.js";
import { startApiServer } from "./index.js";

describeFidelityFacts({
  backend: "simulated",
  timeoutMs: 10_000,
  start: async () => {
    const dir = await mkdtemp(join(tmpdir(), "apiserver-fidelity-"));
    const auditLogPath = join(dir, "audit.log");
    const server = await startApiServer({ auditLog: auditLogPath, watchCacheSize: 1000 });
    return {
      url: server.url,
      token: server.token(),
      auditLogPath,
      // Forgets the history: `recent` and everything before it is gone.
      expiredResourceVersion: async (recent) => {
        server.faults.expireHistory();
        return recent;
      },
      stop: async () => {
        await server.close();
        await rm(dir, { recursive: true, force: true });
      },
    };
  },
});
