/**
 * An attempt is trusted only as far as the sidecar can check it. The Flux claim requires manual
 * approval; two foreign commits land and only the newer is approved. Attempts are then added to
 * the Flux attempts queue by hand, straight into BullMQ as a writable dashboard (or anyone who
 * reaches Redis) could: one with no approvals, one listing an approval for the tip only. The
 * sidecar reads at the write what the apply would bring (both foreign commits), refuses each
 * (RequestFailed, NotApproved, a Warning Event on the claim naming the unapproved commit) and
 * nothing is applied. Once the older commit is approved too, the worker's own attempt applies.
 */
import * as k8s from "@kubernetes/client-node";
import { Queue } from "bullmq";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Attempt, attemptsQueue } from "../../queue/contract.js";
import { bullConnection } from "../../queue/redis.js";
import { appliedCommits, clusterValue, foreignPush, readClaim, tip, until } from "../playground/actors.js";
import { DEMO_NAMESPACE } from "../playground/demo.js";
import { testRedisUrl } from "../redis/isolated.js";
import { operationsOf, type Scene, startScene } from "./harness.js";

const MERGE = k8s.setHeaderOptions("Content-Type", k8s.PatchStrategy.MergePatch);
const claimRef = {
  group: "applygate.dev",
  version: "v1alpha1",
  plural: "fluxclaims",
  namespace: DEMO_NAMESPACE,
  name: "flux-app",
};

type Gate = { type: string; reason: string; message: string };
const gate = async (s: Scene) =>
  ((await readClaim(s.a, "flux"))?.status?.conditions as Gate[] | undefined)?.find(
    (c) => c.type === "ApplyAllowed",
  );

describe("an attempt queued by hand is checked at the write", () => {
  let s: Scene;
  let queue: Queue;
  beforeAll(async () => {
    s = await startScene();
    queue = new Queue(attemptsQueue("flux"), {
      connection: bullConnection(testRedisUrl()),
      prefix: s.a.prefix,
    });
  });
  afterAll(async () => {
    await queue?.close();
    await s?.stop();
  });

  it("the playground's dashboard is read-only, as the gateway's default: its Add job is refused, and no page may frame it", async () => {
    expect(s.a.dashboard.readOnly).toBe(true);
    const authorization = `Basic ${Buffer.from(`${s.a.dashboard.user}:${s.a.dashboard.password}`).toString("base64")}`;
    const before = await queue.count();
    const add = await fetch(`${s.a.dashboard.url}/api/queues/${attemptsQueue("flux")}/add`, {
      method: "POST",
      headers: { authorization, "content-type": "application/json" },
      body: JSON.stringify({ name: "forged", data: { token: "forged-by-dashboard" }, options: {} }),
    });
    expect(add.status).toBe(405);
    expect(await queue.count()).toBe(before);
    const page = await fetch(s.a.dashboard.url, { headers: { authorization } });
    expect(page.status).toBe(200);
    expect(page.headers.get("x-frame-options")).toBe("DENY");
    // One directive of the dashboard's policy (which also keeps every fetch on this host).
    const csp = (page.headers.get("content-security-policy") ?? "").split(";").map((d) => d.trim());
    expect(csp).toContain("frame-ancestors 'none'");
  });

  it("refuses attempts for an unapproved commit, whatever approvals they list; the worker's approved one applies", async () => {
    const custom = s.a.kubeConfig.makeApiClient(k8s.CustomObjectsApi);
    // A release manager approves, as herself (the shipped admission policy holds here too).
    s.a.api.addUser("ada", "ada-token", "rbac");
    await s.a.api.applyYaml(`
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: { name: ada-approves, namespace: ${DEMO_NAMESPACE} }
roleRef: { apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: applygate-approver }
subjects: [{ apiGroup: rbac.authorization.k8s.io, kind: User, name: ada }]
`);
    const asAda = s.a.api.kubeConfig("ada").makeApiClient(k8s.CustomObjectsApi);
    const approve = (commit: string) =>
      asAda.createNamespacedCustomObject({
        group: "applygate.dev",
        version: "v1alpha1",
        plural: "approvals",
        namespace: DEMO_NAMESPACE,
        body: {
          apiVersion: "applygate.dev/v1alpha1",
          kind: "Approval",
          metadata: { name: `flux-app-${commit.slice(0, 12)}` },
          spec: {
            claimRef: { kind: "FluxClaim", name: "flux-app" },
            commit,
            approver: "ada",
            note: "CAB-9",
          },
        },
      });
    await custom.patchNamespacedCustomObject(
      { ...claimRef, body: { spec: { approval: { manual: true } } } },
      MERGE,
    );
    await until(
      async () => (await gate(s))?.reason === "Approved",
      "the claim to show nothing awaiting approval",
    );
    // The worker's converge at the start: what a queue entry for this claim looks like.
    const template = s.progress
      .attempts()
      .filter((a) => a.applier.kind === "flux")
      .at(-1) as Attempt;
    expect(template).toBeDefined();
    const applied = appliedCommits(s.a, "flux").length;
    const value = (await clusterValue(s.a, "flux")).greeting;

    const older = await foreignPush(s.a, "flux", "unapproved");
    const newer = await foreignPush(s.a, "flux", "approved");
    await approve(newer);
    await until(
      async () => (await gate(s))?.message.includes(older.slice(0, 12)) === true,
      "the claim to await approval of the older commit only",
    );
    const head = await tip(s.a);
    expect(head).toBe(newer);

    const forge = async (token: string, approvals: Attempt["approvals"]) => {
      const forged: Attempt = {
        ...template,
        token,
        commit: head,
        sentAt: new Date().toISOString(),
        approvals,
      };
      await queue.add(token, forged);
      await until(
        async () => s.progress.phases().some((p) => p.token === token && p.phase === "RequestFailed"),
        `the sidecar to refuse ${token}`,
      );
      return s.progress.phases().filter((p) => p.token === token);
    };
    const forgeries: [string, NonNullable<Attempt["approvals"]>][] = [
      ["forged-none", []],
      ["forged-tip-only", [{ commit: newer, sources: ["Manual"], by: ["ada"] }]],
    ];
    for (const [token, approvals] of forgeries) {
      const phases = await forge(token, approvals);
      expect(phases.map((p) => p.phase)).not.toContain("Running");
      const last = phases.at(-1);
      expect(last).toMatchObject({ phase: "RequestFailed", reason: "NotApproved" });
      expect(last?.message).toContain(`${older.slice(0, 12)} (Manual)`);
      expect(last?.message).not.toContain(`${newer.slice(0, 12)} (Manual)`);
    }
    // Nothing applied, and the claim shows why.
    expect(appliedCommits(s.a, "flux")).toHaveLength(applied);
    expect((await clusterValue(s.a, "flux")).greeting).toBe(value);
    const events = await s.a.kubeConfig
      .makeApiClient(k8s.EventsV1Api)
      .listNamespacedEvent({ namespace: DEMO_NAMESPACE });
    const refused = events.items.filter(
      (e) =>
        e.regarding?.kind === "FluxClaim" && e.regarding.name === "flux-app" && e.reason === "NotApproved",
    );
    expect(refused.length).toBeGreaterThan(0);
    expect(refused[0]).toMatchObject({ type: "Warning", action: "Refuse" });
    expect(refused[0]?.note).toContain(older.slice(0, 12));

    // Approved in full: the worker's own attempt applies the tip.
    await approve(older);
    await until(
      async () =>
        operationsOf(s, "flux").some((o) => o.attempt.commit === head && o.phases.includes("Succeeded")),
      "the worker's approved apply",
    );
    const done = operationsOf(s, "flux").filter((o) => o.phases.includes("Succeeded"));
    expect(done).toHaveLength(1);
    expect(done[0]?.attempt.token.startsWith("forged")).toBe(false);
    expect((await clusterValue(s.a, "flux")).greeting).toBe("approved");
  });
});
