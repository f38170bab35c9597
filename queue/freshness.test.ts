import { randomUUID } from "node:crypto";
import { Queue } from "bullmq";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type IsolatedRedis, isolatedRedis } from "../test/redis/isolated.js";
import { type AcceptedWrite, QUEUES } from "./contract.js";
import { folderHolds, readFreshness } from "./freshness.js";
import { acceptWrite } from "./intake.js";
import { branchKeys } from "./keys.js";
import { BranchLease } from "./worker/lease.js";
import { recordTip } from "./worker/tip-record.js";

const A = "a".repeat(40);
const B = "b".repeat(40);

let redis: IsolatedRedis;
let branches: Queue;
beforeAll(async () => {
  redis = await isolatedRedis("fresh");
  branches = new Queue(QUEUES.branches, {
    connection: { url: redis.url, maxRetriesPerRequest: null },
    prefix: redis.prefix,
  });
});
afterAll(async () => {
  await branches?.close();
  await redis?.cleanup();
});

let n = 0;
/** A branch of its own, its tip recorded by its owner. */
async function branch(tip: string | undefined) {
  const key = `git.example/team/apps-${++n}@main`;
  if (tip) {
    const lease = new BranchLease(redis.client, redis.prefix, key, "worker", 10_000);
    expect(await lease.acquire()).toBe(true);
    await recordTip(redis.client, redis.prefix, key, lease.token as string, tip);
  }
  const accept = async (path: string, more: Partial<AcceptedWrite> = {}) => {
    const write: AcceptedWrite = {
      id: `w-${randomUUID()}`,
      target: { namespace: "team", name: "site" },
      branchKey: key,
      path,
      acceptedAt: new Date().toISOString(),
      author: { name: "Ada", email: "ada@example.com" },
      changes: [
        {
          op: "upsert",
          object: { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "a", namespace: "team" } },
        },
      ],
      ...more,
    };
    const r = await acceptWrite(redis.client, redis.prefix, write, branches);
    if (!r.accepted) throw new Error("not accepted");
    return r.entryId;
  };
  return { key, accept };
}

describe("freshness: the tip and the edit recheck in one read", () => {
  it("without the edit recheck only the tip counts; no record is not a moved tip", async () => {
    const b = await branch(A);
    await b.accept("apps");
    expect(await readFreshness(redis.client, redis.prefix, { branchKey: b.key, commit: A })).toBe("current");
    expect(await readFreshness(redis.client, redis.prefix, { branchKey: b.key, commit: B })).toBe("moved");
    const none = await branch(undefined);
    expect(await readFreshness(redis.client, redis.prefix, { branchKey: none.key, commit: B })).toBe(
      "current",
    );
  });

  it("a write accepted after the mark to a folder the applier applies is an edit; before it, elsewhere or a notice is not", async () => {
    const b = await branch(A);
    const before = await b.accept("apps/one");
    const mark = before;
    const ask = (folders: string[], m = mark) =>
      readFreshness(redis.client, redis.prefix, {
        branchKey: b.key,
        commit: A,
        editsAfter: { mark: m, folders },
      });
    expect(await ask(["apps/one"])).toBe("current");
    await b.accept("apps/two");
    await redis.client.xadd(branchKeys(redis.prefix, b.key).inbox, "*", "kind", "push", "data", "{}");
    expect(await ask(["apps/one"])).toBe("current");
    expect(await ask(["apps/two"])).toBe("edited");
    expect(await ask(["./apps/two/"])).toBe("edited");
    // "0-0": the flush had read nothing, so every write in the inbox came after it.
    expect(await ask(["apps/one"], "0-0")).toBe("edited");
    // A moved tip answers first: the worker publishes what it moved for.
    expect(
      await readFreshness(redis.client, redis.prefix, {
        branchKey: b.key,
        commit: B,
        editsAfter: { mark, folders: ["apps/two"] },
      }),
    ).toBe("moved");
  });

  it("a watched write of the applier's own managers after the mark is no edit to recheck for", async () => {
    const b = await branch(A);
    const mark = await b.accept("elsewhere");
    await b.accept("apps", {
      applierAuthored: {
        manager: "kustomize-controller",
        writtenAt: "2026-01-01T00:00:00Z",
        resourceVersion: "1",
      },
    });
    const ask = () =>
      readFreshness(redis.client, redis.prefix, {
        branchKey: b.key,
        commit: A,
        editsAfter: { mark, folders: ["apps"] },
      });
    expect(await ask()).toBe("current");
    await b.accept("apps");
    expect(await ask()).toBe("edited");
  });

  it("more entries after the mark than it reads is taken as an edit", async () => {
    const b = await branch(A);
    const mark = await b.accept("elsewhere");
    for (let i = 0; i < 3; i++) await b.accept("elsewhere");
    const r = (limit: number) =>
      readFreshness(
        redis.client,
        redis.prefix,
        { branchKey: b.key, commit: A, editsAfter: { mark, folders: ["apps"] } },
        limit,
      );
    expect(await r(10)).toBe("current");
    expect(await r(3)).toBe("edited");
  });

  it("folders: the same, or one inside the other, whatever the slashes", () => {
    expect(folderHolds("apps", "apps")).toBe(true);
    expect(folderHolds("./apps/", "apps/web")).toBe(true);
    expect(folderHolds("apps/web", "apps")).toBe(true);
    expect(folderHolds("apps", "apps2")).toBe(false);
    expect(folderHolds("apps/web", "apps/db")).toBe(false);
    expect(folderHolds("", "anything")).toBe(true);
  });
});
