/**
 * Server-side apply ownership, step by step: two appliers and an updater on one object, with
 * shared fields, a conflict, a forced apply, fields an applier stops applying, and an associative
 * list. After every step the object and each manager's fieldsV1 are checked.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ApiServer, startApiServer } from "./index.js";

const crd = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: { name: widgets.test.applygate.dev }
spec:
  group: test.applygate.dev
  scope: Namespaced
  names: { plural: widgets, singular: widget, kind: Widget, listKind: WidgetList }
  versions:
    - name: v1
      served: true
      storage: true
      subresources: { status: {} }
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec:
              type: object
              properties:
                a: { type: integer }
                b: { type: integer }
                shared: { type: string }
                ports:
                  type: array
                  x-kubernetes-list-type: map
                  x-kubernetes-list-map-keys: [name]
                  items:
                    type: object
                    properties:
                      name: { type: string }
                      port: { type: integer }
            status:
              type: object
              x-kubernetes-preserve-unknown-fields: true
`;

type Step = {
  what: string;
  manager: string;
  kind: "apply" | "merge";
  /** absent: the applied configuration has no spec at all */
  spec?: Record<string, unknown>;
  force?: boolean;
  status: number;
  /** expected spec afterwards */
  after: Record<string, unknown>;
  /** expected fieldsV1 per "manager/operation" afterwards (absent managers must be gone) */
  owners: Record<string, unknown>;
  conflictFields?: string[];
};

const f = (...names: string[]) => Object.fromEntries(names.map((n) => [`f:${n}`, {}]));

const steps: Step[] = [
  {
    what: "alice applies a and shared",
    manager: "alice",
    kind: "apply",
    spec: { a: 1, shared: "x" },
    status: 201,
    after: { a: 1, shared: "x" },
    owners: { "alice/Apply": { "f:spec": f("a", "shared") } },
  },
  {
    what: "bob applies the same shared value and b: both own shared",
    manager: "bob",
    kind: "apply",
    spec: { shared: "x", b: 2 },
    status: 200,
    after: { a: 1, b: 2, shared: "x" },
    owners: { "alice/Apply": { "f:spec": f("a", "shared") }, "bob/Apply": { "f:spec": f("b", "shared") } },
  },
  {
    what: "bob applies a different shared value: conflict with alice, nothing changes",
    manager: "bob",
    kind: "apply",
    spec: { shared: "y", b: 2 },
    status: 409,
    conflictFields: [".spec.shared"],
    after: { a: 1, b: 2, shared: "x" },
    owners: { "alice/Apply": { "f:spec": f("a", "shared") }, "bob/Apply": { "f:spec": f("b", "shared") } },
  },
  {
    what: "bob forces: he takes shared from alice",
    manager: "bob",
    kind: "apply",
    spec: { shared: "y", b: 2 },
    force: true,
    status: 200,
    after: { a: 1, b: 2, shared: "y" },
    owners: { "alice/Apply": { "f:spec": f("a") }, "bob/Apply": { "f:spec": f("b", "shared") } },
  },
  {
    what: "alice stops applying a: nobody else owns it, so it is removed",
    manager: "alice",
    kind: "apply",
    spec: { ports: [{ name: "http", port: 80 }] },
    status: 200,
    after: { b: 2, shared: "y", ports: [{ name: "http", port: 80 }] },
    owners: {
      "alice/Apply": {
        "f:spec": { "f:ports": { 'k:{"name":"http"}': { ".": {}, "f:name": {}, "f:port": {} } } },
      },
      "bob/Apply": { "f:spec": f("b", "shared") },
    },
  },
  {
    what: "bob adds another item to the associative list: items are owned one by one",
    manager: "bob",
    kind: "apply",
    spec: { shared: "y", b: 2, ports: [{ name: "metrics", port: 9090 }] },
    status: 200,
    after: {
      b: 2,
      shared: "y",
      ports: [
        { name: "http", port: 80 },
        { name: "metrics", port: 9090 },
      ],
    },
    owners: {
      "alice/Apply": {
        "f:spec": { "f:ports": { 'k:{"name":"http"}': { ".": {}, "f:name": {}, "f:port": {} } } },
      },
      "bob/Apply": {
        "f:spec": {
          "f:b": {},
          "f:ports": { 'k:{"name":"metrics"}': { ".": {}, "f:name": {}, "f:port": {} } },
          "f:shared": {},
        },
      },
    },
  },
  {
    what: "carol changes b with a merge patch: an Update takes the field from bob without conflict",
    manager: "carol",
    kind: "merge",
    spec: { b: 3 },
    status: 200,
    after: {
      b: 3,
      shared: "y",
      ports: [
        { name: "http", port: 80 },
        { name: "metrics", port: 9090 },
      ],
    },
    owners: {
      "alice/Apply": {
        "f:spec": { "f:ports": { 'k:{"name":"http"}': { ".": {}, "f:name": {}, "f:port": {} } } },
      },
      "bob/Apply": {
        "f:spec": {
          "f:ports": { 'k:{"name":"metrics"}': { ".": {}, "f:name": {}, "f:port": {} } },
          "f:shared": {},
        },
      },
      "carol/Update": { "f:spec": f("b") },
    },
  },
  {
    what: "bob stops applying shared and his list item; shared and the item go, b stays with carol",
    manager: "bob",
    kind: "apply",
    status: 200,
    after: { b: 3, ports: [{ name: "http", port: 80 }] },
    owners: {
      "alice/Apply": {
        "f:spec": { "f:ports": { 'k:{"name":"http"}': { ".": {}, "f:name": {}, "f:port": {} } } },
      },
      "carol/Update": { "f:spec": f("b") },
    },
  },
];

describe("server-side apply ownership", () => {
  let server: ApiServer;
  const path = "/apis/test.applygate.dev/v1/namespaces/default/widgets/w";

  beforeAll(async () => {
    server = await startApiServer();
    await server.applyYaml(crd);
  });
  afterAll(async () => server.close());

  it.each(steps.map((s, i) => [i + 1, s.what, s] as const))("step %i: %s", async (_n, _what, step) => {
    const body =
      step.kind === "apply"
        ? {
            apiVersion: "test.applygate.dev/v1",
            kind: "Widget",
            metadata: { name: "w" },
            ...(step.spec ? { spec: step.spec } : {}),
          }
        : { spec: step.spec };
    const q = new URLSearchParams({ fieldManager: step.manager });
    if (step.force) q.set("force", "true");
    const auth = { Authorization: `Bearer ${server.token()}` };
    const res = await fetch(`${server.url}${path}?${q}`, {
      method: "PATCH",
      headers: {
        ...auth,
        "Content-Type":
          step.kind === "apply" ? "application/apply-patch+yaml" : "application/merge-patch+json",
      },
      body: JSON.stringify(body),
    });
    const answer = (await res.json()) as any;
    expect(res.status, JSON.stringify(answer)).toBe(step.status);
    if (step.conflictFields) {
      expect(answer).toMatchObject({ kind: "Status", reason: "Conflict", code: 409 });
      expect(answer.details.causes.map((c: any) => c.field)).toEqual(step.conflictFields);
      expect(answer.message).toContain('conflict with "alice"');
    }
    const now = (await (await fetch(`${server.url}${path}`, { headers: auth })).json()) as any;
    expect(now.spec).toEqual(step.after);
    const owners = Object.fromEntries(
      now.metadata.managedFields.map((m: any) => [`${m.manager}/${m.operation}`, m.fieldsV1]),
    );
    expect(owners).toEqual(step.owners);
    for (const m of now.metadata.managedFields) {
      expect(m).toMatchObject({ apiVersion: "test.applygate.dev/v1", fieldsType: "FieldsV1" });
      expect(m.time).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
    }
  });
});
