/** The Flux client's suspend under the shared conflict-retry policy, against the simulated API server's fault hooks. */
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, expect, it } from "vitest";
import { fluxSuspended, Kube } from "../../queue/kube/index.js";
import { silentLogger } from "../../queue/log.js";
import { type ApiServer, startApiServer } from "../../test/cluster/apiserver/index.js";
import { FluxClient } from "./client.js";
import { KUSTOMIZATION } from "./resources.js";

let server: ApiServer;
let kube: Kube;
const NS = "suspend";

beforeAll(async () => {
  server = await startApiServer();
  await server.installCrdFile(
    fileURLToPath(new URL("../../test/cluster/crds/flux-kustomization.yaml", import.meta.url)),
  );
  kube = new Kube(server.kubeConfig());
  await kube.core.createNamespace({ body: { metadata: { name: NS } } });
});
afterAll(async () => {
  await kube?.close();
  await server?.close();
});

it("the Flux suspend rides it through a storm, guarded by the object it re-read", async () => {
  await server.applyYaml(`apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {name: apps, namespace: ${NS}}
spec: {interval: 1h, path: ./apps, prune: true, sourceRef: {kind: GitRepository, name: repo}}
`);
  server.faults.failNext(3, {
    method: "PATCH",
    pathPrefix: `/apis/kustomize.toolkit.fluxcd.io/v1/namespaces/${NS}/kustomizations/apps`,
    status: 409,
  });
  const client = new FluxClient(kube, { log: silentLogger() });
  const out = await client.suspend({ namespace: NS, name: "apps" }, "token-1");
  expect(fluxSuspended(out)).toBe(true);
  const ks = await kube.get(KUSTOMIZATION, NS, "apps");
  expect(ks?.metadata.annotations?.["reconcile.fluxcd.io/requestedAt"]).toBe("token-1");
  expect(await client.suspend({ namespace: NS, name: "absent" }, "token-2")).toBeUndefined();
});

it("a wait's deadline is read on the injected clock, not the wall clock", async () => {
  let now = Date.parse("2026-01-01T00:00:00Z");
  const client = new FluxClient(kube, { log: silentLogger(), pollMs: 20, now: () => new Date(now) });
  let reads = 0;
  const waited = client.until(
    async () => {
      // The clock moves on a minute with each read: the two-minute deadline passes at the third.
      reads++;
      now += 60_000;
      return undefined;
    },
    () => undefined,
    { wakeKey: "src:none/none", deadline: now + 120_000 },
  );
  const started = Date.now();
  expect(await waited).toBeUndefined();
  expect(reads).toBe(2);
  // Two polls of 20 ms, never the two minutes of the wall clock.
  expect(Date.now() - started).toBeLessThan(5_000);
}, 10_000);
