/**
 * Model-based test of the decision core: random interleavings of edits, saves, foreign pushes,
 * flushes, executor outcomes and their reports (delivered late, twice, or never), refusals,
 * restarts and clock jumps, played against a small simulated shell (a linear remote history, the
 * commit window, the pending writes, an executor that records operations on its claim's status).
 * Governed, the same world also generates approvals of foreign commits, the shell's reads of them,
 * change windows and Argo CD sync windows, and checks that no attempt is ever sent for a tip with
 * an unapproved foreign commit, or outside a window.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { BRANCH, cm, fluxClaim, listed, sha } from "../../test/support/decisions.js";
import type { Attempt, PhaseReport, ReportPhase } from "../contract.js";
import type { ChangeWindowSpec, SyncWindowSpec, TargetGovernance } from "../governance/model.js";
import { claimKey } from "./due.js";
import { explainBranch } from "./explain.js";
import type {
  ClaimStatusSnapshot,
  DecisionAction,
  DecisionEvent,
  DecisionState,
  ForeignRead,
  ListedTarget,
} from "./model.js";
import { hasPending } from "./reasons.js";
import { initialState, step } from "./step.js";

/**
 * Governance of the governed world: claim `a` needs a manual approval of every foreign commit and
 * applies only in even UTC hours, never 01:00-01:30; claim `c`'s Application is held by Argo CD
 * sync windows from just after hh:15 until hh:25. Each rule has its own oracle below, written
 * from the schedule by hand, not through the core's window code.
 */
const CHANGE_WINDOWS: ChangeWindowSpec[] = [
  { kind: "allow", schedule: "0 */2 * * *", duration: "1h" },
  { kind: "deny", schedule: "0 1 * * *", duration: "30m" },
];
const SYNC_WINDOWS: SyncWindowSpec[] = [
  { kind: "deny", schedule: "15 * * * *", duration: "10m", applications: ["*"] },
];
function changeWindowOpen(t: number): boolean {
  const d = new Date(t);
  const h = d.getUTCHours();
  return h % 2 === 0 && !(h === 1 && d.getUTCMinutes() < 30);
}
function syncWindowOpen(t: number): boolean {
  const intoHour = t - Math.floor(t / 3_600_000) * 3_600_000;
  return !(intoHour > 15 * 60_000 && intoHour < 25 * 60_000);
}

const TARGETS = [
  { uid: "u1", claim: "a", source: "s1", onRefusal: "Reapply" as const, folder: true },
  { uid: "u2", claim: "b", source: "s1", onRefusal: "Ignore" as const, folder: false },
  { uid: "u3", claim: "c", source: "s2", onRefusal: "Reapply" as const, folder: true },
  { uid: "u4", claim: "a", source: "s1", onRefusal: "Ignore" as const, folder: true },
];
const CLAIMS = ["a", "b", "c"];
const SOURCE: Record<string, string> = { a: "s1", b: "s1", c: "s2" };

type Op =
  | { k: "edit"; t: number; o: number }
  | { k: "approve"; i: number }
  | { k: "readCommits" }
  | { k: "closeWindow" }
  | { k: "save" }
  | { k: "cooldownPublish" }
  | { k: "foreignPush"; dropFolder: boolean }
  | { k: "observe" }
  | { k: "completeFlush" }
  | { k: "failFlush" }
  | { k: "refusal"; t: number }
  | { k: "execute"; i: number; outcome: ReportPhase }
  | { k: "deliver"; i: number }
  | { k: "duplicate"; i: number }
  | { k: "lose"; i: number }
  | { k: "applierWrite"; c: number; o: number; dt: number }
  | { k: "raceApply"; t: number; o: number; dt: number }
  | { k: "advance"; ms: number }
  | { k: "restart"; saved: boolean }
  | { k: "listClaims" }
  | { k: "toggleConsent" };

const opArb: fc.Arbitrary<Op> = fc.oneof(
  { arbitrary: fc.record({ k: fc.constant("edit" as const), t: fc.nat(3), o: fc.nat(3) }), weight: 4 },
  { arbitrary: fc.record({ k: fc.constant("approve" as const), i: fc.nat(5) }), weight: 2 },
  { arbitrary: fc.constant({ k: "readCommits" as const }), weight: 3 },
  { arbitrary: fc.constant({ k: "closeWindow" as const }), weight: 2 },
  fc.constant({ k: "save" as const }),
  { arbitrary: fc.constant({ k: "cooldownPublish" as const }), weight: 2 },
  {
    arbitrary: fc.record({ k: fc.constant("foreignPush" as const), dropFolder: fc.boolean() }),
    weight: 2,
  },
  { arbitrary: fc.constant({ k: "observe" as const }), weight: 3 },
  { arbitrary: fc.constant({ k: "completeFlush" as const }), weight: 4 },
  fc.constant({ k: "failFlush" as const }),
  fc.record({ k: fc.constant("refusal" as const), t: fc.nat(3) }),
  {
    arbitrary: fc.record({
      k: fc.constant("execute" as const),
      i: fc.nat(5),
      outcome: fc.constantFrom<ReportPhase>(
        "Succeeded",
        "Succeeded",
        "Failed",
        "Superseded",
        "Rejected",
        "Dropped",
        "RequestFailed",
      ),
    }),
    weight: 4,
  },
  { arbitrary: fc.record({ k: fc.constant("deliver" as const), i: fc.nat(6) }), weight: 5 },
  fc.record({ k: fc.constant("duplicate" as const), i: fc.nat(6) }),
  fc.record({ k: fc.constant("lose" as const), i: fc.nat(6) }),
  fc.record({
    k: fc.constant("applierWrite" as const),
    c: fc.nat(2),
    o: fc.nat(3),
    dt: fc.integer({ min: -3, max: 3 }),
  }),
  {
    arbitrary: fc.record({
      k: fc.constant("raceApply" as const),
      t: fc.nat(3),
      o: fc.nat(3),
      dt: fc.integer({ min: 0, max: 2 }),
    }),
    weight: 3,
  },
  {
    arbitrary: fc.record({
      k: fc.constant("advance" as const),
      ms: fc.oneof(
        fc.integer({ min: 0, max: 3_000 }),
        fc.integer({ min: 0, max: 70_000 }),
        fc.integer({ min: 0, max: 600_000 }),
        fc.integer({ min: -5_000, max: 0 }),
      ),
    }),
    weight: 3,
  },
  fc.record({ k: fc.constant("restart" as const), saved: fc.boolean() }),
  fc.constant({ k: "listClaims" as const }),
  fc.constant({ k: "toggleConsent" as const }),
);

interface Edit {
  uid: string;
  object: string;
  at: number;
  created: boolean;
}

/** The simulated shell and world around the core. */
class World {
  state: DecisionState;
  now = Date.parse("2026-03-01T10:00:00Z");
  restarts = 0;
  // The remote: a linear history; each commit holds a set of our writes, and the GitTargets' folders.
  commits = new Map<string, Set<string>>([[sha(1), new Set()]]);
  folders = new Map<string, Set<string>>([
    [sha(1), new Set(TARGETS.filter((t) => t.folder).map((t) => t.uid))],
  ]);
  remoteTip: string = sha(1);
  nextCommit = 2;
  lastOwnTip: string | null = null;
  publishedEver = new Set<string>();
  // The shell's commit window, decided writes and holds.
  open: Edit[] = [];
  decided: { id: string; uid: string }[] = [];
  decidedEvents = new Map<string, DecisionEvent>();
  nextWrite = 0;
  seenObjects = new Set<string>();
  pendingFlush: { flush: number } | null = null;
  consent: Record<string, "Ignore" | "Reapply"> = Object.fromEntries(
    TARGETS.map((t) => [t.uid, t.onRefusal]),
  );
  // The executor side.
  queued: Attempt[] = [];
  mailbox: DecisionEvent[] = [];
  truth: Record<string, ClaimStatusSnapshot> = Object.fromEntries(
    CLAIMS.map((c) => [c, { ...fluxClaim(c), source: `flux-system/${SOURCE[c]}` }]),
  );
  observedSinceStart = false;
  attemptsSent = 0;
  collisions = 0;
  restartsWithRepair = 0;
  // Governance: the parent of each commit, the foreign ones, and those approved (by claim `a`).
  parent = new Map<string, string | null>([[sha(1), null]]);
  foreign = new Set<string>();
  approved = new Set<string>();
  held = 0;
  governedSends = 0;

  constructor(readonly governed = false) {
    this.state = step(
      initialState(BRANCH, "r0"),
      { type: "Restarted", tokenPrefix: "r0", claims: Object.values(this.truth) },
      this.now,
    ).state;
    this.feed({ type: "TargetsListed", targets: this.listing() });
  }

  listing(): ListedTarget[] {
    return TARGETS.map((t) =>
      listed(t.uid, t.claim, {
        sourceName: t.source,
        onRefusal: this.consent[t.uid] ?? "Ignore",
        ...(this.governance(t.claim) ? { governance: this.governance(t.claim) as TargetGovernance } : {}),
      }),
    );
  }

  governance(claim: string): TargetGovernance | undefined {
    if (!this.governed) return undefined;
    if (claim === "a")
      return {
        changeWindows: CHANGE_WINDOWS,
        approval: { sources: ["Manual"] },
        approved: Object.fromEntries([...this.approved].map((c) => [c, { Manual: { by: "ada" } }])),
      };
    if (claim === "c") return { changeWindows: [], syncWindows: SYNC_WINDOWS };
    return undefined;
  }

  /** The foreign commits on the line from `tip` back to `since` (all of them when `since` is not on it). */
  foreignSince(tip: string, since: string | null): string[] {
    const out: string[] = [];
    for (let c: string | null = tip; c !== null && c !== since; c = this.parent.get(c) ?? null)
      if (this.foreign.has(c)) out.push(c);
    return out;
  }

  /** The shell reads the foreign commits since claim `a`'s last applied commit, for the core's tip. */
  readCommits(): void {
    if (!this.governed || this.state.tip === null) return;
    const key = claimKey(fluxClaim("a").claim);
    const a = this.state.appliers[key];
    if (!a) return;
    const read: ForeignRead = {
      tip: this.state.tip,
      since: a.lastAppliedCommit,
      commits: this.foreignSince(this.state.tip, a.lastAppliedCommit),
    };
    this.feed({ type: "CommitsRead", reads: { [key]: read } });
  }

  /** Approves one foreign commit not approved yet (or every one), and the listing says so. */
  approve(i: number | "all"): void {
    if (!this.governed) return;
    const open = [...this.foreign].filter((c) => !this.approved.has(c));
    if (open.length === 0) return;
    for (const c of i === "all" ? open : [open[i % open.length] as string]) this.approved.add(c);
    this.feed({ type: "TargetsListed", targets: this.listing() });
  }

  /** Never an attempt for a tip with an unapproved foreign commit, or outside a window. */
  checkGovernance(att: Attempt): void {
    if (!this.governed) return;
    const claim = att.claim.name;
    if (claim === "a") {
      const since = (this.truth.a as ClaimStatusSnapshot).lastAppliedCommit ?? null;
      for (const c of this.foreignSince(att.commit, since))
        expect(this.approved.has(c), `attempt ${att.token} for ${att.commit} brings unapproved ${c}`).toBe(
          true,
        );
      expect(changeWindowOpen(this.now), `attempt for a at ${new Date(this.now).toISOString()}`).toBe(true);
      this.governedSends += 1;
    }
    if (claim === "c") {
      expect(syncWindowOpen(this.now), `attempt for c at ${new Date(this.now).toISOString()}`).toBe(true);
      this.governedSends += 1;
    }
  }

  /** Feeds one event and checks every invariant on what comes out. */
  feed(event: DecisionEvent): DecisionAction[] {
    const { state, actions } = step(this.state, event, this.now);
    this.collisions += actions.filter((a) => a.type === "LogCollision").length;
    if (event.type === "Observed" || event.type === "Published") this.observedSinceStart = true;
    for (const a of actions) {
      if (a.type === "Flush") {
        expect(this.observedSinceStart, "no flush before the first observation").toBe(true);
        this.pendingFlush = { flush: a.flush };
      }
      if (a.type === "SendAttempt") {
        expect(this.observedSinceStart, "no attempt before the first observation").toBe(true);
        expect(
          event.type === "Published" && event.flush !== undefined,
          "an attempt only after its flush",
        ).toBe(true);
        expect(a.attempt.commit, "the attempt is for the tip the publication produced").toBe(this.remoteTip);
        const inTree = this.folders.get(a.attempt.commit) ?? new Set();
        for (const t of TARGETS.filter((x) => x.claim === a.attempt.claim.name))
          expect(inTree.has(t.uid), `the folder of ${t.uid} is in the attempt's tip`).toBe(true);
        const holds = this.commits.get(a.attempt.commit) ?? new Set();
        for (const w of this.publishedEver)
          expect(holds.has(w), `commit holds published write ${w}`).toBe(true);
        this.checkGovernance(a.attempt);
        // One operation per claim: an attempt of the claim still queued would be refused
        // (OperationInFlight) once recorded, or run beside this one before.
        const earlier = this.queued.find((q) => q.claim.name === a.attempt.claim.name);
        expect(earlier?.token, `an attempt for ${a.attempt.claim.name} while one is queued`).toBeUndefined();
        this.queued.push(a.attempt);
        this.attemptsSent += 1;
      }
    }
    this.state = state;
    // What `applygate status` would say of this state agrees with what the step did: an applier
    // explained as getting an attempt now would have had its flush started, and one sent an
    // attempt is applying.
    const explained = explainBranch(state, this.now);
    for (const ap of explained.appliers) {
      expect(ap.waiting, `${ap.key} explained as due with nothing holding it`).not.toBeNull();
      if (actions.some((a) => a.type === "SendAttempt" && claimKey(a.attempt.claim) === ap.key))
        expect(ap.state, `${ap.key} was sent an attempt`).toBe("applying");
    }
    this.held += actions.filter(
      (a) => a.type === "RecordGate" && a.gate.condition?.status === "False",
    ).length;
    const bySource = new Map<string, number>();
    for (const ap of Object.values(state.appliers)) {
      if (ap.operation) bySource.set(ap.source, (bySource.get(ap.source) ?? 0) + 1);
    }
    for (const [source, n] of bySource)
      expect(n, `operations out on source ${source}`).toBeLessThanOrEqual(1);
    return actions;
  }

  decideOpen(): void {
    const byTarget = new Map<string, Edit[]>();
    for (const e of this.open) byTarget.set(e.uid, [...(byTarget.get(e.uid) ?? []), e]);
    this.open = [];
    for (const [uid, edits] of byTarget) {
      const id = `w${++this.nextWrite}`;
      const ev: DecisionEvent = {
        type: "WriteDecided",
        entryId: id,
        targetUid: uid,
        createdObjects: edits.filter((e) => e.created).map((e) => cm(e.object)),
        editedObjects: edits.map((e) => ({ ref: cm(e.object), editedAt: new Date(e.at).toISOString() })),
      };
      this.decided.push({ id, uid });
      this.decidedEvents.set(id, ev);
      this.feed(ev);
    }
  }

  /** Publishes the decided writes up to `count` onto the remote tip (replaying onto a foreign one). */
  publishDecided(count: number, flush?: number): void {
    if (this.remoteTip !== this.lastOwnTip && this.state.tip !== this.remoteTip) {
      this.feed({ type: "Observed", tip: this.remoteTip, pushedByUs: false, folders: this.foldersAt() });
    }
    const landed = this.decided.slice(0, count);
    this.decided = this.decided.slice(count);
    if (landed.length > 0) {
      const holds = new Set(this.commits.get(this.remoteTip));
      const folders = new Set(this.folders.get(this.remoteTip));
      for (const w of landed) {
        holds.add(w.id);
        this.publishedEver.add(w.id);
        folders.add(w.uid);
      }
      const id = sha(this.nextCommit++);
      this.commits.set(id, holds);
      this.folders.set(id, folders);
      this.parent.set(id, this.remoteTip);
      this.remoteTip = id;
      this.lastOwnTip = id;
    }
    const mark = landed.at(-1)?.id ?? null;
    this.feed({
      type: "Published",
      upToMark: mark,
      tip: this.remoteTip,
      folders: this.foldersAt(),
      ...(flush !== undefined ? { flush } : {}),
    });
  }

  /** The GitTargets whose folder the remote tip's tree holds (what the shell reads). */
  foldersAt(): string[] {
    return [...(this.folders.get(this.remoteTip) ?? [])];
  }

  completeFlush(): void {
    if (!this.pendingFlush) return;
    const { flush } = this.pendingFlush;
    this.pendingFlush = null;
    this.decideOpen();
    this.publishDecided(this.decided.length, flush);
  }

  /** The executor carries out one attempt and queues its reports. */
  execute(i: number, outcome: ReportPhase): void {
    const att = this.queued.splice(i % Math.max(1, this.queued.length), 1)[0];
    if (!att) return;
    const status = this.truth[att.claim.name] as ClaimStatusSnapshot;
    const r = (phase: ReportPhase, commit?: string): DecisionEvent => {
      const report: PhaseReport = {
        type: "phase",
        token: att.token,
        claim: att.claim,
        branchKey: BRANCH.key,
        phase,
        at: new Date(this.now).toISOString(),
        ...(commit ? { commit } : {}),
      };
      return { type: "Report", report };
    };
    if (att.commit !== this.remoteTip) {
      this.mailbox.push(r("Stale"));
      return;
    }
    if (outcome === "RequestFailed" || outcome === "Rejected" || outcome === "Dropped") {
      this.mailbox.push(r(outcome));
      return;
    }
    status.operation = {
      token: att.token,
      phase: outcome,
      commit: att.commit,
      targets: att.targets.map((t) => ({ uid: t.uid, reason: t.reason })),
    };
    if (outcome === "Succeeded") status.lastAppliedCommit = att.commit;
    this.mailbox.push(r("Requested"), r("Running"), r(outcome, att.commit));
  }

  restart(saved: boolean): void {
    this.restarts += 1;
    this.pendingFlush = null;
    this.observedSinceStart = false;
    // No saved state: Redis lost what it held, the attempts queued and the reports in the inbox.
    if (!saved) {
      this.queued = [];
      this.mailbox = [];
    }
    const claims = Object.values(this.truth).map((c) => ({
      ...c,
      repairPending: this.state.appliers[claimKey(c.claim)]?.repairRecorded === true,
    }));
    if (claims.some((c) => c.repairPending)) this.restartsWithRepair += 1;
    this.feed({
      type: "Restarted",
      tokenPrefix: `r${this.restarts}`,
      claims,
      ...(saved ? { saved: JSON.parse(JSON.stringify(this.state)) } : {}),
      // The shell reads which of the saved attempts the queue still holds.
      queued: this.queued.map((q) => q.token),
    });
    // The shell's listing carries its read of the remote tip, which the core may not have observed.
    this.feed({
      type: "TargetsListed",
      targets: this.listing(),
      folders: { commit: this.remoteTip, present: this.foldersAt() },
    });
    // Without a saved state the shell hands its unpublished writes to the core again.
    if (!saved) for (const w of this.decided) this.feed(this.decidedEvents.get(w.id) as DecisionEvent);
  }

  apply(op: Op): void {
    switch (op.k) {
      case "edit": {
        const t = TARGETS[op.t] as (typeof TARGETS)[number];
        const object = `o${op.o}`;
        const key = `${t.uid}/${object}`;
        this.open.push({ uid: t.uid, object, at: this.now, created: !this.seenObjects.has(key) });
        this.seenObjects.add(key);
        break;
      }
      case "approve":
        this.approve(op.i);
        break;
      case "readCommits":
        this.readCommits();
        break;
      case "closeWindow":
        this.decideOpen();
        break;
      // A save closes its window at once, as the branch worker does.
      case "save":
        this.decideOpen();
        break;
      case "cooldownPublish":
        if (this.decided.length > 0) this.publishDecided(this.decided.length);
        break;
      case "foreignPush": {
        const id = sha(this.nextCommit++);
        this.commits.set(id, new Set(this.commits.get(this.remoteTip)));
        // Somebody else's commit may remove a folder (u3's), or bring it back.
        const folders = new Set(this.folders.get(this.remoteTip));
        if (op.dropFolder) folders.delete("u3");
        else folders.add("u3");
        this.folders.set(id, folders);
        this.parent.set(id, this.remoteTip);
        this.foreign.add(id);
        this.remoteTip = id;
        break;
      }
      case "observe":
        this.feed({
          type: "Observed",
          tip: this.remoteTip,
          pushedByUs: this.remoteTip === this.lastOwnTip,
          folders: this.foldersAt(),
        });
        break;
      case "completeFlush":
        this.completeFlush();
        break;
      case "failFlush":
        if (this.pendingFlush) {
          const { flush } = this.pendingFlush;
          this.pendingFlush = null;
          this.feed({ type: "FlushFailed", flush });
        }
        break;
      case "refusal":
        this.feed({ type: "RefusalReceived", targetUid: (TARGETS[op.t] as (typeof TARGETS)[number]).uid });
        break;
      case "execute":
        this.execute(op.i, op.outcome);
        break;
      case "deliver":
      case "duplicate":
      case "lose": {
        if (this.mailbox.length === 0) break;
        const i = op.i % this.mailbox.length;
        const ev = this.mailbox[i] as DecisionEvent;
        if (op.k !== "duplicate") this.mailbox.splice(i, 1);
        if (op.k !== "lose") this.feed(ev);
        break;
      }
      case "applierWrite": {
        const c = CLAIMS[op.c] as string;
        const at = new Date(this.now + op.dt * 1000).toISOString();
        this.feed({
          type: "ApplierWrite",
          report: {
            type: "applierWrite",
            token: "observer",
            claim: fluxClaim(c).claim,
            branchKey: BRANCH.key,
            object: cm(`o${op.o}`),
            manager: "kustomize-controller",
            writtenAt: at,
            resourceVersion: "1",
            observedAt: at,
          },
        });
        break;
      }
      case "raceApply": {
        // An edit decided while its applier may be applying, then the applier's write to the same object.
        const t = TARGETS[op.t] as (typeof TARGETS)[number];
        this.apply({ k: "edit", t: op.t, o: op.o });
        this.decideOpen();
        this.apply({ k: "applierWrite", c: CLAIMS.indexOf(t.claim), o: op.o, dt: op.dt });
        break;
      }
      case "advance":
        this.now += op.ms;
        this.feed({ type: "Tick" });
        break;
      case "restart":
        this.restart(op.saved);
        break;
      case "listClaims":
        this.feed({ type: "ClaimsRead", claims: Object.values(this.truth) });
        break;
      case "toggleConsent":
        this.consent.u3 = this.consent.u3 === "Reapply" ? "Ignore" : "Reapply";
        this.feed({ type: "TargetsListed", targets: this.listing() });
        break;
    }
  }

  quiet(): boolean {
    return (
      this.state.flush === null &&
      Object.values(this.state.appliers).every((a) => a.operation === null && !hasPending(a.pending))
    );
  }

  /** Lets every applier succeed from now on and runs until nothing is pending. */
  drain(): void {
    // Every GitTarget gets a write, so each is past the barrier.
    for (const [i] of TARGETS.entries()) this.apply({ k: "edit", t: i, o: 0 });
    this.decideOpen();
    this.publishDecided(this.decided.length);
    // Reports lost for good are recovered from the claims' status by a restart.
    this.restart(true);
    this.approve("all");
    for (let round = 0; round < 60 && !(this.observedSinceStart && this.quiet()); round++) {
      this.apply({ k: "observe" });
      this.readCommits();
      this.completeFlush();
      while (this.queued.length > 0) this.execute(0, "Succeeded");
      while (this.mailbox.length > 0) this.apply({ k: "deliver", i: 0 });
      this.apply({ k: "advance", ms: 6 * 60_000 });
    }
  }
}

describe("decision core, model-based", () => {
  it("keeps its invariants over random interleavings, and answers every reason once the appliers succeed", () => {
    let attempts = 0;
    let collisions = 0;
    let restartsWithRepair = 0;
    fc.assert(
      fc.property(fc.array(opArb, { minLength: 1, maxLength: 150, size: "max" }), (ops) => {
        const w = new World();
        for (const op of ops) w.apply(op);
        w.drain();
        expect(w.quiet(), JSON.stringify(w.state.appliers)).toBe(true);
        attempts += w.attemptsSent;
        collisions += w.collisions;
        restartsWithRepair += w.restartsWithRepair;
      }),
      { numRuns: 200 },
    );
    // The runs exercised the sending path, not only the holds.
    expect(attempts).toBeGreaterThan(300);
    // ... and the apply window's collisions and a restart carrying repairPending.
    expect(collisions).toBeGreaterThan(10);
    expect(restartsWithRepair).toBeGreaterThan(10);
  });
});

describe("decision core, model-based, governed", () => {
  it("never sends an attempt for a tip with an unapproved foreign commit, or outside a change or sync window", () => {
    let governedSends = 0;
    let held = 0;
    fc.assert(
      fc.property(fc.array(opArb, { minLength: 1, maxLength: 150, size: "max" }), (ops) => {
        const w = new World(true);
        for (const op of ops) w.apply(op);
        w.drain();
        expect(w.quiet(), JSON.stringify(w.state.appliers)).toBe(true);
        governedSends += w.governedSends;
        held += w.held;
      }),
      { numRuns: 150 },
    );
    // The runs sent governed attempts, and the rules held some.
    expect(governedSends).toBeGreaterThan(100);
    expect(held).toBeGreaterThan(50);
  });
});
