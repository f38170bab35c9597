/**
 * The edges of an AppProject's sync windows, through argosim (Argo CD 3.5's window check at every
 * pass over an operation) with an injected wall clock, and the decision core's reading of the
 * same windows (`judgeSyncWindows`) agreeing with what argosim then does:
 * - an operation requested one second before a deny window starts runs its writes, and the
 *   window, begun while it is out, holds it Running ("Sync operation blocked by sync window")
 *   until it ends; then it completes, pinned as asked;
 * - an operation set at the exact instant an allow window fires is held (the window is not active
 *   at that instant), and runs from the next millisecond: the opening the core computes.
 */

import { describe, expect, it } from "vitest";
import { judgeSyncWindows } from "../../queue/decide/index.js";
import { operationStateOf } from "../../queue/kube/index.js";
import type { Clock } from "../cluster/clock.js";
import { fileWorld } from "../support/file-world.js";
import { type Repo, startCluster, until } from "./harness.js";

/** A wall clock the test sets; timers are real. `frozen`: it stands still where it was set. */
class WallClock implements Clock {
  private base = 0;
  private setAt = Date.now();
  frozen = false;
  set(t: number, frozen = false) {
    this.base = t;
    this.setAt = Date.now();
    this.frozen = frozen;
  }
  now = () => (this.frozen ? this.base : this.base + (Date.now() - this.setAt));
  setTimeout = (fn: () => void, ms: number) => setTimeout(fn, ms);
  clearTimeout = (h: unknown) => clearTimeout(h as NodeJS.Timeout);
}

const at = (iso: string) => Date.parse(iso);
const PROJECT = { group: "argoproj.io", version: "v1alpha1", plural: "appprojects", kind: "AppProject" };

let repo: Repo;
let c1: string;
const clock = new WallClock();

const c = fileWorld(async () => {
  clock.set(at("2026-12-01T12:00:00Z"));
  const c = await startCluster();
  // A refresh requeues a held operation quickly; each object write takes 400 ms, so the clock can
  // be moved between an operation's writes and its next pass.
  await c.startArgo({ clock, knobs: { refreshIntervalMs: 100, perObjectApplyMs: 400 } });
  [repo, c1] = await c.history("v1");
  return c;
});

const executor = () => c.executor({ pollMs: 20, busyWaitMs: 10_000, budgetMs: 30_000, maxPollMs: 100 });

let n = 0;
async function setup(syncWindows: unknown[]) {
  const name = `edge${++n}`;
  await c.kube.apply(PROJECT, {
    apiVersion: "argoproj.io/v1alpha1",
    kind: "AppProject",
    metadata: { name, namespace: "argocd" },
    spec: { sourceRepos: ["*"], destinations: [{ server: "*", namespace: "*" }], syncWindows },
  });
  const { ns, ref } = await c.heldApp(name, repo, { project: name });
  return { name, ns, ref };
}

const opState = async (name: string) => operationStateOf(await c.getApp(name));
const value = async (namespace: string) =>
  (
    (await c.kube.core.readNamespacedConfigMap({ name: "settings", namespace }).catch(() => undefined)) as
      | { data?: Record<string, string> }
      | undefined
  )?.data?.value;

describe("sync window edges through argosim (injected clock)", () => {
  it("requested one second before a deny window starts: it is asked for, writes, is held Running through the window, and completes pinned when it ends", async () => {
    const deny = { kind: "deny", schedule: "0 18 * * *", duration: "1h", applications: ["*"] };
    const { name, ns, ref } = await setup([deny]);
    // The watch of the namespace listed before the clock is set: the second that follows is the
    // sync's alone.
    const e = executor();
    await e.applications.serve("argocd");
    await until(async () => !!e.applications.cached(ref), "the watch to hold the Application");
    const F = at("2026-12-01T18:00:00Z");
    // Stood still until the sync writes: on a loaded machine the record, the checks and the
    // first pass took more than the second left before the window, which then held the sync
    // before it wrote anything.
    clock.set(F - 1000, true);
    // The decision core, one second before: open, closing the instant after the firing.
    expect(judgeSyncWindows([deny], clock.now())).toMatchObject({ state: "Open" });

    const r = c.start(e, c.attempt(name, c1));
    // Argo CD checked the windows at the first pass (before the window) and started writing...
    await until(async () => c.argo!.syncs(ref).length === 1, "the sync to start writing");
    // ...and the window begins while its writes are under way.
    clock.set(F + 1000);
    await until(
      async () => (await opState(name))?.message === "Sync operation blocked by sync window",
      "the next pass to be held by the window",
    );
    expect((await opState(name))?.phase).toBe("Running");
    expect(await value(ns)).toBe("v1"); // its writes landed before the window held it
    await until(async () => r.reports.some((x) => x.extra.reason === "SyncWindow"), "the hold reported");
    expect(r.phases()).not.toContain("Succeeded");
    // Held while the window lasts, whatever the refreshes.
    clock.set(F + 30 * 60_000);
    await new Promise((res) => setTimeout(res, 300));
    expect((await opState(name))?.phase).toBe("Running");

    // The window ends: the next pass completes the same operation, pinned as it was asked.
    const end = judgeSyncWindows([deny], F + 1000);
    expect(end).toEqual({ state: "Blocked", by: "deny", opensAt: F + 3_600_000 });
    clock.set(F + 3_600_000);
    await r.done;
    expect(r.phases().at(-1)).toBe("Succeeded");
    expect(c.argo!.syncs(ref).map((s) => s.revision)).toEqual([c1]);
  });

  it("set at the exact instant an allow window fires: held at that instant, run from the opening the core computes (the next millisecond)", async () => {
    const allow = { kind: "allow", schedule: "0 10 * * *", duration: "1h", applications: ["*"] };
    const { name, ref } = await setup([allow]);
    const F = at("2026-12-02T10:00:00Z");
    clock.set(F, true);
    const v = judgeSyncWindows([allow], F);
    expect(v).toEqual({ state: "Blocked", by: "outside-allow", opensAt: F + 1 });

    const r = c.start(executor(), c.attempt(name, c1));
    await until(
      async () => (await opState(name))?.message === "Sync operation blocked by sync window",
      "argosim to hold the sync at the firing instant",
    );
    expect(c.argo!.syncs(ref)).toHaveLength(0);
    // At the opening the core computes, Argo CD runs it (not at tomorrow's firing).
    clock.set(F + 1, true);
    await r.done;
    expect(r.phases().at(-1)).toBe("Succeeded");
    expect(c.argo!.syncs(ref).map((s) => s.revision)).toEqual([c1]);
  });
});
