import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { gitOk } from "../test/git/cli.js";
import { objectPath, objectYaml, refOf } from "./git/layout.js";
import { BareRepo } from "./git/repo.js";
import { type CheckedChange, depthExceeds, MAX_OBJECT_DEPTH, writeProblem } from "./write-check.js";

const upsert = (apiVersion: string, kind: string, name: string, namespace?: string): CheckedChange => ({
  op: "upsert",
  object: { apiVersion, kind, metadata: { name, ...(namespace !== undefined ? { namespace } : {}) } },
});
const RBAC = "rbac.authorization.k8s.io/v1";

function nested(depth: number): Record<string, unknown> {
  let v: Record<string, unknown> = { leaf: true };
  for (let i = 0; i < depth; i++) v = { a: v };
  return v;
}

describe("what the door lets through is storable", () => {
  it("refuses names Git or the layout cannot store, naming the field", () => {
    const bad: Array<[CheckedChange, string]> = [
      [upsert(RBAC, "ClusterRole", ".git:x"), "changes.0.object.metadata.name"],
      [upsert(RBAC, "ClusterRole", "a\\b"), "changes.0.object.metadata.name"],
      [upsert(RBAC, "ClusterRole", "git~1"), "changes.0.object.metadata.name"],
      [upsert(RBAC, "ClusterRole", "..."), "changes.0.object.metadata.name"],
      [upsert(RBAC, "ClusterRole", "   "), "changes.0.object.metadata.name"],
      [upsert(RBAC, "ClusterRole", "a\u200c.git"), "changes.0.object.metadata.name"],
      [upsert("v1", "ConfigMap", "../../../evil", "apps"), "changes.0.object.metadata.name"],
      [upsert("v1", "ConfigMap", "a/b", "apps"), "changes.0.object.metadata.name"],
      [upsert("v1", "ConfigMap", "a\u0000b", "apps"), "changes.0.object.metadata.name"],
      [upsert("v1", "ConfigMap", "Upper", "apps"), "changes.0.object.metadata.name"],
      [upsert("v1", "ConfigMap", "x", "../etc"), "changes.0.object.metadata.namespace"],
      [upsert("v1", "ConfigMap", "x", ""), "changes.0.object.metadata.namespace"],
      [upsert("v1", "Conf/igMap", "x", "apps"), "changes.0.object.kind"],
      [upsert(".git/v1", "ConfigMap", "x", "apps"), "changes.0.object.apiVersion"],
      [upsert("v1", "Namespace", "a.b"), "changes.0.object.metadata.name"],
      [
        { op: "delete", ref: { apiVersion: "v1", kind: "Secret", namespace: "apps", name: ".." } },
        "changes.0.ref.name",
      ],
    ];
    for (const [change, field] of bad)
      expect(writeProblem([change])?.field, JSON.stringify(change)).toBe(field);
    // Real names of real kinds pass.
    for (const ok of [
      upsert(RBAC, "ClusterRole", "system:controller:attachdetach-controller"),
      upsert(RBAC, "ClusterRoleBinding", "cluster-admin"),
      upsert("v1", "ConfigMap", "kube-root-ca.crt", "apps"),
      upsert("apps/v1", "Deployment", "web", "apps"),
      upsert("apiextensions.k8s.io/v1", "CustomResourceDefinition", "gittargets.applygate.dev"),
    ])
      expect(writeProblem([ok])).toBeUndefined();
    expect(
      writeProblem([upsert("v1", "ConfigMap", "a", "apps"), upsert(RBAC, "Role", "~", "apps")])?.field,
    ).toBe("changes.1.object.metadata.name");
  });

  it("bounds nesting depth without recursing, and size", () => {
    const deep = {
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name: "d", namespace: "apps" },
      data: nested(1000),
    };
    expect(writeProblem([{ op: "upsert", object: deep }])).toMatchObject({
      field: "changes.0.object",
      message: expect.stringMatching(/nested deeper than 64/),
    });
    // Far more levels than the stack holds, as JSON.parse gives them, are measured without overflow.
    const huge = JSON.parse(`${"[".repeat(200_000)}${"]".repeat(200_000)}`);
    expect(depthExceeds(huge, MAX_OBJECT_DEPTH)).toBe(true);
    expect(depthExceeds(nested(MAX_OBJECT_DEPTH - 2), MAX_OBJECT_DEPTH)).toBe(false);
    const big = {
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name: "big", namespace: "apps" },
      data: { x: "y".repeat(2 * 1024 * 1024) },
    };
    expect(writeProblem([{ op: "upsert", object: big }])?.message).toMatch(/bytes as JSON/);
  });

  it("takes a base only of the same object, bounded like the object", () => {
    const object = {
      apiVersion: "apps/v1",
      kind: "Deployment",
      metadata: { name: "web", namespace: "apps" },
    };
    expect(
      writeProblem([{ op: "upsert", object, base: { ...object, apiVersion: "apps/v1beta2" } }]),
    ).toBeUndefined();
    for (const base of [
      { ...object, apiVersion: "v1" },
      { ...object, kind: "StatefulSet" },
      { ...object, metadata: { name: "api", namespace: "apps" } },
      { ...object, metadata: { name: "web" } },
    ])
      expect(writeProblem([{ op: "upsert", object, base }])).toMatchObject({
        field: "changes.0.base",
        message: expect.stringMatching(/names another object/),
      });
    expect(
      writeProblem([{ op: "upsert", object, base: { ...object, spec: nested(1000) } as typeof object }]),
    ).toMatchObject({
      field: "changes.0.base",
      message: expect.stringMatching(/nested deeper than 64/),
    });
  });
});

describe("property: anything the door accepts, the worker can store", () => {
  let dir: string;
  let repo: BareRepo;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "applygate-write-check-"));
    repo = await BareRepo.open(join(dir, "r.git"));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  // Characters that trip Git, Windows, macOS or the layout, mixed with ordinary ones.
  const tricky = fc.constantFrom(..."abcgitz019.-_:~@+= \\/\u0000\u200c\ufeffGIT".split(""));
  const weird = fc.oneof(
    fc.string({ unit: tricky, minLength: 1, maxLength: 12 }),
    fc.constantFrom(".git", ".git:x", "git~1", ".GIT.", "..", ".", "a..b", "x:$INDEX_ALLOCATION", "~1"),
    fc.domain().map((d) => d.toLowerCase()),
    fc.string({ minLength: 1, maxLength: 8 }),
    fc.stringMatching(/^[a-zA-Z0-9][-a-z0-9.:~_]{0,10}[a-z0-9.]$/),
  );
  const kind = fc.constantFrom<[string, string]>(
    ["v1", "ConfigMap"],
    [RBAC, "ClusterRole"],
    [RBAC, "Role"],
    ["v1", "Namespace"],
    ["apps/v1", "Deployment"],
    ["example.com/v1", "Widget"],
  );
  const change = fc
    .record({
      kind,
      name: weird,
      namespace: fc.option(fc.oneof(weird, fc.constantFrom("apps", "kube-system", "a")), { nil: undefined }),
    })
    .map(({ kind: [apiVersion, k], name, namespace }) => upsert(apiVersion!, k!, name, namespace));

  it("commits every accepted object to a real repository, and git fsck finds nothing wrong", async () => {
    let accepted = 0;
    let parent: string | undefined;
    await fc.assert(
      fc.asyncProperty(change, async (c) => {
        if (writeProblem([c]) !== undefined) return;
        accepted++;
        const obj = {
          ...(c as Extract<CheckedChange, { op: "upsert" }>).object,
          data: { v: String(accepted) },
        };
        const path = objectPath("clusters/dev", refOf(obj));
        const written = await repo.commitChanges(parent, [{ path, content: objectYaml(obj) }], {
          message: `store ${path}`,
          author: { name: "t", email: "t@example.com", timestamp: 1_700_000_000 },
        });
        expect(written).toBeDefined();
        parent = written!.commit;
      }),
      { numRuns: 400 },
    );
    // The property is not vacuous: a good share of the generated objects were accepted.
    expect(accepted).toBeGreaterThan(40);
    await repo.writeRef("refs/heads/main", parent!);
    await gitOk(["fsck", "--strict", "--no-dangling"], { cwd: join(dir, "r.git") });
  });
});
