import { describe, expect, it } from "vitest";
import {
  ConflictRetriesExhausted,
  type KObject,
  type Kube,
  RESOURCES,
  statusWriter,
} from "../queue/kube/index.js";
import { COMMIT } from "../test/support/attempts.js";
import { fileWorld } from "../test/support/file-world.js";
import { startSidecarWorld } from "../test/support/sidecar-world.js";
import {
  type ClaimLocator,
  completeOperation,
  OperationNotFound,
  RecordRefused,
  readOperation,
  recordOperation,
  updateOperation,
  withdrawOperation,
} from "./operation-record.js";

const OTHER = "b".repeat(40);
let kube: Kube;
let n = 0;

async function newClaim(): Promise<ClaimLocator> {
  const name = `claim-${++n}`;
  await kube.apply(RESOURCES.fluxClaim, {
    apiVersion: "applygate.dev/v1alpha1",
    kind: "FluxClaim",
    metadata: { name, namespace: "apps" },
    spec: { kustomizationRef: { name: "web", namespace: "flux-system" } },
  });
  return { type: RESOURCES.fluxClaim, namespace: "apps", name };
}

const op = (token: string, commit = COMMIT) => ({
  token,
  commit,
  targets: [{ uid: "u1", reason: "ForeignCommit" as const }],
});

fileWorld(async () => {
  const w = await startSidecarWorld({ namespaces: ["apps"] });
  kube = w.kube;
  return w;
});

/** Another writer's change to the claim's status (a repair made due). */
const otherWrite = (claim: ClaimLocator) =>
  kube.mergePatch(
    claim.type,
    claim.namespace,
    claim.name,
    { status: { repairPending: true } },
    { status: true },
  );

describe("operation record", () => {
  it("records a Requested operation through the status subresource", async () => {
    const claim = await newClaim();
    const { operation, previous } = await recordOperation(kube, claim, op("t1"), {
      now: () => new Date("2026-01-01T00:00:00Z"),
    });
    expect(previous).toBeUndefined();
    expect(operation).toMatchObject({
      token: "t1",
      phase: "Requested",
      requestedAt: "2026-01-01T00:00:00.000Z",
    });
    const read = await kube.get<KObject>(RESOURCES.fluxClaim, claim.namespace, claim.name);
    expect((read!.status as { operation: unknown }).operation).toMatchObject({ token: "t1", commit: COMMIT });
    const mf = read!.metadata.managedFields?.find((m) => m.subresource === "status");
    expect(mf?.manager).toBe("applygate-operation-record");
  });

  it("each party's status fields are owned by its own field manager on the status subresource", async () => {
    const claim = await newClaim();
    await recordOperation(kube, claim, op("t1"));
    const read = await kube.get<KObject>(RESOURCES.fluxClaim, claim.namespace, claim.name);
    await statusWriter(kube, "claim", "branch-worker").patch(
      RESOURCES.fluxClaim,
      claim.namespace,
      claim.name,
      { repairPending: true },
      read!.metadata.resourceVersion,
    );
    const after = await kube.get<KObject>(RESOURCES.fluxClaim, claim.namespace, claim.name);
    const owned = Object.fromEntries(
      (after!.metadata.managedFields ?? [])
        .filter((m) => m.subresource === "status")
        .map((m) => [
          m.manager,
          Object.keys((m.fieldsV1 as { "f:status": object })["f:status"])
            .filter((k) => k.startsWith("f:"))
            .sort(),
        ]),
    );
    expect(owned).toEqual({
      "applygate-operation-record": ["f:operation"],
      "applygate-branch-worker": ["f:repairPending"],
    });
  });

  it("recording the same token again is a no-op", async () => {
    const claim = await newClaim();
    await recordOperation(kube, claim, op("t1"));
    const again = await recordOperation(kube, claim, op("t1"));
    expect(again.operation.token).toBe("t1");
  });

  it("is refused while another operation is in flight, and nothing changes", async () => {
    const claim = await newClaim();
    await recordOperation(kube, claim, op("t1"));
    await expect(recordOperation(kube, claim, op("t2"))).rejects.toMatchObject({
      name: "RecordRefused",
      reason: "OperationInFlight",
    });
    expect((await readOperation(kube, claim))?.token).toBe("t1");
  });

  it("is refused while the claim is being deleted", async () => {
    const claim = await newClaim();
    const obj = (await kube.get<KObject>(claim.type, claim.namespace, claim.name))!;
    await kube.setFinalizer(claim.type, obj, "applygate.dev/claim", true);
    await kube.delete(claim.type, claim.namespace, claim.name);
    const err = await recordOperation(kube, claim, op("t1")).catch((e) => e);
    expect(err).toBeInstanceOf(RecordRefused);
    expect(err.reason).toBe("ClaimDeleting");
    expect(await readOperation(kube, claim)).toBeUndefined();
  });

  it("is refused for a claim that does not exist", async () => {
    await expect(
      recordOperation(kube, { type: RESOURCES.fluxClaim, namespace: "apps", name: "missing" }, op("t1")),
    ).rejects.toMatchObject({ reason: "ClaimNotFound" });
  });

  it("moves phases by token and refuses a token that is not the one recorded", async () => {
    const claim = await newClaim();
    await recordOperation(kube, claim, op("t1"));
    const running = await updateOperation(kube, claim, "t1", {
      phase: "Running",
      resumeToken: "r1",
      startedAt: "2026-01-01T00:00:01Z",
    });
    expect(running).toMatchObject({ phase: "Running", resumeToken: "r1" });
    await updateOperation(kube, claim, "t1", { phase: "Settling", suspendToken: "s1" });
    expect(await readOperation(kube, claim)).toMatchObject({
      phase: "Settling",
      resumeToken: "r1",
      suspendToken: "s1",
    });
    await expect(updateOperation(kube, claim, "other", { phase: "Running" })).rejects.toBeInstanceOf(
      OperationNotFound,
    );
  });

  it("completes: a success sets lastAppliedCommit; completion is final", async () => {
    const claim = await newClaim();
    await recordOperation(kube, claim, op("t1"));
    const done = await completeOperation(kube, claim, "t1", { phase: "Succeeded", outcome: "Applied" });
    expect(done).toMatchObject({ phase: "Succeeded", outcome: "Applied" });
    expect(done.completedAt).toBeDefined();
    const again = await completeOperation(kube, claim, "t1", { phase: "Failed" });
    expect(again.phase).toBe("Succeeded");
    const unchanged = await updateOperation(kube, claim, "t1", { message: "late" });
    expect(unchanged.message).toBeUndefined();
    const read = await kube.get<KObject>(claim.type, claim.namespace, claim.name);
    expect((read!.status as { lastAppliedCommit?: string }).lastAppliedCommit).toBe(COMMIT);
  });

  it("a new operation after a completed one carries nothing of the old one", async () => {
    const claim = await newClaim();
    await recordOperation(kube, claim, op("t1"));
    await updateOperation(kube, claim, "t1", { phase: "Running", resumeToken: "r1", message: "m" });
    await completeOperation(kube, claim, "t1", { phase: "Failed", outcome: "DependencyNotReady" });
    const { previous } = await recordOperation(kube, claim, op("t2", OTHER));
    expect(previous?.token).toBe("t1");
    const now = await readOperation(kube, claim);
    expect(now).toMatchObject({ token: "t2", phase: "Requested", commit: OTHER });
    expect(now).not.toHaveProperty("resumeToken");
    expect(now).not.toHaveProperty("completedAt");
    expect(now).not.toHaveProperty("outcome");
  });

  it("withdraw puts back what the status held", async () => {
    const claim = await newClaim();
    await recordOperation(kube, claim, op("t1"));
    await completeOperation(kube, claim, "t1", { phase: "Succeeded" });
    const before = await readOperation(kube, claim);
    const { previous } = await recordOperation(kube, claim, op("t2"));
    expect(await withdrawOperation(kube, claim, "t2", previous)).toBe(true);
    expect(await readOperation(kube, claim)).toEqual(before);
    const fresh = await newClaim();
    await recordOperation(kube, fresh, op("t3"));
    expect(await withdrawOperation(kube, fresh, "t3", undefined)).toBe(true);
    expect(await readOperation(kube, fresh)).toBeUndefined();
  });

  it("a conflicting write re-reads and retries (seed 003), keeping the other writer's change", async () => {
    const claim = await newClaim();
    await recordOperation(kube, claim, op("t1"));
    // Another writer moves the claim between our read and our write, once.
    let interfered = false;
    const racing = Object.create(kube) as Kube;
    racing.mergePatch = async <T>(...args: Parameters<Kube["mergePatch"]>) => {
      if (!interfered && args[4]?.status) {
        interfered = true;
        await otherWrite(claim);
      }
      return kube.mergePatch<T>(...args);
    };
    const out = await updateOperation(
      racing,
      claim,
      "t1",
      { phase: "Running" },
      { retry: { sleep: async () => {} } },
    );
    expect(out.phase).toBe("Running");
    const read = await kube.get<KObject>(claim.type, claim.namespace, claim.name);
    expect(read!.status).toMatchObject({ repairPending: true, operation: { phase: "Running" } });
  });

  it("gives up after the maximum of conflicts without writing", async () => {
    const claim = await newClaim();
    await recordOperation(kube, claim, op("t1"));
    const racing = Object.create(kube) as Kube;
    racing.mergePatch = async <T>(...args: Parameters<Kube["mergePatch"]>) => {
      if (args[4]?.status)
        await kube.mergePatch(claim.type, claim.namespace, claim.name, {
          metadata: { labels: { bump: String(Math.random()).slice(2) } },
        });
      return kube.mergePatch<T>(...args);
    };
    await expect(
      updateOperation(
        racing,
        claim,
        "t1",
        { phase: "Running" },
        { retry: { max: 3, sleep: async () => {} } },
      ),
    ).rejects.toBeInstanceOf(ConflictRetriesExhausted);
    expect((await readOperation(kube, claim))?.phase).toBe("Requested");
  });

  describe("from the claim last seen", () => {
    /** A client that counts the claim reads it makes. */
    const counting = () => {
      const c = Object.create(kube) as Kube & { reads: number };
      c.reads = 0;
      c.get = async <T>(...args: Parameters<Kube["get"]>) => {
        c.reads++;
        return kube.get<T>(...(args as [never, string, string]));
      };
      return c;
    };

    it("each write starts from the answer to the one before: no read between the phases", async () => {
      const claim = await newClaim();
      const k = counting();
      const seen = { claim: (await kube.get<KObject>(claim.type, claim.namespace, claim.name))! };
      await recordOperation(k, claim, op("t1"), { seen });
      await updateOperation(k, claim, "t1", { phase: "Running" }, { seen });
      await updateOperation(k, claim, "t1", { phase: "Settling", suspendToken: "s" }, { seen });
      await completeOperation(k, claim, "t1", { phase: "Succeeded" }, { seen });
      expect(k.reads).toBe(0);
      const read = await kube.get<KObject>(claim.type, claim.namespace, claim.name);
      expect(read!.status).toMatchObject({ operation: { phase: "Succeeded" }, lastAppliedCommit: COMMIT });
      expect(seen.claim.metadata.resourceVersion).toBe(read!.metadata.resourceVersion);
    });

    it("another party's write since is a conflict that reads again and keeps its change", async () => {
      const claim = await newClaim();
      const seen = { claim: (await kube.get<KObject>(claim.type, claim.namespace, claim.name))! };
      await recordOperation(kube, claim, op("t1"), { seen });
      await otherWrite(claim);
      await kube.mergePatch(claim.type, claim.namespace, claim.name, { metadata: { labels: { x: "1" } } });
      const k = counting();
      await updateOperation(k, claim, "t1", { phase: "Running" }, { seen });
      expect(k.reads).toBe(1);
      const read = await kube.get<KObject>(claim.type, claim.namespace, claim.name);
      expect(read!.metadata.labels).toMatchObject({ x: "1" });
      expect(read!.status).toMatchObject({ repairPending: true, operation: { phase: "Running" } });
    });

    it("a refusal decided on the claim seen is decided again from a fresh read", async () => {
      const claim = await newClaim();
      await recordOperation(kube, claim, op("t0"));
      // Seen while t0 was still in flight; completed since.
      const seen = { claim: (await kube.get<KObject>(claim.type, claim.namespace, claim.name))! };
      await completeOperation(kube, claim, "t0", { phase: "Succeeded" });
      const k = counting();
      const { operation } = await recordOperation(k, claim, op("t1"), { seen });
      expect(operation.token).toBe("t1");
      expect(k.reads).toBe(1);
      expect((await readOperation(kube, claim))?.token).toBe("t1");
    });
  });
});
