import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  CORE_EVENT_FIELDS,
  CORE_EVENT_TABLE,
  coreEventShape,
  eventFromCore,
  eventToCore,
  V1_EVENT_FIELDS,
  V1_EVENT_TABLE,
  v1EventShape,
} from "./events.js";
import type { KObject } from "./types.js";

const reference = fc.record(
  { kind: fc.string(), name: fc.string(), namespace: fc.string(), uid: fc.uuid() },
  { requiredKeys: ["kind", "name"] },
);
/** A core v1 Event with any subset of its fields. */
const coreEvent = fc.record(
  {
    apiVersion: fc.constant("v1"),
    kind: fc.constant("Event"),
    metadata: fc.record({ name: fc.string({ minLength: 1 }), namespace: fc.string() }),
    involvedObject: reference,
    related: reference,
    message: fc.string(),
    reason: fc.string(),
    type: fc.constantFrom("Normal", "Warning"),
    action: fc.string(),
    reportingComponent: fc.string(),
    reportingInstance: fc.string(),
    source: fc.record({ component: fc.string(), host: fc.string() }, { requiredKeys: [] }),
    firstTimestamp: fc.string(),
    lastTimestamp: fc.string(),
    count: fc.nat(),
    eventTime: fc.string(),
    series: fc.record({ count: fc.nat(), lastObservedTime: fc.string() }),
  },
  { requiredKeys: ["apiVersion", "kind", "metadata"] },
) as fc.Arbitrary<KObject>;

describe("Event conversion between core v1 and events.k8s.io/v1", () => {
  it("keeps every field through a round trip", () => {
    fc.assert(
      fc.property(coreEvent, (e) => {
        expect(eventToCore(eventFromCore(e))).toEqual(e);
      }),
    );
  });

  it("shows each core field under its events.k8s.io/v1 name, and no core name", () => {
    const v1 = eventFromCore({
      apiVersion: "v1",
      kind: "Event",
      metadata: { name: "e" },
      involvedObject: { kind: "FluxClaim", name: "c" },
      message: "m",
      reportingComponent: "rc",
      source: { component: "s" },
      firstTimestamp: "f",
      lastTimestamp: "l",
      count: 3,
      reason: "r",
    });
    expect(v1).toEqual({
      apiVersion: "v1",
      kind: "Event",
      metadata: { name: "e" },
      regarding: { kind: "FluxClaim", name: "c" },
      note: "m",
      reportingController: "rc",
      deprecatedSource: { component: "s" },
      deprecatedFirstTimestamp: "f",
      deprecatedLastTimestamp: "l",
      deprecatedCount: 3,
      reason: "r",
    });
  });

  it("selects by the same fields under each group's names", () => {
    fc.assert(
      fc.property(coreEvent, (e) => {
        const v1 = eventFromCore(e);
        for (const f of ["kind", "name", "namespace", "uid"])
          expect(V1_EVENT_FIELDS[`regarding.${f}`]!(v1)).toBe(CORE_EVENT_FIELDS[`involvedObject.${f}`]!(e));
        expect(V1_EVENT_FIELDS.reportingController!(v1)).toBe(CORE_EVENT_FIELDS.reportingComponent!(e));
        expect(V1_EVENT_FIELDS.reason!(v1)).toBe(CORE_EVENT_FIELDS.reason!(e));
      }),
    );
  });

  it("writes each view as its Go type does, and the two written views are one Event", () => {
    fc.assert(
      fc.property(coreEvent, (e) => {
        const core = coreEventShape(e);
        const v1 = v1EventShape(eventFromCore(e));
        expect(coreEventShape(core)).toEqual(core);
        expect(v1EventShape(v1)).toEqual(v1);
        expect(coreEventShape(eventToCore(v1))).toEqual(core);
        expect(v1EventShape(eventFromCore(eventToCore(v1)))).toEqual(v1);
        for (const k of ["involvedObject", "source", "firstTimestamp", "lastTimestamp", "eventTime"])
          expect(k in core).toBe(true);
        for (const k of ["regarding", "deprecatedSource", "deprecatedFirstTimestamp", "eventTime"])
          expect(k in v1).toBe(true);
        expect(typeof core.reportingComponent).toBe("string");
        expect(v1.reportingController === "" || v1.deprecatedCount === 0).toBe(false);
      }),
    );
  });

  it("prints one row the same through either group, with the printers' times and counts", () => {
    const now = Date.parse("2025-01-01T03:00:00Z");
    const base = {
      apiVersion: "v1",
      kind: "Event",
      metadata: { name: "held.x", namespace: "team" },
      involvedObject: { kind: "Kustomization", name: "held", fieldPath: "spec" },
      reason: "Adopted",
      message: " held by its claim \n",
      type: "Normal",
    };
    const row = (e: KObject) => {
      const cells = CORE_EVENT_TABLE.cells(coreEventShape(e), now);
      expect(V1_EVENT_TABLE.cells(v1EventShape(eventFromCore(e)), now)).toEqual(cells);
      return cells;
    };
    // A new-API singleton: eventTime for both times, count 1, the reporting controller and instance.
    expect(
      row({
        ...base,
        eventTime: "2025-01-01T02:54:30.000000Z",
        reportingComponent: "applygate.dev/sidecar",
        reportingInstance: "sidecar-0",
      }),
    ).toEqual([
      "5m30s",
      "Normal",
      "Adopted",
      "kustomization/held",
      "spec",
      "applygate.dev/sidecar, sidecar-0",
      "held by its claim",
      "5m30s",
      1,
      "held.x",
    ]);
    // The old API: first and last times, its count, the source's component over the controller.
    expect(
      row({
        ...base,
        firstTimestamp: "2024-12-31T01:00:00Z",
        lastTimestamp: "2025-01-01T01:00:00Z",
        count: 4,
        source: { component: "kustomize-controller" },
        reportingComponent: "other",
      }),
    ).toEqual([
      "120m",
      "Normal",
      "Adopted",
      "kustomization/held",
      "spec",
      "kustomize-controller",
      "held by its claim",
      "26h",
      4,
      "held.x",
    ]);
    // A series: its last observation and count; no time at all is <unknown>.
    const series = row({ ...base, series: { count: 7, lastObservedTime: "2025-01-01T02:59:00.000000Z" } });
    expect([series[0], series[7], series[8]]).toEqual(["60s", "<unknown>", 7]);
  });
});
