import { describe, expect, it } from "vitest";
import { A, argoListed, B, C, cm, Driver, listed, report, sends } from "../../test/support/decisions.js";
import { copy } from "./copy.js";
import type { DecisionEvent, DecisionState } from "./model.js";

function deepFreeze<T>(v: T): T {
  if (v && typeof v === "object" && !Object.isFrozen(v)) {
    Object.freeze(v);
    for (const x of Object.values(v)) deepFreeze(x);
  }
  return v;
}

/** Steps the driver with its state frozen first: a write into the given state throws (strict mode). */
function pureOn(d: Driver, e: DecisionEvent) {
  const given: DecisionState = deepFreeze(d.state);
  const before = JSON.stringify(given);
  const out = d.on(e);
  expect(JSON.stringify(given)).toBe(before);
  expect(d.state).not.toBe(given);
  return out;
}

describe("the decision core's copies", () => {
  it("copy gives equal data that shares no object with what it copied", () => {
    const v = { a: [1, { b: "x", c: null }], d: { e: true, f: [[2]] } };
    const c = copy(v);
    expect(c).toEqual(v);
    expect(c.a).not.toBe(v.a);
    expect(c.a[1]).not.toBe(v.a[1]);
    expect(c.d.f[0]).not.toBe(v.d.f[0]);
  });

  it("step never changes the state it is given, through edits, attempts, reports and a foreign tip", () => {
    const d = new Driver();
    d.settle(
      [listed("u1", "app"), argoListed("u2", "argo"), listed("u3", "app3", { onRefusal: "Reapply" })],
      A,
    );
    const at = (ms: number) => new Date(ms).toISOString();
    pureOn(d, {
      type: "WriteDecided",
      entryId: "w1",
      targetUid: "u1",
      createdObjects: [cm("new")],
      editedObjects: [{ ref: cm("new"), editedAt: at(d.now) }],
    });
    const sent = sends(d.publish(pureOn(d, { type: "Published", upToMark: "w1", tip: B }), B));
    expect(sent.length).toBeGreaterThan(0);
    pureOn(d, { type: "RefusalReceived", targetUid: "u3" });
    for (const a of sent) pureOn(d, report(a.token, a.claim.name, "Failed", a.commit, a.claim));
    pureOn(d, { type: "Observed", tip: C, pushedByUs: false });
    d.now += 61_000;
    pureOn(d, { type: "Tick" });
    expect(Object.keys(d.state.appliers).length).toBe(3);
  });
});
