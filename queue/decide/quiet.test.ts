import { describe, expect, it } from "vitest";
import { BRANCH, cm, Driver, flushes, listed, report, sends, sha } from "../../test/support/decisions.js";
import { decisionsQuiet } from "./quiet.js";
import { initialState } from "./step.js";
import { WINDOW_GRACE_MS } from "./window.js";

describe("decisionsQuiet", () => {
  it("a fresh state is quiet", () => {
    expect(decisionsQuiet(initialState(BRANCH, "t"), 0)).toBe(true);
  });

  it("is not while an attempt is out, nor during its apply window's grace, and is again after", () => {
    const d = new Driver();
    d.on({ type: "TargetsListed", targets: [listed("u1", "c1")] });
    const out = d.on({ type: "Observed", tip: sha(1), pushedByUs: false });
    // The converge's flush is asked: a flush under way.
    expect(flushes(out)).toHaveLength(1);
    expect(decisionsQuiet(d.state, d.now)).toBe(false);
    const [attempt] = sends(d.publish(out, sha(1)));
    expect(attempt).toBeDefined();
    expect(decisionsQuiet(d.state, d.now)).toBe(false);
    d.on(report(attempt?.token as string, "c1", "Running", sha(1)));
    expect(decisionsQuiet(d.state, d.now)).toBe(false);
    d.on(report(attempt?.token as string, "c1", "Succeeded", sha(1)));
    // Completed: the window stays open for its grace.
    expect(decisionsQuiet(d.state, d.now)).toBe(false);
    expect(decisionsQuiet(d.state, d.now + WINDOW_GRACE_MS - 1)).toBe(false);
    expect(decisionsQuiet(d.state, d.now + WINDOW_GRACE_MS)).toBe(true);
  });

  it("is not while a decided write waits for its publication", () => {
    const d = new Driver();
    d.settle([listed("u1", "c1")], sha(1));
    d.advance(WINDOW_GRACE_MS);
    expect(decisionsQuiet(d.state, d.now)).toBe(true);
    d.on({
      type: "WriteDecided",
      entryId: "5-0",
      targetUid: "u1",
      createdObjects: [],
      editedObjects: [{ ref: cm("a"), editedAt: new Date(d.now).toISOString() }],
    });
    expect(d.state.unpublished).toHaveLength(1);
    expect(decisionsQuiet(d.state, d.now)).toBe(false);
  });
});
