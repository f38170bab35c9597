/**
 * Each soak invariant fails on the record of a run that broke it, and passes on a clean one. The
 * records are made by hand: a checker that cannot fail would let the soak pass anything.
 */
import { describe, expect, it } from "vitest";
import {
  type CommitRecord,
  checkRun,
  type EditRecord,
  type HandedWrite,
  type RunRecord,
  repairDelay,
} from "./invariants.js";

const sha = (n: number) => n.toString(16).padStart(40, "0");
const edit = (app: "flux" | "argocd", value: string, at: number, save = true): EditRecord => ({
  app,
  value,
  at,
  save,
  status: 202,
  message: `${app}: set greeting to ${value}`,
  acceptedAt: at + 10,
});
const commit = (n: number, subject: string, flux: string, argocd = "hello"): CommitRecord => ({
  sha: sha(n),
  subject,
  values: { flux, argocd },
});

/** Two saved edits of the Flux app, each its own commit, one clean apply of the tip. */
function clean(): RunRecord {
  return {
    startValues: { flux: "hello", argocd: "hello" },
    edits: [edit("flux", "e1", 1000), edit("flux", "e2", 2000)],
    notes: [],
    refusals: [],
    pushes: [],
    cluster: {
      flux: [
        { at: 0, value: "hello" },
        { at: 1000, value: "e1" },
        { at: 2000, value: "e2" },
      ],
      argocd: [{ at: 0, value: "hello" }],
    },
    commits: [commit(1, "flux: set greeting to e1", "e1"), commit(2, "flux: set greeting to e2", "e2")],
    final: { cluster: { flux: "e2", argocd: "hello" }, git: { flux: "e2", argocd: "hello" } },
    operations: [
      {
        token: "t1",
        app: "flux",
        commit: sha(2),
        sentAt: 2400,
        reasons: ["ForeignCommit"],
        phases: [
          { phase: "Requested", at: 2500 },
          { phase: "Running", at: 2600 },
          { phase: "Succeeded", at: 2900 },
        ],
      },
    ],
  };
}

const invariantsOf = (r: RunRecord) => checkRun(r).violations.map((v) => v.invariant);

describe("soak invariants", () => {
  it("a clean run breaks none", () => {
    expect(checkRun(clean()).violations).toEqual([]);
  });

  it("converged: the cluster left on another value than Git", () => {
    const r = clean();
    r.final.cluster.flux = "e1";
    expect(invariantsOf(r)).toContain("converged");
  });

  it("no-revert: an older commit applied over a newer edit", () => {
    const r = clean();
    r.cluster.flux.push(
      { at: 3000, value: "e1", manager: "kustomize-controller" },
      { at: 4000, value: "e2" },
    );
    const { violations, reverts } = checkRun(r);
    expect(violations.map((v) => v.invariant)).toContain("no-revert");
    expect(reverts[0]).toMatchObject({ from: "e2", to: "e1", lastedMs: 1000, undone: true });
    expect(reverts[0]?.residue).toBeUndefined();
  });

  it("no-revert: a later foreign push replacing an edit is no revert", () => {
    const r = clean();
    r.pushes.push({ app: "flux", value: "p3", at: 3000, commit: sha(3), subject: "greeting p3" });
    r.commits.push(commit(3, "greeting p3", "p3"));
    r.cluster.flux.push({ at: 3500, value: "p3" });
    r.final = { cluster: { flux: "p3", argocd: "hello" }, git: { flux: "p3", argocd: "hello" } };
    expect(checkRun(r).violations).toEqual([]);
  });

  /** The clean run plus an edit e3 at `at`, run over by t1's apply (e2) at 2800 and put back at 3500. */
  function runOver(at: number, acceptedAt: number): RunRecord {
    const r = clean();
    r.edits.push({ ...edit("flux", "e3", at), acceptedAt });
    r.commits.push(commit(3, "flux: set greeting to e3", "e3"));
    r.cluster.flux.push({ at: at + 5, value: "e3" }, { at: 2800, value: "e2" }, { at: 3500, value: "e3" });
    r.final = { cluster: { flux: "e3", argocd: "hello" }, git: { flux: "e3", argocd: "hello" } };
    return r;
  }

  it("no-revert: an edit whose write came after the apply's last look, run over by it and put back, is counted, not a violation", () => {
    // t1 was Requested at 2500 (stamped just before the recheck's read); the write came at 2510.
    const { violations, reverts } = checkRun(runOver(2490, 2510));
    expect(violations).toEqual([]);
    expect(reverts).toMatchObject([
      { from: "e3", to: "e2", residue: "after-last-look", lastedMs: 700, by: { token: "t1" } },
    ]);
  });

  it("no-revert: a revert names the next operation of its applier, the Repair, and how soon after the overwrite it came", () => {
    const r = runOver(2490, 2510);
    r.operations.push(
      { token: "t0", app: "argocd", commit: sha(2), sentAt: 2950, reasons: ["ForeignCommit"], phases: [] },
      {
        token: "t2",
        app: "flux",
        commit: sha(3),
        sentAt: 3100,
        reasons: ["Repair"],
        phases: [
          { phase: "Requested", at: 3150 },
          { phase: "Running", at: 3300 },
          { phase: "Succeeded", at: 3450 },
        ],
      },
    );
    const [v] = checkRun(r).reverts;
    expect(v?.repair).toEqual({ token: "t2", sentAt: 3100, runningAt: 3300, reasons: ["Repair"] });
    // t1, the overwrite, ended at 2900.
    expect(repairDelay(v!)).toEqual({ sentMs: 200, runningMs: 400 });
    // None sent after the overwrite ended: no repair, no delay.
    const none = checkRun(runOver(2490, 2510)).reverts[0]!;
    expect(none.repair).toBeUndefined();
    expect(repairDelay(none)).toBeUndefined();
    // One sent after the edit's value was back (at 3500) repaired nothing: not counted.
    const late = runOver(2490, 2510);
    late.operations.push({ token: "t3", app: "flux", commit: sha(3), sentAt: 3600, reasons: [], phases: [] });
    expect(checkRun(late).reverts[0]!.repair).toBeUndefined();
  });

  it("no-revert: an edit whose write was in the inbox before the last look is a violation (the recheck must stop that apply)", () => {
    const { violations, reverts } = checkRun(runOver(2300, 2450));
    expect(violations.map((v) => v.invariant)).toEqual(["no-revert"]);
    expect(reverts[0]?.residue).toBeUndefined();
  });

  it("no-revert: past the restale budget the attempt carries no recheck, so any edit it runs over is counted", () => {
    const r = runOver(2300, 2450);
    (r.operations[0] as { rechecksEdits?: boolean }).rechecksEdits = false;
    const { violations, reverts } = checkRun(r);
    expect(violations).toEqual([]);
    expect(reverts[0]?.residue).toBe("past-restale-budget");
  });

  it("no-revert: a revert never put back is a violation, however late the edit", () => {
    const r = runOver(2490, 2510);
    r.cluster.flux.pop();
    r.endedAt = 5000;
    expect(invariantsOf(r)).toContain("no-revert");
  });

  it("no-revert: the cluster taking a newer edit is no revert, even when its write reached Git first (seed 5211)", () => {
    const r = clean();
    // e2's write was committed before e1's (e1's first report met a 503 and was sent again).
    r.commits = [commit(1, "flux: set greeting to e2", "e2"), commit(2, "flux: set greeting to e1", "e1")];
    r.commits.push(commit(3, "flux: set greeting to e3", "e3"));
    r.edits.push(edit("flux", "e3", 3000));
    r.cluster.flux.push({ at: 3000, value: "e3" });
    r.final = { cluster: { flux: "e3", argocd: "hello" }, git: { flux: "e3", argocd: "hello" } };
    r.operations[0]!.commit = sha(3);
    expect(checkRun(r).reverts).toEqual([]);
    // An older edit's value coming back over a newer one still is one.
    r.cluster.flux.push({ at: 3500, value: "e1" });
    expect(checkRun(r).reverts.map((v) => `${v.from} → ${v.to}`)).toEqual(["e3 → e1"]);
  });

  it("no-revert: an older value no apply out wrote is a violation (here after the operation ended)", () => {
    const r = runOver(2490, 2510);
    r.cluster.flux.splice(-2, 2, { at: 2900 + 2500, value: "e2" }, { at: 6000, value: "e3" });
    const { violations, reverts } = checkRun(r);
    expect(violations.map((v) => v.invariant)).toContain("no-revert");
    expect(reverts[0]?.by).toBeUndefined();
  });

  it("commits-explained: a commit no action made (an applier's echo)", () => {
    const r = clean();
    r.commits.push(commit(3, "mirror: app-config changed by kustomize-controller", "e2"));
    expect(invariantsOf(r)).toContain("commits-explained");
  });

  it("commits-explained: a save committed together with the write after it", () => {
    const r = clean();
    r.commits = [commit(1, "flux: set greeting to e1", "e2")];
    expect(invariantsOf(r)).toContain("commits-explained");
  });

  it("commits-explained: a foreign push missing from the branch", () => {
    const r = clean();
    r.pushes.push({ app: "argocd", value: "p3", at: 3000, commit: sha(9), subject: "greeting p3" });
    expect(invariantsOf(r)).toContain("commits-explained");
  });

  it("operations: an operation that never ended, or ended twice", () => {
    const never = clean();
    never.operations[0]?.phases.pop();
    expect(invariantsOf(never)).toContain("operations");
    const twice = clean();
    twice.operations[0]?.phases.push({ phase: "Failed", at: 9000 });
    expect(invariantsOf(twice)).toContain("operations");
  });

  it("operations: two operations at once on one applier", () => {
    const r = clean();
    r.operations.push({
      token: "t2",
      app: "flux",
      commit: sha(2),
      sentAt: 2650,
      reasons: ["Repair"],
      phases: [
        { phase: "Requested", at: 2700 },
        { phase: "Succeeded", at: 3100 },
      ],
    });
    expect(invariantsOf(r)).toContain("operations");
  });

  it("nothing-lost: an accepted save missing from Git; a window write replaced by a later one is fine", () => {
    const lost = clean();
    lost.edits.push(edit("flux", "e3", 2500));
    expect(invariantsOf(lost)).toContain("nothing-lost");
    const replaced = clean();
    replaced.edits.splice(1, 0, edit("flux", "w", 1500, false));
    expect(checkRun(replaced).violations).toEqual([]);
  });

  it("nothing-lost: an accepted edit of the other key missing from Git, found once a commit holds it", () => {
    const r = clean();
    r.notes.push({ ...edit("flux", "n3", 2500), message: "flux: set note to n3", greeting: "e2" });
    expect(invariantsOf(r)).toContain("nothing-lost");
    // Joined to the open window of the edit before it: that commit's message, the note's value.
    (r.commits[1] as CommitRecord).notes = { flux: "n3", argocd: undefined };
    expect(checkRun(r).violations).toEqual([]);
  });

  it("with the webhook applier's folder: its pushes explain their commits, its end is converged, its operations are its own", () => {
    const r = clean();
    r.commits.push(commit(3, "webhook greeting w3 (pushed to Git)", "e2"));
    r.webhook = {
      pushes: [{ value: "w3", at: 3000, commit: sha(3), subject: "webhook greeting w3 (pushed to Git)" }],
      final: { cluster: "w3", git: "w3" },
    };
    const hookOp = (token: string, sentAt: number) => ({
      token,
      app: "webhook" as const,
      commit: sha(3),
      sentAt,
      reasons: ["ForeignCommit"],
      phases: [
        { phase: "Requested", at: sentAt + 100 },
        { phase: "Succeeded", at: sentAt + 400 },
      ],
    });
    // An operation of the webhook applier while Flux applies is no overlap: another applier.
    r.operations.push(hookOp("w1", 2450));
    expect(checkRun(r).violations).toEqual([]);
    const stale = structuredClone(r);
    (stale.webhook as NonNullable<RunRecord["webhook"]>).final.cluster = "hello";
    expect(invariantsOf(stale)).toEqual(["converged"]);
    const missing = structuredClone(r);
    missing.commits.pop();
    expect(invariantsOf(missing)).toContain("commits-explained");
    const twoAtOnce = structuredClone(r);
    twoAtOnce.operations.push(hookOp("w2", 2500));
    expect(invariantsOf(twoAtOnce)).toEqual(["operations"]);
  });

  describe("a run whose edits only the watch plane reported (--mirror)", () => {
    const handed = (id: string, at: number, over: Partial<HandedWrite> = {}): HandedWrite => ({
      id,
      app: "flux",
      at,
      applier: false,
      snapshot: false,
      ...over,
    });
    const windowEdit = (value: string, at: number, id: string): EditRecord => ({
      ...edit("flux", value, at, false),
      message: "",
      id,
      acceptedAt: at + 10,
    });
    /**
     * Two edits of the Flux app made on the cluster, handed by the mirror (m1, m2) and committed in
     * one closed window; the applier's echo of its apply handed too (m3) and committed by nobody.
     */
    function mirrored(): RunRecord {
      const r = clean();
      r.edits = [windowEdit("e1", 1000, "m1"), windowEdit("e2", 2000, "m2")];
      r.mirror = {
        handed: [
          handed("m1", 1010, { greeting: "e1" }),
          handed("m2", 2010, { greeting: "e2" }),
          handed("m3", 2700, { greeting: "e2", applier: true }),
        ],
      };
      r.commits = [{ ...commit(1, "Update demo/flux-app (2 writes)", "e2"), writeIds: ["m1", "m2"] }];
      r.operations[0] = { ...(r.operations[0] as RunRecord["operations"][number]), commit: sha(1) };
      return r;
    }

    it("a clean run breaks none", () => {
      expect(checkRun(mirrored()).violations).toEqual([]);
    });

    it("commits-explained: a commit of the applier's echo alone, one carrying no handed write, a write in two commits", () => {
      const echo = mirrored();
      echo.commits.push({ ...commit(2, "Update demo/flux-app (1 write)", "e2"), writeIds: ["m3"] });
      expect(checkRun(echo).violations.map((v) => v.detail)).toEqual([
        expect.stringContaining("carries only the applier's own writes"),
      ]);
      const unknown = mirrored();
      unknown.commits.push({ ...commit(2, "Update demo/flux-app (1 write)", "e2"), writeIds: ["x9"] });
      expect(checkRun(unknown).violations.map((v) => v.detail)).toEqual([
        expect.stringContaining("carries no write the mirror handed"),
      ]);
      // A window split in two commits that both carry m2: two commits for one closed window.
      const split = mirrored();
      split.commits = [
        { ...commit(1, "Update demo/flux-app (1 write)", "e1"), writeIds: ["m1", "m2"] },
        { ...commit(2, "Update demo/flux-app (1 write)", "e2"), writeIds: ["m2"] },
      ];
      expect(checkRun(split).violations.map((v) => v.detail)).toEqual([
        expect.stringContaining("carried by two commits"),
      ]);
      // More write commits than edits handed.
      const many = mirrored();
      many.mirror = {
        handed: [handed("m1", 1010, { greeting: "e1" }), handed("m2", 2010, { greeting: "e2" })],
      };
      many.commits = [
        { ...commit(1, "Update demo/flux-app (1 write)", "e1"), writeIds: ["m1"] },
        { ...commit(2, "Update demo/flux-app (1 write)", "e2"), writeIds: ["m2"] },
        { ...commit(3, "Update demo/flux-app (1 write)", "e2"), writeIds: ["m1"] },
      ];
      expect(invariantsOf(many)).toEqual(["commits-explained", "commits-explained"]);
    });

    it("no-revert: judged from the mirror's handed time; an edit it never handed is not judged", () => {
      // e3 handed at 2450, before t1's Requested (2500): the recheck must have stopped that apply.
      const early = mirrored();
      early.edits.push(windowEdit("e3", 2300, "m4"));
      (early.edits[2] as EditRecord).acceptedAt = 2450;
      early.mirror?.handed.push(handed("m4", 2450, { greeting: "e3" }));
      early.commits.push({ ...commit(2, "Update demo/flux-app (1 write)", "e3"), writeIds: ["m4"] });
      early.cluster.flux.push(
        { at: 2305, value: "e3" },
        { at: 2800, value: "e2" },
        { at: 3500, value: "e3" },
      );
      early.final = { cluster: { flux: "e3", argocd: "hello" }, git: { flux: "e3", argocd: "hello" } };
      expect(invariantsOf(early)).toEqual(["no-revert"]);
      // Handed after the last look: the residue the design accepts.
      const late = structuredClone(early);
      (late.edits[2] as EditRecord).acceptedAt = 2510;
      const { violations, reverts } = checkRun(late);
      expect(violations).toEqual([]);
      expect(reverts[0]?.residue).toBe("after-last-look");
      // Never handed (status 0: the mirror was down, a later edit replaced it): not the gateway's.
      const unhanded = structuredClone(early);
      unhanded.edits[2] = { ...(unhanded.edits[2] as EditRecord), status: 0 };
      unhanded.mirror = { handed: (unhanded.mirror?.handed ?? []).filter((h) => h.id !== "m4") };
      unhanded.commits.pop();
      unhanded.cluster.flux.splice(-1);
      unhanded.final = { cluster: { flux: "e2", argocd: "hello" }, git: { flux: "e2", argocd: "hello" } };
      expect(checkRun(unhanded).violations).toEqual([]);
    });

    it("nothing-lost: a handed edit in no commit; a window edit or note replaced by a later one is fine", () => {
      const lost = mirrored();
      lost.edits.push(windowEdit("e3", 2500, "m4"));
      lost.mirror?.handed.push(handed("m4", 2510, { greeting: "e3" }));
      expect(invariantsOf(lost)).toEqual(["nothing-lost"]);
      const notes = mirrored();
      const note = (value: string, at: number, id: string) => ({
        ...windowEdit(value, at, id),
        greeting: "e2",
      });
      notes.notes = [note("n3", 2100, "m5"), note("n4", 2200, "m6")];
      notes.mirror?.handed.push(handed("m5", 2110, { note: "n3" }), handed("m6", 2210, { note: "n4" }));
      notes.commits.push({
        ...commit(2, "Update demo/flux-app (2 writes)", "e2"),
        notes: { flux: "n4", argocd: undefined },
        writeIds: ["m5", "m6"],
      });
      expect(checkRun(notes).violations).toEqual([]);
      // The last note missing: lost, the earlier one with it.
      (notes.commits[1] as CommitRecord).notes = { flux: undefined, argocd: undefined };
      expect(invariantsOf(notes)).toEqual(["nothing-lost", "nothing-lost"]);
    });
  });
});
