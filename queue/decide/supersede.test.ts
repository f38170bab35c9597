import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { argoClaim, argoListed, Driver, listed, report, sends, sha } from "../../test/support/decisions.js";
import type { DecisionAction, DecisionEvent } from "./model.js";
import {
  type Ancestry,
  ancestryReadsAsked,
  judgeSupersession,
  type SupersessionVerdict,
} from "./supersede.js";

const TIP = "3d4ae03c9b1f0e2a7d6c5b4a39281706f5e4d3c2";
const OLD = "0a1b2c3d4e5f60718293a4b5c6d7e8f901234567";

describe("judgeSupersession: which revisions a tip supersedes", () => {
  const not = (why: string): SupersessionVerdict =>
    ({ verdict: "not-superseded", why }) as SupersessionVerdict;

  it("never a symbolic revision, whatever the clone would say", () => {
    for (const rev of [
      "main",
      "HEAD",
      "refs/heads/main",
      "v1.2.0",
      "release-7",
      "feature/x",
      "abc12",
      "g1234567",
    ])
      for (const a of [undefined, "ancestor", "not-ancestor", "unknown"] as const)
        expect(judgeSupersession(rev, TIP, a), rev).toEqual(not("Symbolic"));
  });

  it("never an operation with no revision, and nothing without a tip that is a commit", () => {
    for (const rev of [undefined, "", "  "])
      expect(judgeSupersession(rev, TIP, "ancestor")).toEqual(not("NoRevision"));
    for (const tip of [null, undefined, "", "main", TIP.slice(0, 12)])
      expect(judgeSupersession(OLD, tip, "ancestor"), String(tip)).toEqual(not("NoTip"));
  });

  it("never the tip itself, named in full or abbreviated, in any case", () => {
    for (const rev of [TIP, TIP.slice(0, 7), TIP.slice(0, 12), TIP.toUpperCase(), ` ${TIP} `])
      expect(judgeSupersession(rev, TIP, "ancestor"), rev).toEqual(not("SameCommit"));
  });

  it("a commit id that is not the tip asks the clone, and only a proven ancestor is superseded", () => {
    for (const rev of [OLD, OLD.slice(0, 7), OLD.toUpperCase()]) {
      expect(judgeSupersession(rev, TIP)).toEqual({ verdict: "prove", revision: rev.toLowerCase() });
      expect(judgeSupersession(rev, TIP, "ancestor")).toEqual({ verdict: "superseded" });
      // A commit the clone does not hold, or an abbreviation naming several.
      expect(judgeSupersession(rev, TIP, "unknown")).toEqual(not("Unknown"));
      // A descendant of the tip (a force-push back to an older commit), or another line.
      expect(judgeSupersession(rev, TIP, "not-ancestor")).toEqual(not("NotAncestor"));
    }
  });

  it("superseded exactly when the revision is a commit id other than the tip, proven its ancestor", () => {
    const hex = fc.stringMatching(/^[0-9a-fA-F]{1,41}$/);
    const any = fc.oneof(hex, fc.string(), fc.constantFrom("main", "HEAD", TIP, OLD));
    fc.assert(
      fc.property(
        any,
        fc.option(fc.oneof(fc.stringMatching(/^[0-9a-f]{40}$/), fc.string()), { nil: null }),
        fc.constantFrom<Ancestry | undefined>(undefined, "ancestor", "not-ancestor", "unknown"),
        (rev, tip, ancestry) => {
          const v = judgeSupersession(rev, tip, ancestry);
          const r = rev.trim().toLowerCase();
          const t = (tip ?? "").trim().toLowerCase();
          const id = /^[0-9a-f]{7,40}$/.test(r);
          const expected = id && /^[0-9a-f]{40}$/.test(t) && !t.startsWith(r) && ancestry === "ancestor";
          expect(v.verdict === "superseded").toBe(expected);
          if (v.verdict === "prove") expect(ancestry).toBeUndefined();
        },
      ),
    );
  });
});

/**
 * A commit graph as a Git clone holds it (parents per commit), and the ancestry its clone answers:
 * the reference the decisions are checked against, written without the rule.
 */
function ancestryIn(parents: Map<string, string[]>, rev: string, tip: string): Ancestry {
  if (!parents.has(rev) || !parents.has(tip)) return "unknown";
  const seen = new Set<string>();
  const todo = [...(parents.get(tip) ?? [])];
  while (todo.length) {
    const c = todo.pop() as string;
    if (c === rev) return "ancestor";
    if (seen.has(c)) continue;
    seen.add(c);
    todo.push(...(parents.get(c) ?? []));
  }
  return "not-ancestor";
}

describe("the branch worker ends an operation only when the tip supersedes it", () => {
  const ARGO = "ArgoCDClaim/apps/app";
  const FLUX = "FluxClaim/apps/app";
  const ends = (out: DecisionAction[]) => out.filter((a) => a.type === "EndSuperseded");

  /** An Argo CD operation out for B, running (its executor reported it), after the tip was A. */
  function running(targets = [argoListed("u1", "app")]) {
    const d = new Driver();
    d.settle(targets, sha("a"));
    const [att] = sends(d.publish(d.on({ type: "Observed", tip: sha("b"), pushedByUs: false }), sha("b")));
    const token = att?.token ?? "";
    d.on(report(token, "app", "Running", undefined, att?.claim));
    return { d, token, claim: att?.claim };
  }

  it("asks the clone about a running operation once a foreign tip overtook it", () => {
    const { d, token } = running();
    expect(ancestryReadsAsked(d.state)).toEqual([]);
    // A tip of our own asks nothing: it carries edits the cluster runs, not a newer request.
    d.on({ type: "Published", upToMark: null, tip: sha("c") });
    expect(ancestryReadsAsked(d.state)).toEqual([]);
    d.on({ type: "Observed", tip: sha("d"), pushedByUs: false });
    expect(ancestryReadsAsked(d.state)).toEqual([{ key: ARGO, token, commit: sha("b"), tip: sha("d") }]);
    d.on({ type: "AncestryRead", token, commit: sha("b"), tip: sha("d"), ancestry: "unknown" });
    expect(ancestryReadsAsked(d.state)).toEqual([]);
    // The next foreign tip is asked about again.
    d.on({ type: "Observed", tip: sha("e"), pushedByUs: false });
    expect(ancestryReadsAsked(d.state)).toEqual([{ key: ARGO, token, commit: sha("b"), tip: sha("e") }]);
  });

  it("a proven ancestor is ended once; an unknown commit, another line or a read of an older tip are not", () => {
    const { d, token, claim } = running();
    d.on({ type: "Observed", tip: sha("d"), pushedByUs: false });
    expect(
      ends(d.on({ type: "AncestryRead", token, commit: sha("b"), tip: sha("d"), ancestry: "unknown" })),
    ).toEqual([]);
    expect(
      ends(d.on({ type: "AncestryRead", token, commit: sha("b"), tip: sha("d"), ancestry: "not-ancestor" })),
    ).toEqual([]);
    d.on({ type: "Observed", tip: sha("e"), pushedByUs: false });
    // An answer for the tip before: the tip moved on, and only the tip now decides.
    expect(
      ends(d.on({ type: "AncestryRead", token, commit: sha("b"), tip: sha("d"), ancestry: "ancestor" })),
    ).toEqual([]);
    // Another operation's answer changes nothing.
    expect(
      ends(
        d.on({ type: "AncestryRead", token: "t-9", commit: sha("b"), tip: sha("e"), ancestry: "ancestor" }),
      ),
    ).toEqual([]);
    const out = d.on({ type: "AncestryRead", token, commit: sha("b"), tip: sha("e"), ancestry: "ancestor" });
    expect(ends(out)).toEqual([
      {
        type: "EndSuperseded",
        claim,
        applier: argoClaim("app").applier,
        token,
        commit: sha("b"),
        tip: sha("e"),
      },
    ]);
    // Asked once: a later tip proven too asks nothing more.
    d.on({ type: "Observed", tip: sha("f"), pushedByUs: false });
    expect(
      ends(d.on({ type: "AncestryRead", token, commit: sha("b"), tip: sha("f"), ancestry: "ancestor" })),
    ).toEqual([]);
  });

  it("an operation not reported running yet, and a Flux operation, are never asked about", () => {
    const d = new Driver();
    d.settle([argoListed("u1", "app"), listed("u2", "app")], sha("a"));
    const sent = sends(d.publish(d.on({ type: "Observed", tip: sha("b"), pushedByUs: false }), sha("b")));
    expect(sent.map((a) => a.applier.kind).sort()).toEqual(["argocd", "flux"]);
    d.on({ type: "Observed", tip: sha("c"), pushedByUs: false });
    // Sent, not started: its executor sees the moved tip before it syncs, and ends it Stale.
    expect(ancestryReadsAsked(d.state)).toEqual([]);
    for (const a of sent) d.on(report(a.token, a.claim.name, "Running", undefined, a.claim));
    expect(ancestryReadsAsked(d.state).map((q) => q.key)).toEqual([ARGO]);
    expect(d.state.appliers[FLUX]?.operation?.overtaken).toBe(true);
  });

  it("matches the clone's graph over random histories with force-pushes back and elsewhere", () => {
    let ended = 0;
    let refused = 0;
    fc.assert(
      fc.property(
        fc.array(
          fc.oneof(
            fc.record({ k: fc.constant("push" as const) }),
            fc.record({ k: fc.constant("forcePush" as const), back: fc.nat(20) }),
            fc.record({ k: fc.constant("orphan" as const) }),
            fc.record({ k: fc.constant("read" as const), forget: fc.boolean() }),
            fc.record({
              k: fc.constant("end" as const),
              phase: fc.constantFrom("Failed", "Superseded", "Succeeded"),
            }),
          ),
          { maxLength: 40 },
        ),
        (ops) => {
          const parents = new Map<string, string[]>([[sha(1), []]]);
          let n = 1;
          let head = sha(1);
          const order = [head];
          const d = new Driver();
          d.settle([argoListed("u1", "app")], head);
          let out: DecisionAction[] = [];
          let token: string | undefined;
          const feed = (e: DecisionEvent) => {
            out = d.on(e);
            for (const a of out) {
              if (a.type === "EndSuperseded") {
                ended += 1;
                // Only for the operation out, proven a proper ancestor of the tip in the graph.
                expect(a.token).toBe(token);
                expect(a.tip).toBe(d.state.tip);
                expect(ancestryIn(parents, a.commit, a.tip)).toBe("ancestor");
                expect(a.commit).not.toBe(a.tip);
              }
            }
            const sent = sends(out);
            if (sent.length === 0 && out.some((a) => a.type === "Flush")) {
              const started = sends(d.publish(out, head));
              for (const s of started) {
                token = s.token;
                d.on(report(s.token, "app", "Running", undefined, s.claim));
              }
            }
          };
          for (const op of ops) {
            if (op.k === "push" || op.k === "orphan" || op.k === "forcePush") {
              if (op.k === "forcePush") head = order[Math.max(0, order.length - 1 - op.back)] as string;
              else {
                const c = sha(++n);
                parents.set(c, op.k === "orphan" ? [] : [head]);
                head = c;
                order.push(c);
              }
              feed({ type: "Observed", tip: head, pushedByUs: false });
            } else if (op.k === "read") {
              for (const q of ancestryReadsAsked(d.state)) {
                // A clone that has not fetched the commit yet answers unknown.
                const ancestry = op.forget ? "unknown" : ancestryIn(parents, q.commit, q.tip);
                if (ancestry !== "ancestor") refused += 1;
                feed({ type: "AncestryRead", token: q.token, commit: q.commit, tip: q.tip, ancestry });
              }
            } else if (token) {
              const t = token;
              token = undefined;
              feed(report(t, "app", op.phase as "Failed", undefined, argoClaim("app").claim));
            }
          }
        },
      ),
      { numRuns: 300 },
    );
    // Both sides were reached: operations ended, and operations left alone.
    expect(ended).toBeGreaterThan(0);
    expect(refused).toBeGreaterThan(0);
  });
});
