/**
 * No write can block a branch: a write no door would accept (a ClusterRole named `.git:x`, which
 * Git cannot store) is put straight into the branch's inbox between two good writes. The worker
 * settles it as refused, both good writes publish, and the appliers still apply a later push.
 */
import { Queue } from "bullmq";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { QUEUES } from "../../queue/contract.js";
import { acceptWrite } from "../../queue/intake.js";
import { writePublishedKey } from "../../queue/keys.js";
import { connectRedis } from "../../queue/redis.js";
import { clusterValue, foreignPush, postWrite, until } from "../playground/actors.js";
import { DEMO_APPS, DEMO_NAMESPACE, demoConfigMap } from "../playground/demo.js";
import { unstorableWrite } from "../support/unstorable-write.js";
import { type Scene, startScene } from "./harness.js";

describe("a poison write past the door", () => {
  let s: Scene;
  beforeAll(async () => {
    s = await startScene();
  });
  afterAll(async () => s?.stop());

  it("is settled as refused while the writes around it publish and a later push is applied", async () => {
    const author = { name: "Ada", email: "ada@example.com" };
    const write = (greeting: string) => ({
      changes: [{ op: "upsert", object: demoConfigMap("flux", { greeting }) }],
      author,
      save: true,
    });
    const before = await postWrite(s.a, "flux", write("before"));
    expect(before.status).toBe(200);

    const redis = connectRedis(s.a.redis.url);
    const branches = new Queue(QUEUES.branches, { connection: redis, prefix: s.a.prefix });
    const key = s.a.demo.key;
    const poison = unstorableWrite({
      target: { namespace: DEMO_NAMESPACE, name: "flux-app" },
      branchKey: key,
      path: DEMO_APPS.flux.folder,
      author,
    });
    try {
      expect((await acceptWrite(redis, s.a.prefix, poison, branches)).accepted).toBe(true);
      const after = await postWrite(s.a, "flux", write("after"));
      expect(after.status).toBe(200);
      expect(await redis.get(writePublishedKey(s.a.prefix, poison.id))).toMatch(/^refused: Unstorable: /);
    } finally {
      await branches.close();
      redis.disconnect();
    }

    // The branch goes on: a push made with git is applied to the cluster.
    await foreignPush(s.a, "flux", "pushed");
    await until(
      async () => (await clusterValue(s.a, "flux")).greeting === "pushed",
      "the later push applied",
    );
  });
});
