/**
 * The conflict-retry policy against the simulated API server's fault hooks: a storm of 409s on a
 * guarded write resolves by re-reading, past the bound it fails with an error naming the write,
 * and the worker's claim status patch rides it (the Flux suspend's case is in sidecar/flux/).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ApiServer, startApiServer } from "../../test/cluster/apiserver/index.js";
import { KubeObjects } from "../apply/kube-objects.js";
import { crdFiles } from "../crds/files.js";
import { silentLogger } from "../log.js";
import { ConflictRetriesExhausted, type KObject, Kube, RESOURCES, retryOnConflict } from "./index.js";

let server: ApiServer;
let kube: Kube;
const NS = "retry";
const noSleep = { sleep: async () => {} };
const statusPath = (name: string) =>
  `/apis/applygate.dev/v1alpha1/namespaces/${NS}/fluxclaims/${name}/status`;

beforeAll(async () => {
  server = await startApiServer();
  for (const f of crdFiles()) await server.installCrdFile(f);
  kube = new Kube(server.kubeConfig());
  await kube.core.createNamespace({ body: { metadata: { name: NS } } });
});
afterAll(async () => {
  await kube?.close();
  await server?.close();
});

async function claim(name: string): Promise<KObject> {
  return kube.apply(RESOURCES.fluxClaim, {
    apiVersion: "applygate.dev/v1alpha1",
    kind: "FluxClaim",
    metadata: { name, namespace: NS },
    spec: { kustomizationRef: { name: "web", namespace: NS } },
  });
}

/** A guarded status write through the policy, counting the reads it made. */
async function writeRepairPending(name: string, opts: { max?: number } = {}) {
  let reads = 0;
  const out = retryOnConflict(
    async () => {
      reads++;
      return (await kube.get<KObject>(RESOURCES.fluxClaim, NS, name))!;
    },
    () => ({ repairPending: true }),
    (cur, status) => kube.patchStatus(RESOURCES.fluxClaim, NS, name, status, cur.metadata.resourceVersion),
    { ...noSleep, ...opts, what: `status of fluxclaims ${NS}/${name}` },
  );
  return { out, reads: () => reads };
}

const repairPending = async (name: string) =>
  (
    (await kube.get<KObject>(RESOURCES.fluxClaim, NS, name))?.status as
      | { repairPending?: boolean }
      | undefined
  )?.repairPending;

describe("the conflict-retry policy", () => {
  it("a storm of 409s resolves: each conflict re-reads and writes again", async () => {
    await claim("storm");
    server.faults.failNext(4, { method: "PATCH", pathPrefix: statusPath("storm"), status: 409 });
    const w = await writeRepairPending("storm");
    await w.out;
    expect(w.reads()).toBe(5);
    expect(await repairPending("storm")).toBe(true);
  });

  it("past the bound it fails with an error naming the write, and nothing is written", async () => {
    await claim("endless");
    server.faults.failNext(50, { method: "PATCH", pathPrefix: statusPath("endless"), status: 409 });
    const w = await writeRepairPending("endless", { max: 5 });
    const err = await w.out.catch((e) => e);
    server.faults.reset();
    expect(err).toBeInstanceOf(ConflictRetriesExhausted);
    expect(err.message).toBe(
      `status of fluxclaims ${NS}/endless: still conflicting after 5 attempts (each re-read the object); another writer keeps changing it`,
    );
    expect(w.reads()).toBe(5);
    expect(await repairPending("endless")).toBeUndefined();
  });

  it("a failure other than a conflict is not retried", async () => {
    await claim("denied");
    server.faults.failNext(1, { method: "PATCH", pathPrefix: statusPath("denied"), status: 403 });
    const w = await writeRepairPending("denied");
    expect(await w.out.catch((e) => e.code)).toBe(403);
    expect(w.reads()).toBe(1);
  });

  it("the worker's claim status patch rides it through a storm", async () => {
    await claim("worker");
    server.faults.failNext(3, { method: "PATCH", pathPrefix: statusPath("worker"), status: 409 });
    const objects = new KubeObjects(kube, silentLogger(), noSleep);
    const ok = await objects.patchClaimStatus({ kind: "FluxClaim", namespace: NS, name: "worker" }, () => ({
      repairPending: true,
    }));
    expect(ok).toBe(true);
    expect(await repairPending("worker")).toBe(true);
    expect(
      await objects.patchClaimStatus({ kind: "FluxClaim", namespace: NS, name: "gone" }, () => ({})),
    ).toBe(false);
  });
});
