/**
 * The recorded tip follows what the branch worker sees of the remote: its baseline, its own
 * publications and somebody else's pushes; and a caller that no longer holds the lease writes nothing.
 */
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { foreignCommit } from "../../test/worker/foreign.js";
import { configMapWrite, FOLDER, type Harness, harness, waitFor } from "../../test/worker/harness.js";
import { readTip } from "../records.js";
import { LostLeaseError } from "./inbox.js";
import { BranchLease } from "./lease.js";
import { recordTip } from "./tip-record.js";

describe("recorded branch tip", () => {
  let h: Harness;
  afterEach(async () => {
    await h.close();
  });

  const recorded = () => readTip(h.redis.client, h.redis.prefix, h.key);

  it("holds the baseline, then each publication of the worker and each foreign push it observes", async () => {
    h = await harness();
    const start = await h.server.tip("site");
    // The decision core hears of a tip only once it is recorded, so an attempt never outruns it.
    const unrecorded: string[] = [];
    const check = async (tip: string | undefined) => {
      if (tip && (await recorded()) !== tip) unrecorded.push(tip);
    };
    await h.newWorker({
      fetchIntervalMs: 100,
      hooks: { onObserved: (o) => check(o.tip), onPublished: (p) => check(p.tip) },
    });
    await waitFor("the baseline recorded", async () => (await recorded()) === start);

    const w = configMapWrite(h.key, "a", "1", { save: true });
    await h.accept(w);
    const published = await waitFor("publication", () => h.published(w.id));
    expect(published).not.toBe(start);
    // The write's published key is settled first; the record follows before the decision core hears of it.
    await waitFor("the publication recorded", async () => (await recorded()) === published);

    const foreign = await foreignCommit(join(h.server.root, "site.git"), `${FOLDER}/from-git.txt`, "x\n");
    await waitFor("the foreign push recorded", async () => (await recorded()) === foreign);

    // A later publication builds on the foreign commit and moves the record past it.
    const w2 = configMapWrite(h.key, "b", "2", { save: true });
    await h.accept(w2);
    const next = await waitFor("second publication", () => h.published(w2.id));
    expect(next).not.toBe(foreign);
    expect(await h.server.tip("site")).toBe(next);
    await waitFor("the second publication recorded", async () => (await recorded()) === next);
    expect(unrecorded).toEqual([]);
  });

  it("is written only under the lease: a caller whose token lost the branch changes nothing", async () => {
    h = await harness();
    const lease = new BranchLease(h.redis.client, h.redis.prefix, h.key, "r1", 10_000);
    expect(await lease.acquire()).toBe(true);
    const token = lease.token as string;
    await recordTip(h.redis.client, h.redis.prefix, h.key, token, "a".repeat(40));
    await lease.release();
    const other = new BranchLease(h.redis.client, h.redis.prefix, h.key, "r2", 10_000);
    expect(await other.acquire()).toBe(true);
    await expect(recordTip(h.redis.client, h.redis.prefix, h.key, token, "b".repeat(40))).rejects.toThrow(
      LostLeaseError,
    );
    expect(await recorded()).toBe("a".repeat(40));
    // An empty branch leaves no record.
    await recordTip(h.redis.client, h.redis.prefix, h.key, other.token as string, undefined);
    expect(await recorded()).toBeUndefined();
  });
});
