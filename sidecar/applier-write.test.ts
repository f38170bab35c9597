import { describe, expect, it } from "vitest";
import { applierWriteOf } from "./applier-write.js";

const M = ["kustomize-controller"];
const obj = (entries: { manager: string; time?: string }[], rv = "42") => ({
  metadata: { resourceVersion: rv, managedFields: entries.map((e) => ({ operation: "Apply", ...e })) },
});

describe("applierWriteOf", () => {
  it("the applier's entry alone at the newest time is its write", () => {
    const w = applierWriteOf(
      obj([
        { manager: "kubectl-edit", time: "2026-01-01T00:00:01Z" },
        { manager: "kustomize-controller", time: "2026-01-01T00:00:02Z" },
      ]),
      M,
    );
    expect(w).toEqual({
      manager: "kustomize-controller",
      writtenAt: "2026-01-01T00:00:02Z",
      resourceVersion: "42",
    });
  });
  it.each([
    ["a tie with another manager in the same second is not the applier's alone", "02", "02"],
    ["another manager newer than the applier: not the applier's write", "02", "01"],
  ])("%s", (_, edited, applied) => {
    const entries = [
      { manager: "kubectl-edit", time: `2026-01-01T00:00:${edited}Z` },
      { manager: "kustomize-controller", time: `2026-01-01T00:00:${applied}Z` },
    ];
    expect(applierWriteOf(obj(entries), M)).toBeUndefined();
  });
  it("no timed entries: nothing to say", () => {
    expect(applierWriteOf(obj([{ manager: "kustomize-controller" }]), M)).toBeUndefined();
    expect(applierWriteOf({ metadata: {} }, M)).toBeUndefined();
  });
});

describe("applierWriteOf, given the version before the write", () => {
  const at = (s: number) => `2026-01-01T00:00:0${s}Z`;
  const entry = (manager: string, s: number, fields: Record<string, unknown>) => ({
    manager,
    operation: "Apply",
    time: at(s),
    fieldsV1: fields,
  });
  const greeting = { "f:data": { "f:greeting": {} } };
  const labels = { "f:metadata": { "f:labels": { "f:app": {} } } };
  const both = { ...greeting, ...labels };

  it("the applier's apply over an edit in the same second is its write, though the times tie", () => {
    const before = [entry("kustomize-controller", 1, labels), entry("user", 2, both)];
    const after = [entry("kustomize-controller", 2, both), entry("user", 2, labels)];
    const current = { metadata: { resourceVersion: "43", managedFields: after } };
    expect(applierWriteOf(current, M)).toBeUndefined();
    expect(applierWriteOf(current, M, before)).toEqual({
      manager: "kustomize-controller",
      writtenAt: at(2),
      resourceVersion: "43",
    });
  });

  it("the edit itself is not the applier's, though the applier's entry stays the newest", () => {
    // The edit took the field from the applier in the applier's second: only the user's entry moved.
    const before = [entry("kustomize-controller", 2, both)];
    const after = [entry("kustomize-controller", 2, labels), entry("user", 2, greeting)];
    const current = { metadata: { resourceVersion: "44", managedFields: after } };
    expect(applierWriteOf(current, M, before)).toBeUndefined();
    // An undo that removed the user's entry leaves the applier's older one the newest: no writer.
    const undone = {
      metadata: { resourceVersion: "45", managedFields: [entry("kustomize-controller", 1, labels)] },
    };
    expect(
      applierWriteOf(undone, M, [entry("kustomize-controller", 1, labels), entry("user", 2, greeting)]),
    ).toBeUndefined();
  });

  it("an applier that gains a field in the same second as its last write is still the writer", () => {
    const before = [entry("kustomize-controller", 2, labels), entry("user", 2, greeting)];
    const after = [entry("kustomize-controller", 2, both)];
    expect(applierWriteOf({ metadata: { resourceVersion: "46", managedFields: after } }, M, before)).toEqual({
      manager: "kustomize-controller",
      writtenAt: at(2),
      resourceVersion: "46",
    });
  });
});

describe("applierWriteOf, with the version before read from a typed list", () => {
  it("compares times whether they arrived as text or as Dates", () => {
    // A client-node list deserializes managedFields times into Dates; watch events carry text.
    const labels = { "f:metadata": { "f:labels": { "f:app": {} } } };
    const greeting = { "f:data": { "f:greeting": {} } };
    const before = [
      {
        manager: "kustomize-controller",
        operation: "Apply",
        time: new Date("2026-01-01T00:00:01Z"),
        fieldsV1: labels,
      },
      {
        manager: "user",
        operation: "Apply",
        time: new Date("2026-01-01T00:00:02Z"),
        fieldsV1: { ...labels, ...greeting },
      },
    ];
    const after = [
      {
        manager: "kustomize-controller",
        operation: "Apply",
        time: "2026-01-01T00:00:03Z",
        fieldsV1: { ...labels, ...greeting },
      },
      { manager: "user", operation: "Apply", time: "2026-01-01T00:00:02Z", fieldsV1: labels },
    ];
    expect(applierWriteOf({ metadata: { resourceVersion: "9", managedFields: after } }, M, before)).toEqual({
      manager: "kustomize-controller",
      writtenAt: "2026-01-01T00:00:03Z",
      resourceVersion: "9",
    });
  });
});

describe("applierWriteOf, a write that touched no entry", () => {
  it("is judged by the times: the applier applying again in the same second is its write", () => {
    const fields = { "f:data": { "f:v": {} } };
    const entries = [
      { manager: "user", operation: "Apply", time: "2026-01-01T00:00:01Z", fieldsV1: { "f:metadata": {} } },
      { manager: "kustomize-controller", operation: "Apply", time: "2026-01-01T00:00:02Z", fieldsV1: fields },
    ];
    expect(
      applierWriteOf({ metadata: { resourceVersion: "7", managedFields: entries } }, M, entries),
    ).toEqual({
      manager: "kustomize-controller",
      writtenAt: "2026-01-01T00:00:02Z",
      resourceVersion: "7",
    });
    // The same with somebody else newest: theirs, not the applier's.
    const theirs = [entries[1], { ...entries[0], time: "2026-01-01T00:00:03Z" }];
    expect(
      applierWriteOf({ metadata: { resourceVersion: "8", managedFields: theirs } }, M, theirs),
    ).toBeUndefined();
  });
});
