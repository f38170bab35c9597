import { describe, expect, it } from "vitest";
import type { WatchRule } from "../../queue/crds/index.js";
import type { KObject } from "../../queue/kube/index.js";
import { scopeOf } from "../../queue/scope.js";
import { CONFIG_MAP, SECRET, watchRule } from "../../test/support/watch-rules.js";
import type { ResolvedTarget } from "./targets.js";
import { type TranslateInput, translate } from "./translate.js";

const rule = (spec: Partial<WatchRule["spec"]> = {}): WatchRule =>
  watchRule({
    kinds: [
      { group: "", version: "v1", kind: "ConfigMap" },
      { group: "", version: "v1", kind: "Secret" },
    ],
    ...spec,
  });
const target: ResolvedTarget = {
  namespace: "team",
  name: "site",
  branchKey: "b1",
  path: "apps",
  scope: scopeOf({ namespace: "team", name: "site" }, []),
  applier: { kind: "flux", namespace: "flux-system", name: "apps" },
  applierManagers: ["kustomize-controller"],
};
const at = (s: number) => `2026-01-01T00:00:0${s}Z`;
const cm = (
  data: Record<string, string>,
  o: { manager?: string; time?: string; extra?: object } = {},
): KObject =>
  ({
    apiVersion: "v1",
    kind: "ConfigMap",
    metadata: {
      name: "c",
      namespace: "team",
      resourceVersion: "7",
      managedFields: [
        {
          manager: o.manager ?? "kubectl-edit",
          operation: "Update",
          apiVersion: "v1",
          time: o.time ?? at(1),
          fieldsType: "FieldsV1",
          fieldsV1: { "f:data": Object.fromEntries(Object.keys(data).map((k) => [`f:${k}`, {}])) },
        },
      ],
      ...o.extra,
    },
    data,
  }) as unknown as KObject;

const input = (over: Partial<TranslateInput>): TranslateInput => ({
  rule: rule(),
  target,
  kind: CONFIG_MAP,
  type: "add",
  obj: cm({ a: "1" }),
  controllerManagers: [],
  authorDomain: "cluster.local",
  ...over,
});

describe("translate: what one watched write becomes for one rule", () => {
  it("an object the rule does not select (another kind, another namespace, a suspended rule): nothing", () => {
    const other = rule({ kinds: [{ group: "apps", version: "v1", kind: "Deployment" }] });
    expect(translate(input({ rule: other }))).toEqual({ verdict: "NotSelected" });
    const elsewhere = cm({ a: "1" });
    elsewhere.metadata.namespace = "other-team";
    expect(translate(input({ obj: elsewhere }))).toEqual({ verdict: "NotSelected" });
    expect(translate(input({ rule: rule({ suspend: true }) }))).toEqual({ verdict: "NotSelected" });
  });

  it("another applier's object: excluded, naming the owner; the folder's own applier's is mirrored", () => {
    const labels = (name: string) => ({
      labels: {
        "kustomize.toolkit.fluxcd.io/name": name,
        "kustomize.toolkit.fluxcd.io/namespace": "flux-system",
      },
    });
    expect(translate(input({ obj: cm({ a: "1" }, { extra: labels("other") }) }))).toEqual({
      verdict: "Excluded",
      shown: "ConfigMap team/c",
      owner: "Kustomization flux-system/other",
    });
    expect(translate(input({ obj: cm({ a: "1" }, { extra: labels("apps") }) })).verdict).toBe("Write");
  });

  it("an object its controller owns: excluded without an owner to name", () => {
    const owned = cm(
      { a: "1" },
      { extra: { ownerReferences: [{ kind: "X", name: "x", controller: true }] } },
    );
    expect(translate(input({ obj: owned }))).toEqual({ verdict: "Excluded", shown: "ConfigMap team/c" });
  });

  it("a Secret, were its kind ever watched: refused, never written", () => {
    const secret = { ...cm({ a: "1" }), kind: "Secret" } as KObject;
    expect(translate(input({ kind: SECRET, obj: secret }))).toMatchObject({ verdict: "Refused" });
  });

  it("a create: an upsert by the editing manager, at its time", () => {
    expect(translate(input({}))).toEqual({
      verdict: "Write",
      write: {
        changes: [
          {
            op: "upsert",
            object: {
              apiVersion: "v1",
              kind: "ConfigMap",
              metadata: { name: "c", namespace: "team" },
              data: { a: "1" },
            },
          },
        ],
        author: { name: "kubectl-edit", email: "kubectl-edit@cluster.local" },
        editedAt: at(1),
      },
    });
  });

  it("an update: the object as last seen is the base; one that changes nothing Git holds is no write", () => {
    const before = cm({ a: "1" });
    const after = cm({ a: "2" }, { time: at(2) });
    const t = translate(input({ type: "update", obj: after, previous: before }));
    expect(t).toMatchObject({
      verdict: "Write",
      write: { changes: [{ op: "upsert", base: { data: { a: "1" } } }] },
    });
    const statusOnly = {
      ...before,
      metadata: { ...before.metadata, resourceVersion: "8" },
      status: { x: 1 },
    } as KObject;
    expect(translate(input({ type: "update", obj: statusOnly, previous: before }))).toEqual({
      verdict: "Unchanged",
    });
  });

  it("a write by the applier's own manager is marked applier-authored, for the worker to judge", () => {
    const t = translate(input({ obj: cm({ a: "1" }, { manager: "kustomize-controller" }) }));
    expect(t).toMatchObject({
      verdict: "Write",
      write: { applierAuthored: { manager: "kustomize-controller" } },
    });
  });

  it("a delete: a delete of the file; a delete of what was never mirrored: nothing", () => {
    expect(translate(input({ type: "delete" }))).toEqual({
      verdict: "Write",
      write: {
        changes: [
          { op: "delete", ref: { apiVersion: "v1", kind: "ConfigMap", name: "c", namespace: "team" } },
        ],
        author: { name: "unknown", email: "unknown@cluster.local" },
      },
    });
    const owned = cm(
      { a: "1" },
      { extra: { ownerReferences: [{ kind: "X", name: "x", controller: true }] } },
    );
    expect(translate(input({ type: "delete", obj: owned }))).toEqual({ verdict: "Unchanged" });
  });

  it("a snapshot's write carries its stamp", () => {
    const stamp = { id: "s-1", epoch: 3, gitAhead: false, initial: true };
    expect(translate(input({ stamp }))).toMatchObject({ verdict: "Write", write: { snapshot: stamp } });
  });

  it("what the worker could not store is refused here, naming the field", () => {
    const huge = cm({ a: "x".repeat(2_000_000) });
    expect(translate(input({ obj: huge }))).toMatchObject({ verdict: "Refused" });
  });
});
