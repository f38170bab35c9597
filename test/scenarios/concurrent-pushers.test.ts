/**
 * Ten people pushing other files with the git CLI while API edits arrive through the gateway:
 * every edit lands in exactly one commit, no foreign commit is lost, the branch never moves
 * backwards (no force push), and both appliers end applying a tip that holds every push, with
 * only the worker's own publications of API edits (already on the cluster) after it. No applier
 * is ever sent a commit that lacks an edit already published when it was sent.
 */
import { spawn } from "node:child_process";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { errorMessage } from "../../queue/errors.js";
import { writePublishedKey } from "../../queue/keys.js";
import { connectRedis } from "../../queue/redis.js";
import { WRITE_TRAILER } from "../../queue/worker/commit-content.js";
import { gitOk } from "../git/cli.js";
import {
  apiEdit,
  appliedCommits,
  clusterValue,
  gitValue,
  holds,
  readClaim,
  tip,
  until,
} from "../playground/actors.js";
import { DEMO_REPO, type DemoApp } from "../playground/demo.js";
import { operationsOf, type Scene, startScene } from "./harness.js";

const PEERS = 10;
const COMMITS = 1;
const EDITS = 4;

describe("ten concurrent pushers", () => {
  let s: Scene;
  beforeAll(async () => {
    s = await startScene();
  });
  afterAll(async () => s?.stop());

  it("lose nothing, and the appliers end at a tip holding every push and every edit before it", {
    timeout: 180_000,
  }, async () => {
    const a = s.a;
    const bare = join(a.git.root, `${DEMO_REPO}.git`);
    const appliedBefore = {
      flux: appliedCommits(a, "flux").length,
      argocd: appliedCommits(a, "argocd").length,
    };

    // Every tip the branch shows, to prove it only ever moved forward.
    const tipsSeen = new Set<string>();
    let watching = true;
    const watcher = (async () => {
      while (watching) {
        const t = (await readFile(join(bare, "refs", "heads", a.demo.branch), "utf8").catch(() => "")).trim();
        if (t) tipsSeen.add(t);
        // A sampling interval, not a wait: the watcher reads the tip as often as it can.
        await new Promise((r) => setTimeout(r, 5));
      }
    })();

    const child = spawn(
      process.execPath,
      ["--import", "tsx", new URL("./pushers-child.ts", import.meta.url).pathname],
      {
        stdio: ["ignore", "pipe", "inherit"],
        env: { ...process.env, REPO_URL: a.demo.repoUrl, PEERS: String(PEERS), COMMITS: String(COMMITS) },
      },
    );
    const pushed = (async () => {
      const lines = createInterface({ input: child.stdout! })[Symbol.asyncIterator]();
      const line = await lines.next();
      if (line.done) throw new Error("the pushers ended without a result");
      return (JSON.parse(String(line.value)) as { foreign: string[] }).foreign;
    })();

    // API edits to both apps meanwhile, each awaited until published, as a tool saving would. The
    // wait is on the write's published key rather than the intake's bounded `wait=published`, which
    // a loaded machine can outlast; `publishedBy` is when the key was seen (at or after publication).
    const redis = connectRedis(a.redis.url);
    const edits: Array<{ app: DemoApp; greeting: string; id: string; commit: string; publishedBy: number }> =
      [];
    try {
      await Promise.all(
        (["flux", "argocd"] as const).map(async (app) => {
          for (let i = 0; i < EDITS; i++) {
            const greeting = `${app}-${i}`;
            const r = await apiEdit(a, app, greeting, { wait: false });
            expect(r.status, JSON.stringify(r.body)).toBe(202);
            const id = r.body.id as string;
            const commit = await until(
              async () => (await redis.get(writePublishedKey(a.prefix, id))) ?? undefined,
              `${greeting} to publish`,
              90_000,
            );
            edits.push({ app, greeting, id, commit, publishedBy: Date.now() });
            // Pacing between one tool's saves, part of the case (not a wait for anything).
            await new Promise((r) => setTimeout(r, 100));
          }
        }),
      );
    } finally {
      redis.disconnect();
    }
    const foreign = await pushed;
    expect(foreign).toHaveLength(PEERS * COMMITS);

    const summary = () =>
      JSON.stringify(
        (["flux", "argocd"] as const).map((app) =>
          operationsOf(s, app).map((o) => [o.attempt.commit.slice(0, 8), o.phases.at(-1)]),
        ),
      );
    // Each applier settles on a commit holding every foreign commit. Commits after it may only be
    // the worker's own publications of API edits: the cluster already runs those, so no apply.
    // A Repair may follow a withheld late apply, so the state must also hold still for a while
    // (longer than the apply window's grace) with no new attempt.
    const lastApplied: Record<DemoApp, string> = { flux: "", argocd: "" };
    let attemptsSeen = -1;
    await until(
      async () => {
        const count = s.progress.attempts().length;
        const still = count === attemptsSeen;
        attemptsSeen = count;
        if (!still) return false;
        for (const app of ["flux", "argocd"] as const) {
          const c = await readClaim(a, app);
          const op = c?.status?.operation as { phase?: string; commit?: string } | undefined;
          if (op?.phase !== "Succeeded" || !op.commit) return false;
          for (const f of foreign) if (!(await holds(a, op.commit, f))) return false;
          lastApplied[app] = op.commit;
        }
        return true;
      },
      "both appliers to apply a tip holding every push",
      120_000,
      3_000,
    ).catch((err: unknown) => {
      throw new Error(`${errorMessage(err)}; operations: ${summary()}`);
    });
    const head = await tip(a);
    watching = false;
    await watcher;

    // Every edit in exactly one commit.
    const log = await gitOk(["--git-dir", bare, "log", "--format=%B%x01", `${s.start}..${a.demo.branch}`]);
    const counts = new Map<string, number>();
    for (const line of log.split("\n")) {
      if (line.startsWith(`${WRITE_TRAILER}: `)) {
        const id = line.slice(WRITE_TRAILER.length + 2).trim();
        counts.set(id, (counts.get(id) ?? 0) + 1);
      }
    }
    for (const e of edits) expect(counts.get(e.id), `${e.app} ${e.greeting}`).toBe(1);
    expect(counts.size).toBe(edits.length);

    // No foreign commit lost, no force push.
    for (const f of foreign) expect(await holds(a, head, f), `foreign ${f}`).toBe(true);
    expect(tipsSeen.size).toBeGreaterThan(PEERS);
    for (const t of tipsSeen) expect(await holds(a, head, t), `tip ${t}`).toBe(true);

    // The last edit of each app wins in Git and on the cluster.
    for (const app of ["flux", "argocd"] as const) {
      expect(await gitValue(a, app)).toBe(`${app}-${EDITS - 1}`);
      expect((await clusterValue(a, app)).greeting).toBe(`${app}-${EDITS - 1}`);
    }

    const sent = s.progress.events.slice();
    for (const app of ["flux", "argocd"] as const) {
      const ops = operationsOf(s, app);
      // Each applier was sent at least one ForeignCommit; its last apply is the one that settled.
      expect(ops.some((o) => o.attempt.targets.some((t) => t.reason === "ForeignCommit"))).toBe(true);
      expect(ops.at(-1)?.attempt.commit).toBe(lastApplied[app]);
      const after = await gitOk([
        "--git-dir",
        bare,
        "log",
        "--format=%B%x01",
        `${lastApplied[app]}..${head}`,
      ]);
      for (const c of after.split("\x01").filter((c) => c.trim())) expect(c).toContain(`${WRITE_TRAILER}: `);
      // Never a commit lacking an edit published before the attempt was sent: decided, at its
      // `sentAt` (the job is queued a little later, and an edit published in between is guarded
      // by the attempt's window instead).
      for (const e of sent) {
        if (e.type !== "attempt" || e.attempt.applier.kind !== app) continue;
        for (const ed of edits.filter((x) => x.publishedBy < Date.parse(e.attempt.sentAt))) {
          expect(
            await holds(a, e.attempt.commit, ed.commit),
            `${app} attempt ${e.attempt.token} at ${e.attempt.commit.slice(0, 8)} lacks ${ed.greeting}`,
          ).toBe(true);
        }
      }
      // The applier applied only what it was sent.
      const applied = appliedCommits(a, app).slice(appliedBefore[app]);
      const attempted = new Set(ops.map((o) => o.attempt.commit));
      for (const c of applied) expect(attempted.has(c), `${app} applied ${c} unasked`).toBe(true);
    }
  });
});
