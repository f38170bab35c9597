/**
 * What one sync costs the API server in claim reads: the Argo CD executor reads the claim once,
 * for the record, and writes every later phase (Running, the end) from the answer to the write
 * before. Reads of the Application while following depend on how long the sync runs (it is polled),
 * so only the claim's requests are bounded here; `npm run bench -- argocd` counts the rest.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Kube } from "../../queue/kube/index.js";
import { ArgoCDExecutor } from "../../sidecar/argocd/executor.js";
import { unrecordedChecks } from "../support/safety-checks.js";
import { type Cluster, cm, type Repo, recorder, startCluster } from "./harness.js";

let c: Cluster;
let repo: Repo;
beforeAll(async () => {
  c = await startCluster();
  await c.startArgo();
  repo = await c.repo();
});
afterAll(async () => {
  await c?.close();
});

describe("the claim requests of one Argo CD sync", () => {
  it("one read of the claim and one write per phase, the standing recheck apart", async () => {
    const name = "counted";
    const ns = await c.namespace(`ns-${name}`);
    await c.createApp(name, repo, {
      destination: { server: "https://kubernetes.default.svc", namespace: ns },
      syncPolicy: { automated: { enabled: false, prune: true } },
    });
    await c.createClaim(name, name);
    await c.markHeld(name);
    const user = "count-argocd";
    c.api.addUser(user, `token-${user}`, "all");
    const kube = new Kube(c.api.kubeConfig(user));
    try {
      const executor = new ArgoCDExecutor({
        kube,
        log: c.log,
        events: c.events,
        now: () => new Date(),
        options: { pollMs: 50 },
        // The standing recheck reads the claim uncached by rule: under another user, not counted.
        checks: unrecordedChecks(c.kube),
      });
      for (let i = 0; i < 2; i++) {
        const [commit] = (await repo.pushAll([["cm.yaml", cm("settings", `n${i}`)]])) as [string];
        const r = recorder();
        const trace = c.api.traceRequests(user);
        await executor.execute(
          c.attempt(name, name, commit, `count-${i}`),
          r.report,
          new AbortController().signal,
        );
        trace.stop();
        expect(r.phases().at(-1)).toBe("Succeeded");
        const claim = trace.requests.filter((q) => q.includes("/argocdclaims/"));
        expect(
          claim.filter((q) => q.startsWith("GET ")),
          claim.join("\n"),
        ).toHaveLength(1);
        // Record, Running, completion.
        expect(
          claim.filter((q) => q.startsWith("PATCH")),
          claim.join("\n"),
        ).toHaveLength(3);
      }
    } finally {
      await kube.close();
    }
  });
});
