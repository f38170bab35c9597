/** The fleet benchmark's reading of its audit log: the figure is only as true as this. */
import { describe, expect, it } from "vitest";
import type { AuditEvent } from "../cluster/apiserver/index.js";
import { firstStatusWrites } from "./fleet.js";

const event = (over: {
  user?: string;
  verb?: string;
  name?: string;
  subresource?: string;
  code?: number;
  at: string;
}): AuditEvent => ({
  kind: "Event",
  apiVersion: "audit.k8s.io/v1",
  level: "Metadata",
  auditID: "x",
  stage: "ResponseComplete",
  requestURI: "/",
  verb: over.verb ?? "patch",
  user: { username: over.user ?? "fleet-worker" },
  sourceIPs: ["127.0.0.1"],
  objectRef: {
    resource: "gittargets",
    namespace: "fleet",
    name: over.name ?? "t1",
    ...(over.subresource === "" ? {} : { subresource: over.subresource ?? "status" }),
  },
  responseStatus: { metadata: {}, code: over.code ?? 200 },
  requestReceivedTimestamp: over.at,
  stageTimestamp: over.at,
});

describe("firstStatusWrites", () => {
  it("keeps each GitTarget's first successful status write by the worker since the start", () => {
    const at = (s: number) => new Date(Date.UTC(2026, 0, 1, 0, 0, s)).toISOString().replace("Z", "123Z");
    const from = Date.parse(at(10));
    const first = firstStatusWrites(
      [
        event({ name: "t1", at: at(5) }), // before the start
        event({ name: "t1", code: 409, at: at(11) }), // refused
        event({ name: "t1", user: "admin", at: at(12) }), // not the worker
        event({ name: "t1", subresource: "", at: at(13) }), // the object, not its status
        event({ name: "t1", verb: "get", at: at(14) }), // a read
        event({ name: "t1", at: at(15) }),
        event({ name: "t1", at: at(16) }),
        event({ name: "t2", verb: "update", at: at(17) }),
      ],
      "fleet-worker",
      from,
    );
    expect([...first]).toEqual([
      ["fleet/t1", Date.parse(at(15))],
      ["fleet/t2", Date.parse(at(17))],
    ]);
  });
});
