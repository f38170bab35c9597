import { describe, expect, it } from "vitest";
import { authorshipOf } from "./authorship.js";

const FLUX = ["kustomize-controller"];
const entry = (
  manager: string,
  time: string,
  fields: object = { "f:data": { "f:a": {} } },
  operation = "Update",
) => ({
  manager,
  operation,
  time,
  fieldsType: "FieldsV1",
  fieldsV1: fields,
});
const cm = (...managedFields: object[]) => ({
  metadata: { name: "c", namespace: "team", resourceVersion: "9", managedFields },
});

describe("authorship of a watched write", () => {
  it("a kubectl edit is an edit, authored by its manager, at its entry's time", () => {
    const before = cm(
      entry("kustomize-controller", "2026-03-01T10:00:00Z", { "f:data": { "f:a": {} } }, "Apply"),
    );
    const after = cm(
      entry("kustomize-controller", "2026-03-01T10:00:00Z", { "f:data": {} }, "Apply"),
      entry("kubectl-edit", "2026-03-01T10:00:05Z"),
    );
    expect(authorshipOf(after, FLUX, before)).toEqual({
      kind: "edit",
      manager: "kubectl-edit",
      editedAt: "2026-03-01T10:00:05Z",
    });
  });

  it("the applier's managers alone touching entries is the applier's write, for the worker to judge", () => {
    const before = cm(entry("kubectl-edit", "2026-03-01T10:00:05Z", { "f:data": { "f:a": {}, "f:b": {} } }));
    const after = cm(
      entry("kubectl-edit", "2026-03-01T10:00:05Z", { "f:data": { "f:b": {} } }),
      entry("kustomize-controller", "2026-03-01T10:00:09Z", { "f:data": { "f:a": {} } }, "Apply"),
    );
    // kubectl-edit only lost a field to the apply: the apply's writer alone touched entries.
    expect(authorshipOf(after, FLUX, before)).toEqual({
      kind: "applier",
      write: { manager: "kustomize-controller", writtenAt: "2026-03-01T10:00:09Z", resourceVersion: "9" },
    });
  });

  it("a kubectl scale is an edit by kubectl, though the real API server gives its entry no time", () => {
    // The shapes kube-apiserver v1.36 writes (test/real/RESULTS.md, kubectl facts): the applier's
    // Apply entry loses the replicas; the scale's Update entry (subresource scale) has no time.
    const applied = { "f:spec": { "f:replicas": {}, "f:template": {} } };
    const before = {
      metadata: {
        ...cm().metadata,
        managedFields: [entry("kustomize-controller", "2026-03-01T10:00:00Z", applied, "Apply")],
      },
    };
    const scale = {
      manager: "kubectl",
      operation: "Update",
      subresource: "scale",
      apiVersion: "apps/v1",
      fieldsType: "FieldsV1",
      fieldsV1: { "f:spec": { "f:replicas": {} } },
    };
    const after = {
      metadata: {
        ...cm().metadata,
        resourceVersion: "10",
        managedFields: [
          entry("kustomize-controller", "2026-03-01T10:00:00Z", { "f:spec": { "f:template": {} } }, "Apply"),
          scale,
        ],
      },
    };
    expect(authorshipOf(after, FLUX, before)).toEqual({ kind: "edit", manager: "kubectl" });
    // The scale entry gaining the replicas again (scaled back after an apply took them) is an edit too.
    const taken = {
      metadata: {
        ...after.metadata,
        managedFields: [
          entry("kustomize-controller", "2026-03-01T10:01:00Z", applied, "Apply"),
          { ...scale, fieldsV1: { "f:spec": {} } },
        ],
      },
    };
    expect(authorshipOf(after, FLUX, taken)).toEqual({ kind: "edit", manager: "kubectl" });
  });

  it("a tie with another manager in the same second is an edit (only proof withholds)", () => {
    const after = cm(
      entry("kustomize-controller", "2026-03-01T10:00:09Z", { "f:data": { "f:a": {} } }, "Apply"),
      entry("kubectl-edit", "2026-03-01T10:00:09Z", { "f:data": { "f:b": {} } }),
    );
    expect(authorshipOf(after, FLUX)).toMatchObject({ kind: "edit", manager: "kubectl-edit" });
  });

  it("an undo that removes every field its manager owned is an edit, even with the applier's entry newest", () => {
    const before = cm(
      entry("kustomize-controller", "2026-03-01T10:00:00Z", { "f:data": { "f:a": {} } }, "Apply"),
      entry("kubectl-label", "2026-03-01T10:00:05Z", { "f:metadata": { "f:labels": { "f:tmp": {} } } }),
    );
    const after = cm(
      entry("kustomize-controller", "2026-03-01T10:00:00Z", { "f:data": { "f:a": {} } }, "Apply"),
    );
    expect(authorshipOf(after, FLUX, before).kind).toBe("edit");
  });

  it("a create by a person is an edit; with no timed entry the author is unknown", () => {
    expect(authorshipOf(cm(entry("kubectl-create", "2026-03-01T10:00:00Z")), FLUX)).toMatchObject({
      kind: "edit",
      manager: "kubectl-create",
    });
    expect(authorshipOf(cm(), FLUX)).toEqual({ kind: "edit", manager: "unknown" });
  });

  it("a status write never names the author", () => {
    const after = cm(entry("kubectl-edit", "2026-03-01T10:00:05Z"), {
      ...entry("some-controller", "2026-03-01T10:00:09Z", { "f:status": {} }),
      subresource: "status",
    });
    expect(authorshipOf(after, FLUX)).toMatchObject({ kind: "edit", manager: "kubectl-edit" });
  });
});
