/**
 * The Flux sidecar, a process of its own, is SIGKILLed between the resume and the suspend of the
 * Kustomization (its apply stalled by fluxsim's build time so the window is wide). A new sidecar
 * starts, follows the operation the claim records (its token), and completes it: the
 * Kustomization ends suspended, the pushed value is on the cluster, no second attempt is sent, and
 * the worker gets exactly one terminal report for that token.
 */
import type { ChildProcess } from "node:child_process";
import * as k8s from "@kubernetes/client-node";
import { type Job, Queue, QueueEvents } from "bullmq";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { QUEUES, type Report, TERMINAL_PHASES } from "../../queue/contract.js";
import { clusterValue, foreignPush, readClaim, until } from "../playground/actors.js";
import { DEMO_APPLIERS, FLUX_NAMESPACE } from "../playground/demo.js";
import { operationsOf, type Scene, startScene, unique } from "./harness.js";
import { fluxSidecarProcess } from "./sidecar-process.js";

/** Every report the worker receives, duplicates included (read as jobs are added). */
async function watchReports(s: Scene) {
  const connection = { url: s.a.redis.url, maxRetriesPerRequest: null };
  const queue = new Queue(QUEUES.reports, { connection, prefix: s.a.prefix });
  const events = new QueueEvents(QUEUES.reports, { connection, prefix: s.a.prefix });
  await events.waitUntilReady();
  const reports: Report[] = [];
  let chain: Promise<void> = Promise.resolve();
  events.on("added", ({ jobId }) => {
    chain = chain.then(async () => {
      const job = (await queue.getJob(jobId).catch(() => undefined)) as Job<Report> | undefined;
      if (job) reports.push(job.data);
    });
  });
  return {
    reports,
    async close() {
      await chain;
      await events.close();
      await queue.close();
    },
  };
}

async function kustomizationSuspended(s: Scene): Promise<boolean | undefined> {
  const ks = (await s.a.kubeConfig.makeApiClient(k8s.CustomObjectsApi).getNamespacedCustomObject({
    group: "kustomize.toolkit.fluxcd.io",
    version: "v1",
    plural: "kustomizations",
    namespace: FLUX_NAMESPACE,
    name: DEMO_APPLIERS.flux.name,
  })) as { spec?: { suspend?: boolean } };
  return ks.spec?.suspend;
}

describe("a sidecar killed between resume and suspend", () => {
  let s: Scene;
  let child: ChildProcess | undefined;
  beforeAll(async () => {
    s = await startScene();
  });
  afterAll(async () => {
    if (child && child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
    await s?.stop();
  });

  it("is completed by the next sidecar, once", { timeout: 90_000 }, async () => {
    const watch = await watchReports(s);
    try {
      await s.a.stopSidecar("flux");
      child = (await fluxSidecarProcess(s)).child;
      expect(await kustomizationSuspended(s)).toBe(true);

      // A slow build keeps the Kustomization resumed for a while once the apply starts.
      s.a.flux.knobs.buildMs = 2_500;
      const value = `pushed-${unique()}`;
      const commit = await foreignPush(s.a, "flux", value);
      await until(
        async () => (await kustomizationSuspended(s)) === false,
        "the sidecar to resume the Kustomization",
        30_000,
        10,
      );
      child.kill("SIGKILL");
      await new Promise<void>((r) =>
        child!.exitCode !== null || child!.signalCode !== null ? r() : child!.once("exit", () => r()),
      );
      const op = (await readClaim(s.a, "flux"))?.status?.operation as {
        token?: string;
        commit?: string;
        phase?: string;
      };
      expect(op.commit).toBe(commit);
      expect(op.phase).not.toBe("Succeeded");
      const token = op.token as string;

      // A new sidecar (in-process, as the assembly runs it) takes over.
      s.a.flux.knobs.buildMs = 0;
      await s.a.startSidecar("flux");
      await until(async () => {
        const now = (await readClaim(s.a, "flux"))?.status?.operation as { token?: string; phase?: string };
        return now?.token === token && now.phase === "Succeeded";
      }, "the same operation to end Succeeded");
      await until(
        async () => (await kustomizationSuspended(s)) === true,
        "the Kustomization to be suspended again",
      );
      expect((await clusterValue(s.a, "flux")).greeting).toBe(value);

      // The worker hears one end for the token, and sent no second attempt.
      await until(
        async () =>
          watch.reports.some((r) => r.type === "phase" && r.token === token && r.phase === "Succeeded"),
        "the Succeeded report",
      );
      // Reports still in flight from a resync would arrive within one resync interval.
      await new Promise((r) => setTimeout(r, s.a.timers.sidecar.resyncMs + 500));
      const ends = watch.reports.filter(
        (r) => r.type === "phase" && r.token === token && TERMINAL_PHASES.includes(r.phase),
      );
      expect(ends.map((r) => (r.type === "phase" ? r.phase : r.type))).toEqual(["Succeeded"]);
      const ops = operationsOf(s, "flux");
      expect(ops.map((o) => o.attempt.token)).toEqual([token]);
      expect(await kustomizationSuspended(s)).toBe(true);
    } finally {
      await watch.close();
    }
  });
});
