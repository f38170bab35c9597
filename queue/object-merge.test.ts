import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { isMap, jsonEqual, mergeChange, mergeChangeFromAny, mergedObject } from "./object-merge.js";

type JsonMap = Record<string, unknown>;

// Few keys, so base, next and Git's object share most of them; values of every JSON kind, maps nested.
const key = fc.constantFrom("a", "b", "c", "d", "e");
const scalar = fc.oneof(
  fc.constantFrom("x", "y", "z", ""),
  fc.integer({ min: -2, max: 2 }),
  fc.boolean(),
  fc.constant(null),
);
const { value: json } = fc.letrec<{ value: unknown; map: JsonMap }>((tie) => ({
  value: fc.oneof(
    { depthSize: "small", withCrossShrink: true },
    scalar,
    fc.array(tie("value"), { maxLength: 3 }),
    tie("map"),
  ),
  map: fc.dictionary(key, tie("value"), { maxKeys: 4 }) as fc.Arbitrary<JsonMap>,
}));
const map = fc.dictionary(key, json, { maxKeys: 5 }) as fc.Arbitrary<JsonMap>;

/** A copy of `m` with some of its top-level keys changed, added or removed (never the same value). */
const edited = (m: JsonMap, keys: readonly string[]) =>
  fc.tuple(...keys.map(() => fc.option(json, { nil: undefined }))).map((vals) => {
    const out: JsonMap = { ...m };
    keys.forEach((k, i) => {
      const v = vals[i];
      if (v === undefined) delete out[k];
      else out[k] = jsonEqual(v, m[k]) ? [v] : v;
    });
    return out;
  });

const copy = <T>(v: T): T => structuredClone(v);

describe("mergeChange", () => {
  it("gives the writer's object when Git still holds the base", () => {
    fc.assert(
      fc.property(map, map, (base, next) => {
        expect(mergeChange(base, next, base)).toEqual(next);
      }),
    );
  });

  it("gives Git's object when the writer changed nothing", () => {
    fc.assert(
      fc.property(map, map, (base, current) => {
        expect(mergeChange(base, base, current)).toEqual(current);
      }),
    );
  });

  it("keeps Git's value of every key the writer left as it was, and takes the writer's of every key it changed", () => {
    fc.assert(
      fc.property(map, map, map, (base, next, current) => {
        const out = mergeChange(base, next, current);
        for (const k of new Set([...Object.keys(base), ...Object.keys(next), ...Object.keys(current)])) {
          const same = Object.hasOwn(base, k) === Object.hasOwn(next, k) && jsonEqual(base[k], next[k]);
          if (same) expect(out[k]).toEqual(current[k]);
          else if (!Object.hasOwn(next, k)) expect(Object.hasOwn(out, k)).toBe(false);
          else if (!isMap(next[k])) expect(out[k]).toEqual(next[k]);
          else expect(isMap(out[k])).toBe(true);
        }
      }),
    );
  });

  it("carries the same change twice to the same result (a replay onto the same tip)", () => {
    fc.assert(
      fc.property(map, map, map, (base, next, current) => {
        const once = mergeChange(base, next, current);
        expect(mergeChange(base, next, once)).toEqual(once);
      }),
    );
  });

  it("keeps both of two edits of different keys, in either order", () => {
    fc.assert(
      fc.property(
        map,
        fc.shuffledSubarray(["a", "b", "c", "d", "e"]),
        fc.integer({ min: 0, max: 5 }),
        (base, keys, cut) =>
          fc.assert(
            fc.property(edited(base, keys.slice(0, cut)), edited(base, keys.slice(cut)), (mine, git) => {
              const out = mergeChange(base, mine, git);
              expect(out).toEqual(mergeChange(base, git, mine));
              for (const k of keys.slice(0, cut)) expect(out[k]).toEqual(mine[k]);
              for (const k of keys.slice(cut)) expect(out[k]).toEqual(git[k]);
            }),
            { numRuns: 5 },
          ),
      ),
      { numRuns: 60 },
    );
  });

  it("changes none of its inputs", () => {
    fc.assert(
      fc.property(map, map, map, (base, next, current) => {
        const before = copy([base, next, current]);
        mergeChange(base, next, current);
        expect([base, next, current]).toEqual(before);
      }),
    );
  });

  it("merges nested maps key by key", () => {
    const base = { data: { greeting: "e2", note: "n1" }, metadata: { labels: { a: "1" } } };
    const next = { data: { greeting: "p1", note: "n3" }, metadata: { labels: { a: "1" } } };
    // The writer's copy carries greeting p1 it did not set... but it differs from the base, so it is the writer's:
    expect(mergeChange(base, next, { data: { greeting: "e2", note: "n1" } }).data).toEqual({
      greeting: "p1",
      note: "n3",
    });
    // ...while a base that already held p1 says the writer changed the note alone.
    const seen = { data: { greeting: "p1", note: "n1" } };
    expect(
      mergeChange(seen, { data: { greeting: "p1", note: "n3" } }, { data: { greeting: "e2", note: "n1" } }),
    ).toEqual({
      data: { greeting: "e2", note: "n3" },
    });
  });

  it("removes a key the writer removed, at any depth, and keeps one Git added", () => {
    expect(
      mergeChange(
        { metadata: { labels: { a: "1", b: "2" } }, spec: { x: 1 } },
        { metadata: { labels: { a: "1" } } },
        { metadata: { labels: { a: "1", b: "2", c: "3" } }, spec: { x: 1 }, extra: true },
      ),
    ).toEqual({ metadata: { labels: { a: "1", c: "3" } }, extra: true });
  });

  it("replaces a list whole, and a map the writer turned into a scalar or back", () => {
    expect(
      mergeChange(
        { spec: { ports: [1, 2], mode: "a" } },
        { spec: { ports: [1, 3], mode: { deep: 1 } } },
        { spec: { ports: [0, 1, 2, 9], mode: "b" } },
      ),
    ).toEqual({ spec: { ports: [1, 3], mode: { deep: 1 } } });
    expect(mergeChange({ a: { b: 1 } }, { a: 5 }, { a: { b: 1, c: 2 } })).toEqual({ a: 5 });
  });

  it("adds a map the writer added onto a map Git added at the same key, key by key", () => {
    expect(mergeChange({}, { annotations: { a: "1" } }, { annotations: { b: "2" } })).toEqual({
      annotations: { a: "1", b: "2" },
    });
  });

  it("sets null as a value like any scalar", () => {
    expect(mergeChange({ a: 1, b: 2 }, { a: null, b: 2 }, { a: 1, b: 3 })).toEqual({ a: null, b: 3 });
  });
});

describe("mergeChangeFromAny", () => {
  it("with one base is mergeChange", () => {
    fc.assert(
      fc.property(map, map, map, (base, next, current) => {
        expect(mergeChangeFromAny([base], next, current)).toEqual(mergeChange(base, next, current));
      }),
    );
  });

  it("keeps Git's value of every key some base agrees on, and takes next's where none does", () => {
    fc.assert(
      fc.property(fc.array(map, { minLength: 1, maxLength: 3 }), map, map, (bases, next, current) => {
        const out = mergeChangeFromAny(bases, next, current);
        const keys = new Set([
          ...bases.flatMap((b) => Object.keys(b)),
          ...Object.keys(next),
          ...Object.keys(current),
        ]);
        for (const k of keys) {
          const agreed = bases.some(
            (b) => Object.hasOwn(b, k) === Object.hasOwn(next, k) && jsonEqual(b[k], next[k]),
          );
          if (agreed) expect(out[k]).toEqual(current[k]);
          else if (!Object.hasOwn(next, k)) expect(Object.hasOwn(out, k)).toBe(false);
          else if (!isMap(next[k])) expect(out[k]).toEqual(next[k]);
          else expect(isMap(out[k])).toBe(true);
        }
      }),
    );
  });

  it("changes nothing when next equals any one base, whatever the others say", () => {
    fc.assert(
      fc.property(fc.array(map, { maxLength: 2 }), map, map, fc.nat(), (others, base, current, at) => {
        const bases = [...others];
        bases.splice(at % (others.length + 1), 0, base);
        expect(mergeChangeFromAny(bases, copy(base), current)).toEqual(current);
      }),
    );
  });

  it("a cluster still on the applied commit keeps a push not applied yet, and carries a real edit over it", () => {
    // Git's tip has a push's note; the cluster (and so the snapshot) still runs the applied commit,
    // but with an edit of the greeting; the tip the write was read at also had the push.
    const applied = { data: { greeting: "hello" } };
    const tipWhenRead = { data: { greeting: "hello", note: "p3" } };
    const snapshot = { data: { greeting: "e6" } };
    expect(mergeChangeFromAny([tipWhenRead, applied], snapshot, tipWhenRead)).toEqual({
      data: { greeting: "e6", note: "p3" },
    });
    // The snapshot of the applier's own state changes nothing.
    expect(mergeChangeFromAny([tipWhenRead, applied], applied, tipWhenRead)).toEqual(tipWhenRead);
    // Against the tip alone, the same snapshot removed the push's note.
    expect(mergeChange(tipWhenRead, applied, tipWhenRead)).toEqual(applied);
  });

  it("changes none of its inputs", () => {
    fc.assert(
      fc.property(fc.array(map, { maxLength: 3 }), map, map, (bases, next, current) => {
        const before = copy([bases, next, current]);
        mergeChangeFromAny(bases, next, current);
        expect([bases, next, current]).toEqual(before);
      }),
    );
  });
});

describe("mergedObject", () => {
  const next = {
    apiVersion: "v1",
    kind: "ConfigMap",
    metadata: { name: "m", namespace: "ns" },
    data: { k: "2" },
  };

  it("is the writer's object whole without a base or without a file in Git", () => {
    expect(mergedObject(next, undefined, { data: { other: "1" } })).toBe(next);
    expect(mergedObject(next, { ...next, data: { k: "1" } }, undefined)).toBe(next);
    expect(mergedObject(next, [], { data: { other: "1" } })).toBe(next);
  });

  it("keeps the writer's identity whatever Git's file says", () => {
    const base = { ...next, data: { k: "1" } };
    const current = {
      apiVersion: "v1",
      kind: "Other",
      metadata: { name: "x", namespace: "y" },
      data: { k: "1", o: "3" },
    };
    expect(mergedObject(next, base, current)).toEqual({ ...next, data: { k: "2", o: "3" } });
  });
});
