/**
 * The round-trip ledger: how many Git requests (advertisement, fetch, push) each operation of a
 * warm branch worker costs, pinned in a golden file so a change that adds a round trip shows up
 * in review. Regenerate with UPDATE_GOLDEN=1 after a deliberate change.
 */
import { existsSync } from "node:fs";
import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import type { BranchWorker, Observation } from "../../queue/worker/branch-worker.js";
import type { RequestCounts } from "../git/server.js";
import { foreignCommit } from "./foreign.js";
import { configMapWrite, type Harness, harness, waitFor } from "./harness.js";

const golden = new URL("./roundtrip-ledger.golden.json", import.meta.url).pathname;

describe("round-trip ledger", () => {
  let h: Harness;
  afterEach(async () => {
    await h.close();
  });

  it("pins the Git requests of each operation", async () => {
    h = await harness(undefined, { idleMs: 10, maxMs: 50 });
    const bare = join(h.server.root, "site.git");
    const ledger: Record<string, RequestCounts> = {};
    let extraRejections = 0;
    const observed: Observation[] = [];
    const worker: BranchWorker = await h.newWorker({
      fetchIntervalMs: 3_600_000,
      random: () => 0,
      hooks: {
        async onObserved(o) {
          observed.push(o);
          // Somebody pushes again between our fetch and our next push.
          if (o.reason === "rejected" && extraRejections > 0) {
            extraRejections--;
            await foreignCommit(bare, `other/${Date.now()}.txt`, "again\n");
          }
        },
      },
    });
    const measure = async (name: string, op: () => Promise<unknown>) => {
      h.server.resetCounts();
      await op();
      ledger[name] = h.server.counts();
    };
    const publish = async (value: string) => {
      const w = configMapWrite(h.key, "a", value, { save: true });
      await h.accept(w);
      worker.wake();
      await waitFor(`write ${value}`, () => h.published(w.id));
    };

    await measure("cold start (baseline)", () => waitFor("baseline", () => observed.length === 1));
    expect(observed[0]).toMatchObject({ baseline: true, pushedByUs: false });
    await measure("idle branch", async () => {
      // Many polls of the inbox, no Git request. The idle span is what is measured: no condition
      // ends it, since the point is that nothing happens.
      await new Promise((r) => setTimeout(r, 500));
    });
    await measure("one publication", () => publish("1"));
    await measure("a no-op write", () => publish("1"));
    await measure("periodic read, tip unchanged", async () => {
      worker.observeSoon("periodic");
      await waitFor("periodic", () => observed.length === 2);
    });
    expect(observed[1]).toMatchObject({ baseline: false, pushedByUs: true });
    await measure("one rejection", async () => {
      await foreignCommit(bare, "other/one.txt", "one\n");
      await publish("2");
    });
    await measure("two rejections", async () => {
      await foreignCommit(bare, "other/two.txt", "two\n");
      extraRejections = 1;
      await publish("3");
    });
    await measure("lost push reply", async () => {
      h.server.faults.dropPushReply(1);
      await publish("4");
    });
    // One commit per publication, none for the no-op, the foreign commits kept, no duplicate after the lost reply.
    const ours = "Update team/site (1 write)";
    expect(await h.log()).toEqual([
      ours,
      ours,
      expect.stringMatching(/^foreign other\/\d+\.txt$/),
      "foreign other/two.txt",
      ours,
      "foreign other/one.txt",
      ours,
      "initial content",
    ]);

    if (process.env.UPDATE_GOLDEN || !existsSync(golden)) {
      await writeFile(golden, `${JSON.stringify(ledger, null, 2)}\n`);
    }
    expect(ledger).toEqual(JSON.parse(await readFile(golden, "utf8")));
  });
});
