import { describe, expect, it } from "vitest";
import { ownersAfterScale, writeOwners } from "./managed.js";
import { Registry } from "./registry.js";
import type { KObject, ManagedFieldsEntry } from "./types.js";

const deployments = new Registry().find("apps", "v1", "deployments")!;
const T1 = "2025-01-01T00:00:01Z";
const T2 = "2025-01-01T00:00:02Z";
const replicas = { "f:spec": { "f:replicas": {} } };
const image = { "f:spec": { "f:template": { "f:spec": { "f:containers": {} } } } };
const both = { "f:spec": { "f:replicas": {}, "f:template": { "f:spec": { "f:containers": {} } } } };

const entry = (
  manager: string,
  operation: "Apply" | "Update",
  fieldsV1: ManagedFieldsEntry["fieldsV1"],
  extra: Partial<ManagedFieldsEntry> = {},
): ManagedFieldsEntry => ({
  manager,
  operation,
  apiVersion: "apps/v1",
  time: T1,
  fieldsType: "FieldsV1",
  fieldsV1,
  ...extra,
});

const deploy = (n: number, managedFields: ManagedFieldsEntry[]): KObject => ({
  apiVersion: "apps/v1",
  kind: "Deployment",
  metadata: { name: "d", managedFields },
  spec: { replicas: n },
});

/** managedFields after `kubectl scale --replicas=to` of a Deployment at `from` with these entries. */
const scale = (from: number, to: number, managedFields: ManagedFieldsEntry[]) =>
  writeOwners(
    ownersAfterScale(deployments, deploy(from, managedFields), deploy(to, managedFields), {
      manager: "kubectl",
      apiVersion: "apps/v1",
      subresource: "scale",
      time: T2,
    }),
  );

const scaler = entry("kubectl", "Update", replicas, { subresource: "scale" });
const { time: _none, ...untimedScaler } = scaler;

describe("managedFields through the scale subresource", () => {
  it("an apply keeps its time; the writer's entry has none", () => {
    expect(scale(1, 3, [entry("kubectl", "Apply", both)])).toEqual([
      entry("kubectl", "Apply", image),
      untimedScaler,
    ]);
  });

  it("an apply the write left owning the replicas is kept whole", () => {
    const applied = [entry("ci", "Apply", both)];
    expect(scale(2, 2, applied)).toEqual(applied);
  });

  it("an update owning the replicas comes back split when the write left them, without them when it took them", () => {
    const { time: _t, ...untimed } = entry("kubectl-client-side-apply", "Update", replicas);
    expect(scale(1, 1, [entry("kubectl-client-side-apply", "Update", both)])).toEqual([
      untimed,
      entry("kubectl-client-side-apply", "Update", image),
    ]);
    expect(scale(1, 4, [entry("kubectl-client-side-apply", "Update", both)])).toEqual([
      untimedScaler,
      entry("kubectl-client-side-apply", "Update", image),
    ]);
  });

  it("nobody owning the replicas: the write is not tracked", () => {
    const applied = [entry("ci", "Apply", image)];
    expect(scale(1, 5, applied)).toEqual(applied);
  });

  it("the writer's earlier entry is replaced, never timed", () => {
    expect(scale(3, 4, [entry("ci", "Apply", image), scaler])).toEqual([
      entry("ci", "Apply", image),
      untimedScaler,
    ]);
  });
});
