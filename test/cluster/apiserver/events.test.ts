import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { CORE_EVENT_FIELDS, eventFromCore, eventToCore, V1_EVENT_FIELDS } from "./events.js";
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
});
