import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  type BalanceSettings,
  DEFAULT_BALANCE,
  decideHandover,
  fairShare,
  handoverRate,
  type OwnedBranch,
  slackOf,
  takeBudget,
} from "./balance.js";

const branches = (n: number, o: Partial<OwnedBranch> = {}): OwnedBranch[] =>
  Array.from({ length: n }, (_, i) => ({
    key: `b${String(i).padStart(3, "0")}`,
    takenAt: 0,
    quiet: true,
    ...o,
  }));

const NOW = 1_000_000;

describe("the fair share and its slack", () => {
  it("is ceil(known / live), with this replica counted when nobody answered", () => {
    expect(fairShare(20, 2)).toBe(10);
    expect(fairShare(21, 2)).toBe(11);
    expect(fairShare(20, 3)).toBe(7);
    expect(fairShare(0, 3)).toBe(0);
    expect(fairShare(5, 0)).toBe(5);
    expect(fairShare(-1, 2)).toBe(0);
  });

  it("lets a replica be 10 % over its share, at least one branch", () => {
    expect([0, 1, 9, 10, 19, 20, 100, 500].map(slackOf)).toEqual([1, 1, 1, 1, 1, 2, 10, 50]);
  });
});

describe("decideHandover, every small fleet", () => {
  it("starts over share + slack, goes on down to the share, never below it, at most its rate a round", () => {
    const settings: BalanceSettings = { perRound: 3, sharePerRound: 0.2, minHoldMs: 0 };
    let cases = 0;
    for (let known = 0; known <= 40; known++)
      for (let live = 0; live <= 5; live++)
        for (let owned = 0; owned <= known + 2; owned++)
          for (const was of [false, true]) {
            const d = decideHandover(
              { known, live, owned: branches(owned), now: NOW, handingOver: was },
              settings,
            );
            const share = fairShare(Math.max(known, owned), live);
            const slack = slackOf(share);
            const on = owned > share + slack || (was && owned > share);
            expect(d.share).toBe(share);
            expect(d.handingOver).toBe(on);
            const rate = Math.max(3, Math.ceil(share / 5));
            expect(d.handOver.length).toBe(on ? Math.min(rate, owned - share) : 0);
            expect(owned - d.handOver.length).toBeGreaterThanOrEqual(Math.min(owned, share));
            expect(new Set(d.handOver).size).toBe(d.handOver.length);
            cases++;
          }
    expect(cases).toBeGreaterThan(10_000);
  });

  it("branches still waiting to start count as owned and go back first, all that are over the share, whatever the rate", () => {
    const settings: BalanceSettings = { perRound: 3, sharePerRound: 0.2, minHoldMs: 0 };
    let cases = 0;
    for (let known = 0; known <= 40; known++)
      for (let live = 1; live <= 4; live++)
        for (let running = 0; running <= known; running++)
          for (let waiting = 0; running + waiting <= known + 1; waiting++)
            for (const was of [false, true]) {
              const owned = running + waiting;
              const d = decideHandover(
                { known, live, owned: branches(running), waiting, now: NOW, handingOver: was },
                settings,
              );
              const share = fairShare(Math.max(known, owned), live);
              const on = owned > share + slackOf(share) || (was && owned > share);
              expect(d.handingOver).toBe(on);
              const back = on ? Math.min(waiting, owned - share) : 0;
              expect(d.giveBack).toBe(back);
              const rate = Math.max(3, Math.ceil(share / 5));
              expect(d.handOver.length).toBe(on ? Math.min(rate, owned - share - back) : 0);
              // Never below the share.
              expect(owned - back - d.handOver.length).toBeGreaterThanOrEqual(Math.min(owned, share));
              cases++;
            }
    expect(cases).toBeGreaterThan(10_000);
    // Two replicas started together, the first to sweep took all 1,000 and started 100: it gives
    // back 500 waiting at once, and hands over no running branch.
    expect(
      decideHandover({
        known: 1000,
        live: 2,
        owned: branches(100),
        waiting: 900,
        now: NOW,
        handingOver: false,
      }),
    ).toMatchObject({ share: 500, handingOver: true, giveBack: 500, handOver: [] });
  });

  it("hands over nothing at its share or within the slack unless a hand-over is under way", () => {
    const at = (owned: number, was: boolean) =>
      decideHandover({ known: 20, live: 2, owned: branches(owned), now: NOW, handingOver: was });
    expect(at(10, false).handOver).toEqual([]);
    expect(at(11, false).handOver).toEqual([]); // share 10, slack 1
    expect(at(12, false).handOver).toHaveLength(2);
    expect(at(11, true).handOver).toHaveLength(1);
    expect(at(10, true)).toEqual({ share: 10, handingOver: false, handOver: [], giveBack: 0 });
  });

  it("a lone replica keeps everything", () => {
    const d = decideHandover({ known: 1000, live: 1, owned: branches(1000), now: NOW, handingOver: true });
    expect(d).toEqual({ share: 1000, handingOver: false, handOver: [], giveBack: 0 });
  });

  it("chooses only quiet branches held long enough, the longest held first, then by key", () => {
    const owned: OwnedBranch[] = [
      { key: "busy", takenAt: 0, quiet: false },
      { key: "young", takenAt: NOW - 4_999, quiet: true },
      { key: "c", takenAt: 300, quiet: true },
      { key: "b", takenAt: 100, quiet: true },
      { key: "a", takenAt: 100, quiet: true },
      { key: "old", takenAt: NOW - 5_000, quiet: true },
      ...branches(14, { takenAt: 50, quiet: false }),
    ];
    const d = decideHandover({ known: 20, live: 2, owned, now: NOW, handingOver: false });
    expect(d.share).toBe(10);
    expect(d.handOver).toEqual(["a", "b", "c", "old"]);
    // Fewer quiet ones than the excess: those there are; the rest wait for a later round.
    const d2 = decideHandover(
      { known: 20, live: 2, owned: owned.filter((b) => b.key !== "old"), now: NOW, handingOver: false },
      { ...DEFAULT_BALANCE, perRound: 2 },
    );
    expect(d2.handOver).toEqual(["a", "b"]);
    expect(d2.handingOver).toBe(true);
  });

  it("counts the branches it owns when the known set was read smaller", () => {
    const d = decideHandover({ known: 4, live: 2, owned: branches(10), now: NOW, handingOver: false });
    expect(d.share).toBe(5);
    expect(d.handOver).toHaveLength(5);
  });

  it("a negative or zero round limit hands over nothing", () => {
    const d = decideHandover(
      { known: 20, live: 2, owned: branches(20), now: NOW, handingOver: false },
      { perRound: 0, sharePerRound: 0, minHoldMs: 0 },
    );
    expect(d.handOver).toEqual([]);
    expect(d.handingOver).toBe(true);
  });
});

describe("handoverRate", () => {
  it("is perRound for a small share and a tenth of a large one", () => {
    const rate = (share: number) => handoverRate(share, DEFAULT_BALANCE);
    expect([0, 10, 80, 81, 500, 5000].map(rate)).toEqual([8, 8, 8, 9, 50, 500]);
    expect(handoverRate(500, { ...DEFAULT_BALANCE, perRound: -1, sharePerRound: -1 })).toBe(0);
  });

  it("evens a thousand branches out between two replicas in ten rounds (20 s at the default period)", () => {
    let owned = 1000;
    let rounds = 0;
    let handing = false;
    while (rounds < 100) {
      const d = decideHandover(
        { known: 1000, live: 2, owned: branches(owned), now: NOW, handingOver: handing },
        DEFAULT_BALANCE,
      );
      if (d.handOver.length === 0) break;
      handing = d.handingOver;
      owned -= d.handOver.length;
      rounds++;
    }
    expect(owned).toBe(500);
    expect(rounds).toBe(10);
  });
});

describe("takeBudget", () => {
  it("takes hand-overs up to the share, any number before the share is known", () => {
    expect(takeBudget(0, 10)).toBe(10);
    expect(takeBudget(7, 10)).toBe(3);
    expect(takeBudget(10, 10)).toBe(0);
    expect(takeBudget(14, 10)).toBe(0);
    expect(takeBudget(3, undefined)).toBe(Number.POSITIVE_INFINITY);
  });
});

/**
 * A model of the fleet: rounds of every replica deciding, hand-overs waiting for a replica under its
 * share (until their marker lapses, a round later: then any replica), replicas joining and leaving
 * (a leaving one gives its branches back without a marker: the first sweep takes them).
 */
function simulate(o: {
  known: number;
  replicas: number;
  joinAt: number[];
  leaveAt?: { replica: number; round: number };
  quiet: (round: number, key: string) => boolean;
  order: (round: number) => number[];
  rounds: number;
}) {
  const settings: BalanceSettings = { perRound: 4, sharePerRound: 0.1, minHoldMs: 2 };
  const owner = new Map<string, { replica: number; takenAt: number }>();
  for (let i = 0; i < o.known; i++) owner.set(`b${i}`, { replica: 0, takenAt: 0 });
  const handing = new Map<number, boolean>();
  const freed = new Map<string, { by: number | undefined; at: number }>();
  const moves = new Map<string, number>();
  let lastMoveRound = -1;
  const alive = (r: number, round: number) =>
    (o.joinAt[r] ?? 0) <= round && !(o.leaveAt && o.leaveAt.replica === r && round >= o.leaveAt.round);
  for (let round = 1; round <= o.rounds; round++) {
    const live = Array.from({ length: o.replicas }, (_, r) => r).filter((r) => alive(r, round));
    for (const [key, v] of owner)
      if (!live.includes(v.replica)) {
        owner.delete(key);
        freed.set(key, { by: undefined, at: round });
      }
    const ownedBy = (r: number) => [...owner].filter(([, v]) => v.replica === r);
    const shares = new Map<number, number>();
    for (const r of o.order(round).filter((x) => live.includes(x))) {
      const owned = ownedBy(r).map(([key, v]) => ({ key, takenAt: v.takenAt, quiet: o.quiet(round, key) }));
      const d = decideHandover(
        { known: o.known, live: live.length, owned, now: round, handingOver: handing.get(r) ?? false },
        settings,
      );
      handing.set(r, d.handingOver);
      shares.set(r, d.share);
      for (const key of d.handOver) {
        owner.delete(key);
        freed.set(key, { by: r, at: round });
        moves.set(key, (moves.get(key) ?? 0) + 1);
        lastMoveRound = round;
      }
    }
    // Sweeps: a free lease without a marker (or whose marker lapsed) goes to the first sweep; a
    // handed-over one to a replica under its share, never back to the one that handed it over.
    for (const r of o.order(round).filter((x) => live.includes(x))) {
      for (const [key, f] of [...freed]) {
        const lapsed = f.by === undefined || round > f.at;
        const budget = takeBudget(ownedBy(r).length, shares.get(r));
        if (!lapsed && (f.by === r || budget <= 0)) continue;
        freed.delete(key);
        owner.set(key, { replica: r, takenAt: round });
      }
    }
  }
  const live = Array.from({ length: o.replicas }, (_, r) => r).filter((r) => alive(r, o.rounds));
  const counts = live.map((r) => [...owner.values()].filter((v) => v.replica === r).length);
  return { counts, freed: freed.size, moves, lastMoveRound, live: live.length };
}

describe("a fleet deciding with decideHandover (model)", () => {
  it("spreads, settles and stops moving branches, whatever joins, leaves, or is busy", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 120 }),
        fc.integer({ min: 2, max: 4 }),
        fc.array(fc.integer({ min: 0, max: 30 }), { minLength: 4, maxLength: 4 }),
        fc.option(fc.integer({ min: 1, max: 40 }), { nil: undefined }),
        fc.integer({ min: 0, max: 2 ** 30 }),
        (known, replicas, joins, leaveRound, seed) => {
          const joinAt = [0, ...joins.slice(1)];
          const rand = (round: number, salt: string) => {
            let h = seed ^ (round * 2654435761);
            for (const c of salt) h = Math.imul(h ^ c.charCodeAt(0), 16777619);
            return ((h >>> 0) % 1000) / 1000;
          };
          // Busy for the first rounds only (a branch with an attempt out becomes quiet again).
          const quiet = (round: number, key: string) => round > 60 || rand(round, key) > 0.3;
          const order = (round: number) =>
            Array.from({ length: replicas }, (_, r) => r).sort(
              (a, b) => rand(round, `o${a}`) - rand(round, `o${b}`),
            );
          const leaveAt =
            leaveRound !== undefined && replicas > 2 ? { replica: 1, round: leaveRound + 30 } : undefined;
          const r = simulate({
            known,
            replicas,
            joinAt,
            ...(leaveAt ? { leaveAt } : {}),
            quiet,
            order,
            rounds: 400,
          });
          const share = fairShare(known, r.live);
          // Nothing is left unowned, every replica is within its share and slack, and it settled.
          expect(r.freed).toBe(0);
          expect(r.counts.reduce((a, b) => a + b, 0)).toBe(known);
          for (const c of r.counts) expect(c).toBeLessThanOrEqual(share + slackOf(share));
          expect(r.lastMoveRound).toBeLessThan(300);
          // No back and forth: every hand-over answers a change of the fleet (a join, a leave),
          // at most one per branch for each.
          const changes = 1 + joinAt.slice(0, replicas).filter((j) => j > 0).length + (leaveAt ? 1 : 0);
          for (const n of r.moves.values()) expect(n).toBeLessThanOrEqual(changes);
        },
      ),
      { numRuns: 300 },
    );
  });

  it("two replicas, the second started after the first took twenty: ten each, each branch moved at most once", () => {
    const r = simulate({
      known: 20,
      replicas: 2,
      joinAt: [0, 5],
      quiet: () => true,
      order: () => [0, 1],
      rounds: 50,
    });
    expect(r.counts).toEqual([10, 10]);
    expect(Math.max(...r.moves.values())).toBe(1);
    expect(r.moves.size).toBe(10);
  });

  it("a third replica joining two that share 20 gets its share from both", () => {
    const r = simulate({
      known: 20,
      replicas: 3,
      joinAt: [0, 2, 20],
      quiet: () => true,
      order: () => [0, 1, 2],
      rounds: 80,
    });
    expect(r.counts.reduce((a, b) => a + b, 0)).toBe(20);
    expect(Math.max(...r.counts)).toBeLessThanOrEqual(8);
    expect(Math.min(...r.counts)).toBeGreaterThanOrEqual(6);
  });
});
