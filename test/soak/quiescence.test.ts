import { describe, expect, it } from "vitest";
import { judgeLook, type Look, openAttempts, recordHolds, waitQuiet, whyNotQuiet } from "./quiescence.js";

/**
 * Seed 8023's run as recorded (ms from the run's start): the Git outage held e5/e6 back until
 * their publication at 68,958 ms (tip 089858a5 → fdcc208c, its push notice a moment later); the
 * worker's flush, backed off by the outage, sent f-8 (Argo CD) and f-9 (Flux) at 72,362 ms, 3.4 s
 * later; f-8 was Requested at 72,836 and Running at 75,208. Reading the record took 3.6 s. The ends
 * of f-8 and f-9 (80 s, 85 s) are where the run would have seen them had it waited.
 */
interface Sent {
  token: string;
  at: number;
  endsAt: number;
  reports: number[];
}
const sent8023: Sent[] = [
  { token: "f-5", at: 33_401, endsAt: 42_465, reports: [33_735, 35_567] },
  { token: "f-6", at: 33_401, endsAt: 51_073, reports: [49_233, 49_435, 50_744] },
  { token: "f-8", at: 72_362, endsAt: 80_000, reports: [72_836, 75_208] },
  { token: "f-9", at: 72_362, endsAt: 85_000, reports: [] },
];
const PUBLISHED_AT = 68_958;
/** p4's push (56,839 ms) made a ForeignCommit due for both appliers; f-8 and f-9 carried it away. */
const DUE_FROM = 56_839;

interface Timeline {
  sent?: Sent[];
  /** The decision state is read (the fix); false: a look blind to an apply due, as before. */
  seesDue?: boolean;
}

function lookAt(t: number, tl: Timeline = {}): Look {
  const sent = tl.sent ?? sent8023;
  const seen = sent.filter((s) => s.at <= t);
  const reports = seen.flatMap((s) => [...s.reports, s.endsAt]).filter((r) => r <= t).length;
  const sendAt = Math.min(...sent.filter((s) => s.at > DUE_FROM).map((s) => s.at));
  const due =
    tl.seesDue !== false && t >= DUE_FROM && t < sendAt
      ? ["argocd (ForeignCommit)", "flux (ForeignCommit)"]
      : [];
  return {
    at: t,
    unpublished: t < PUBLISHED_AT ? 2 : 0,
    sent: seen.map((s) => s.token),
    ended: seen.filter((s) => s.endsAt <= t).map((s) => s.token),
    unread: 0,
    due,
    differ: [],
    tip: t < PUBLISHED_AT ? "089858a5" : "fdcc208c",
    events: seen.length + reports + (t >= PUBLISHED_AT + 1 ? 1 : 0),
  };
}

/**
 * The run's wait over a recorded timeline: a look takes 150 ms and the next comes 200 ms later.
 * From 59.9 s they fall at 69,150 ms (the first after the publication) and 72,300 ms (3.15 s
 * later, 62 ms before the sends: the run's first quiet look, had it not seen the apply due).
 */
function replay(o: { from: number; readMs: number; timeoutMs?: number } & Timeline) {
  let now = o.from;
  const reads: number[] = [];
  return {
    reads,
    end: waitQuiet({
      look: async () => {
        now += 150;
        return lookAt(now, o);
      },
      readRecord: async () => {
        reads.push(now);
        now += o.readMs;
      },
      drained: async () => {},
      quietMs: 3_000,
      timeoutMs: o.timeoutMs ?? 90_000,
      everyMs: 200,
      now: () => now,
      sleep: async (ms) => {
        now += ms;
      },
    }),
  };
}

async function quietEnd(r: ReturnType<typeof replay>): Promise<Look> {
  const end = await r.end;
  if (!end.quiet) throw new Error(`not quiet: ${end.look ? whyNotQuiet(end.look) : "no look"}`);
  return end.look;
}

describe("the soak's quiescence", () => {
  it("seed 8023: the apply due after the backed-off flush holds the wait past the publication, until f-8 and f-9 ended", async () => {
    const r = replay({ from: 59_900, readMs: 3_600 });
    const look = await quietEnd(r);
    // No quiet look between the publication and the sends: the record is read once, at the end.
    expect(r.reads.length).toBe(1);
    expect(r.reads[0]).toBeGreaterThanOrEqual(85_000 + 3_000);
    expect(look.sent).toEqual(["f-5", "f-6", "f-8", "f-9"]);
    expect(openAttempts(look)).toEqual([]);
  });

  it("seed 8023 blind to the apply due: quiet 62 ms before the sends, the record read after holds them unended, so the wait goes on until they ended", async () => {
    const r = replay({ from: 59_900, readMs: 3_600, seesDue: false });
    const look = await quietEnd(r);
    expect(r.reads[0]).toBe(72_300);
    expect(openAttempts(lookAt(72_300 + 3_600 + 150))).toEqual(["f-8", "f-9"]);
    expect(look.sent).toEqual(["f-5", "f-6", "f-8", "f-9"]);
    expect(openAttempts(look)).toEqual([]);
    expect(look.at).toBeGreaterThanOrEqual(85_000 + 3_000);
  });

  it("an attempt sent only after the record was read and found still is not the run's: the record judged is the quiet look's", async () => {
    const later = sent8023.map((s) => (s.at === 72_362 ? { ...s, at: 76_000 } : s));
    const look = await quietEnd(replay({ from: 59_900, readMs: 100, sent: later, seesDue: false }));
    expect(look.at).toBeLessThan(76_000);
    expect(look.sent).toEqual(["f-5", "f-6"]);
  });

  it("an attempt that never ends keeps the run from quiescence, and the end says which", async () => {
    const never = sent8023.map((s) => (s.token === "f-9" ? { ...s, endsAt: Number.POSITIVE_INFINITY } : s));
    const r = await replay({ from: 59_900, readMs: 3_600, timeoutMs: 60_000, sent: never }).end;
    expect(r.quiet).toBe(false);
    expect(r.look && whyNotQuiet(r.look)).toBe("attempt(s) sent and not ended: f-9");
  });

  it("a job the queues announced and not read yet is not quiet (an attempt may be on its way)", () => {
    const l = { ...lookAt(90_000), unread: 1 };
    const first = judgeLook(undefined, l, 3_000);
    expect(judgeLook(first.still, { ...l, at: 94_000 }, 3_000).quiet).toBe(false);
    expect(judgeLook(first.still, { ...l, at: 94_000, unread: 0 }, 3_000).quiet).toBe(false);
    const calm = judgeLook(undefined, lookAt(90_000), 3_000);
    expect(judgeLook(calm.still, { ...lookAt(90_000), at: 93_100 }, 3_000).quiet).toBe(true);
  });

  it("the record holds only when nothing moved while it was read", () => {
    expect(recordHolds(lookAt(90_000), { ...lookAt(90_000), at: 93_600 })).toBe(true);
    expect(recordHolds(lookAt(72_000), lookAt(75_600))).toBe(false);
    expect(recordHolds(lookAt(90_000), { ...lookAt(90_000), tip: "moved" })).toBe(false);
    expect(recordHolds(lookAt(90_000), { ...lookAt(90_000), due: ["flux (Repair)"] })).toBe(false);
  });
});
