import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { defaultPullPolicy, defaultWorkload } from "./defaults.js";
import type { KObject } from "./types.js";

describe("workload defaults", () => {
  it.each([
    ["busybox", "Always"],
    ["busybox:latest", "Always"],
    ["library/busybox", "Always"],
    ["registry.local:5000/tools/init", "Always"],
    ["registry.local:5000/tools/init:latest", "Always"],
    ["nginx:1.27", "IfNotPresent"],
    ["registry.local:5000/tools/init:v1", "IfNotPresent"],
    [`ghcr.io/x/y@sha256:${"0".repeat(64)}`, "IfNotPresent"],
    [`ghcr.io/x/y:latest@sha256:${"0".repeat(64)}`, "Always"],
    ["Busybox", "IfNotPresent"], // does not parse: no tag is read
    ["", "IfNotPresent"],
  ])("pulls %j %s", (image, policy) => {
    expect(defaultPullPolicy(image)).toBe(policy);
  });

  const deployment = (spec: Record<string, unknown>): KObject => ({
    apiVersion: "apps/v1",
    kind: "Deployment",
    metadata: { name: "d" },
    spec,
  });

  it("keeps what was given, and defaulting twice is defaulting once", () => {
    const given = fc.record(
      {
        replicas: fc.nat(5),
        revisionHistoryLimit: fc.nat(5),
        progressDeadlineSeconds: fc.nat(900),
        strategy: fc.constantFrom({ type: "Recreate" }, { rollingUpdate: { maxSurge: 1 } }),
        template: fc.record({
          spec: fc.record(
            {
              dnsPolicy: fc.constantFrom("Default", "None"),
              terminationGracePeriodSeconds: fc.nat(60),
              containers: fc.array(
                fc.record(
                  {
                    name: fc.string({ minLength: 1 }),
                    image: fc.constantFrom("a", "a:1", "a:latest"),
                    imagePullPolicy: fc.constantFrom("Never", "Always"),
                    ports: fc.array(fc.record({ containerPort: fc.nat(), protocol: fc.constantFrom("UDP") })),
                  },
                  { requiredKeys: ["name"] },
                ),
                { maxLength: 3 },
              ),
            },
            { requiredKeys: [] },
          ),
        }),
      },
      { requiredKeys: [] },
    );
    fc.assert(
      fc.property(given, (spec) => {
        const once = deployment(structuredClone(spec));
        defaultWorkload("apps", "Deployment", once);
        const twice = structuredClone(once);
        defaultWorkload("apps", "Deployment", twice);
        expect(twice).toEqual(once);
        // every field given is kept as given
        const keep = (sent: unknown, stored: unknown): void => {
          if (sent && typeof sent === "object" && !Array.isArray(sent))
            for (const [k, v] of Object.entries(sent)) keep(v, (stored as Record<string, unknown>)[k]);
          else if (Array.isArray(sent))
            for (const [i, v] of sent.entries()) keep(v, (stored as unknown[])[i]);
          else expect(stored).toBe(sent);
        };
        keep(spec, once.spec);
      }),
    );
  });

  it("leaves a kind it does not know as it is", () => {
    const o: KObject = { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "c" }, data: {} };
    defaultWorkload("", "ConfigMap", o);
    expect(o).toEqual({ apiVersion: "v1", kind: "ConfigMap", metadata: { name: "c" }, data: {} });
  });
});
