/**
 * A Git outage while API edits keep arriving: the gateway accepts them and the worker retains
 * them; once a write would pass a small intake budget, intake pauses (429 with Retry-After).
 * When Git returns, every write publishes exactly once (one commit per save), intake resumes, and
 * Flux applies once, a tip holding every edit (the outage's first edit created an object, so its
 * applier is asked to adopt it once it is in Git).
 *
 * The worker's first retry is due 10 s after a failure; the scenario runs the worker on an offset
 * clock and jumps over that wait instead of sleeping through it.
 */
import { join } from "node:path";
import * as k8s from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { WRITE_TRAILER } from "../../queue/worker/commit-content.js";
import { gitOk } from "../git/cli.js";
import {
  apiEdit,
  clusterValue,
  gitValue,
  holds,
  postWrite,
  tip,
  USER_MANAGER,
  until,
  type WriteAnswer,
} from "../playground/actors.js";
import { FAST_TIMERS } from "../playground/assembly.js";
import { DEMO_APPS, DEMO_NAMESPACE, DEMO_REPO, demoConfigMap, INTAKE_TOKEN } from "../playground/demo.js";
import { operationsOf, type Scene, startScene } from "./harness.js";
import { OffsetClock } from "./offset-clock.js";

/** Each demo write is charged its payload (about 0.5 KiB) plus 1 KiB: intake pauses after a few. */
const BUDGET_BYTES = 6 * 1024;
const EXTRA = {
  apiVersion: "v1",
  kind: "ConfigMap",
  metadata: { name: "outage-extra", namespace: "flux-app" },
  data: { made: "during the outage" },
};

/**
 * Waits for the second after the last write of an applier on the Flux app's ConfigMaps: an edit
 * in the same second as an applier's write is taken to be under it, and the design asks a
 * (redundant) Repair then (docs/design/decisions.md, "an applier write in the same second as a
 * guarded edit is over it"); the test would see that Repair, not an edit asking for no apply.
 */
async function pastTheAppliesSecond(core: k8s.CoreV1Api): Promise<void> {
  const listed = await core.listNamespacedConfigMap({ namespace: DEMO_APPS.flux.namespace });
  const appliedSec = Math.max(
    0,
    ...listed.items
      .flatMap((cm) => cm.metadata?.managedFields ?? [])
      .filter((m) => m.manager !== USER_MANAGER && m.time)
      .map((m) => Math.floor(new Date(m.time as Date).getTime() / 1000)),
  );
  await until(
    async () => Math.floor(Date.now() / 1000) > appliedSec,
    "a second after the apply's last write",
  );
}

describe("a Git outage", () => {
  let s: Scene;
  const clock = new OffsetClock();
  beforeAll(async () => {
    s = await startScene({ timers: { branch: { ...FAST_TIMERS.branch, clock, budgetBytes: BUDGET_BYTES } } });
  });
  afterAll(async () => s?.stop());

  it("retains the edits, pauses intake over budget, then publishes each once and applies once", async () => {
    const a = s.a;
    const worker = () => a.worker.replica.branch(a.demo.key);
    const core = a.kubeConfig.makeApiClient(k8s.CoreV1Api);
    // The edits below start a second after the start's apply (see pastTheAppliesSecond): in its
    // second they would be taken to be under it, and a Repair would be due.
    await pastTheAppliesSecond(core);
    a.git.faults.setDown(true);

    // Somebody creates an object through the API; its write reaches Git only after the outage.
    await core.patchNamespacedConfigMap(
      { name: "outage-extra", namespace: "flux-app", body: EXTRA, fieldManager: USER_MANAGER, force: true },
      k8s.setHeaderOptions("Content-Type", k8s.PatchStrategy.ServerSideApply),
    );
    const created = await postWrite(
      a,
      "flux",
      {
        changes: [{ op: "upsert", object: EXTRA }],
        author: { name: "user", email: "user@example.com" },
        message: "flux: add outage-extra",
        save: true,
      },
      { wait: false },
    );
    expect(created.status).toBe(202);
    const accepted: string[] = [created.body.id as string];

    // Edits keep arriving until intake pauses.
    let refused: { greeting: string; answer: WriteAnswer } | undefined;
    for (let i = 0; i < 30 && !refused; i++) {
      const greeting = `outage-${i}`;
      const answer = await apiEdit(a, "flux", greeting, { wait: false });
      if (answer.status === 429) refused = { greeting, answer };
      else {
        expect(answer.status, JSON.stringify(answer.body)).toBe(202);
        accepted.push(answer.body.id as string);
        // The next edit after the worker took this one in (it pauses between its steps).
        await until(
          async () => worker()?.snapshot().retainedWrites === accepted.length,
          "the write to be retained",
        );
      }
    }
    expect(refused, "intake never paused").toBeDefined();
    expect(accepted.length).toBeGreaterThanOrEqual(3);
    const paused = await fetch(`${a.gateway.url}/v1/targets/${DEMO_NAMESPACE}/flux-app/writes`, {
      method: "POST",
      headers: { authorization: `Bearer ${INTAKE_TOKEN}`, "content-type": "application/json" },
      body: JSON.stringify({
        changes: [{ op: "upsert", object: demoConfigMap("flux", { greeting: refused!.greeting }) }],
        author: { name: "user", email: "user@example.com" },
        save: true,
      }),
    });
    expect(paused.status).toBe(429);
    expect(Number(paused.headers.get("retry-after"))).toBeGreaterThan(0);

    // Nothing reached Git, nothing was lost: every accepted write is retained, a retry is pending.
    // The gate latched the pause as it refused; the worker reads it back on its next step.
    await until(async () => worker()?.snapshot().intakePaused, "the worker to see the pause");
    const held = worker()!.snapshot();
    expect(held.retainedWrites).toBe(accepted.length);
    expect(held.nextRetryAt).toBeDefined();
    expect(await tip(a)).toBe(s.start);
    expect(operationsOf(s, "flux")).toHaveLength(0);

    // Git returns; jump to the retry instead of waiting for it.
    a.git.faults.setDown(false);
    clock.advance(Math.max(0, (worker()!.snapshot().nextRetryAt as number) - clock.now()) + 1);
    await until(async () => worker()?.snapshot().retainedWrites === 0, "the retained writes to publish");

    // One commit per save, each write in exactly one commit.
    const log = await gitOk([
      "--git-dir",
      join(a.git.root, `${DEMO_REPO}.git`),
      "log",
      "--format=%H%x00%B%x01",
      `${s.start}..${a.demo.branch}`,
    ]);
    const commits = log
      .split("\x01")
      .map((r) => r.trim())
      .filter(Boolean);
    const carried = commits.flatMap((c) =>
      c
        .split("\n")
        .flatMap((l) =>
          l.startsWith(`${WRITE_TRAILER}: `) ? [l.slice(WRITE_TRAILER.length + 2).trim()] : [],
        ),
    );
    expect(commits).toHaveLength(accepted.length);
    expect(carried.sort()).toEqual([...accepted].sort());
    const published = await tip(a);

    // Flux adopts the created object: one apply, of a tip holding every edit of the outage.
    await until(
      async () => operationsOf(s, "flux").some((o) => o.phases.includes("Succeeded")),
      "Flux to apply after the outage",
    );
    const ops = operationsOf(s, "flux");
    expect(ops, JSON.stringify(ops.map((o) => [o.attempt.commit, o.phases]))).toHaveLength(1);
    expect(ops[0]!.attempt.commit).toBe(published);
    expect(ops[0]!.phases.at(-1)).toBe("Succeeded");
    expect(operationsOf(s, "argocd")).toHaveLength(0);

    // Intake resumed: the refused edit, sent again, publishes. It is made in a second after the
    // apply's last write: an applier write in the same second as a guarded edit is taken to be
    // over it, and the design asks a (redundant) Repair then (docs/design/decisions.md, "an
    // applier write in the same second as a guarded edit is over it"). In that second this check
    // would see that Repair, not an edit asking for an apply.
    await pastTheAppliesSecond(core);
    const again = await apiEdit(a, "flux", refused!.greeting);
    expect(again.status, JSON.stringify(again.body)).toBe(200);
    expect(await holds(a, again.body.commit, published)).toBe(true);
    expect(worker()!.snapshot().intakePaused).toBe(false);
    expect(await gitValue(a, "flux")).toBe(refused!.greeting);
    expect((await clusterValue(a, "flux")).greeting).toBe(refused!.greeting);
    const extra = await core.readNamespacedConfigMap({
      name: "outage-extra",
      namespace: DEMO_APPS.flux.namespace,
    });
    expect(extra.data?.made).toBe("during the outage");
    // An API edit already on the cluster asks for no apply.
    expect(operationsOf(s, "flux")).toHaveLength(1);
  });
});
