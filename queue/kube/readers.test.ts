import { describe, expect, it } from "vitest";
import { mayHold } from "../crds/index.js";
import {
  applicationAutomatedOf,
  applicationDestinationOf,
  applicationOperationOf,
  applicationRepoOf,
  applierRefOf,
  argoOperationOf,
  artifactRevisionOf,
  claimOperationOf,
  claimStatusField,
  conditionIn,
  fieldAppliers,
  fieldOf,
  fieldSetHolds,
  fieldsOf,
  fluxHistoryHeadOf,
  fluxReadyOf,
  fluxSpecField,
  fluxStatusField,
  fluxSuspended,
  gitRepositoryRefOf,
  grantViewOf,
  inventoryEntriesOf,
  isKObject,
  isRecord,
  kustomizationSourceOf,
  operationStateOf,
  partOf,
  secretFields,
  storedConditionsOf,
  stringsIn,
  syncWindowFields,
  targetField,
  targetSpecFields,
} from "./readers.js";

const T0 = "2026-01-01T00:00:00Z";

describe("field readers", () => {
  it("tell a JSON object from every other value", () => {
    expect([{}, { a: 1 }].map(isRecord)).toEqual([true, true]);
    expect([null, undefined, [], "x", 1, true].map(isRecord)).toEqual([
      false,
      false,
      false,
      false,
      false,
      false,
    ]);
  });

  it("give a field that fits as stored: the same value, nothing stripped or defaulted", () => {
    const providerRef = { name: "repo", namespace: "git", extra: "kept" };
    const spec = { providerRef, branch: "main" };
    expect(targetField({ spec }, "providerRef")).toBe(providerRef);
    expect(targetField({ spec }, "branch")).toBe("main");
    // onRefusal has a default in the schema; absent, it reads absent.
    expect(targetField({ spec }, "onRefusal")).toBeUndefined();
  });

  it("read a field that does not fit as absent, without hiding the others", () => {
    const spec = {
      branch: "main",
      providerRef: { name: 5 },
      claimRef: { kind: "SomeClaim", name: "web" },
      suspend: "yes",
    };
    expect(targetField({ spec }, "providerRef")).toBeUndefined();
    expect(targetField({ spec }, "claimRef")).toBeUndefined();
    expect(targetField({ spec }, "suspend")).toBeUndefined();
    expect(targetField({ spec }, "branch")).toBe("main");
  });

  it("read nothing of a part that is absent or not an object", () => {
    for (const spec of [undefined, null, "x", [], 3])
      expect(fieldOf(targetSpecFields, spec, "branch"), String(spec)).toBeUndefined();
    expect(targetField(undefined, "branch")).toBeUndefined();
    expect(claimStatusField({}, "lastAppliedCommit")).toBeUndefined();
    expect(partOf(targetSpecFields, "x", "claimRef")).toBeUndefined();
  });

  it("read several fields at once, each on its own: those that fit, the others absent", () => {
    const spec = { branch: "main", suspend: "yes", path: "apps" };
    expect(fieldsOf(targetSpecFields, spec, ["branch", "suspend", "claimRef"])).toEqual({ branch: "main" });
    expect(fieldsOf(targetSpecFields, "x", ["branch"])).toEqual({});
  });

  it("hand on a part unread, for its fields to be read one at a time", () => {
    const claimRef = { kind: "FluxClaim", name: 7 };
    expect(partOf(targetSpecFields, { claimRef }, "claimRef")).toBe(claimRef);
  });
});

describe("applierRefOf", () => {
  it("reads the reference of the claim's kind, its namespace optional", () => {
    const spec = {
      kustomizationRef: { name: "web", namespace: "flux-system" },
      applicationRef: { name: "app" },
    };
    expect(applierRefOf("FluxClaim", { spec })).toEqual({ name: "web", namespace: "flux-system" });
    expect(applierRefOf("ArgoCDClaim", { spec })).toEqual({ name: "app" });
    expect(applierRefOf("WebhookClaim", { spec })).toBeUndefined();
    expect(applierRefOf("FluxClaim", { spec: { kustomizationRef: { namespace: "x" } } })).toBeUndefined();
    expect(applierRefOf("FluxClaim", {})).toBeUndefined();
  });
});

describe("grantViewOf", () => {
  const req = {
    claimKind: "FluxClaim",
    claimNamespace: "team-a",
    applierNamespace: "apps",
    applierName: "web",
  };

  it("reads a grant's spec, its namespace defaulting to the one it was listed in", () => {
    const g = grantViewOf({ metadata: {}, spec: { from: [{ namespace: "team-a" }] } }, "apps");
    expect(g).toEqual({ namespace: "apps", spec: { from: [{ namespace: "team-a" }] } });
    expect(mayHold(req, [g])).toBe(true);
  });

  it("a spec that does not fit grants nothing: a bad `to` never reads as every applier", () => {
    const bad = grantViewOf(
      { metadata: { namespace: "apps" }, spec: { from: [{ namespace: "team-a" }], to: [{ name: 5 }] } },
      "apps",
    );
    expect(bad).toEqual({ namespace: "apps" });
    expect(mayHold(req, [bad])).toBe(false);
    expect(grantViewOf({ metadata: { namespace: "apps" } }, "apps")).toEqual({ namespace: "apps" });
  });
});

describe("stored conditions", () => {
  const ours = {
    type: "Retrying",
    status: "True",
    reason: "BackingOff",
    message: "",
    lastTransitionTime: T0,
  };
  const theirs = { type: "Ready", status: "True", reason: "Held", message: "", lastTransitionTime: "t0" };

  it("keep another writer's condition as it is, whatever its other fields hold", () => {
    const list = storedConditionsOf({ status: { conditions: [theirs, ours] } });
    expect(list).toEqual([theirs, ours]);
    expect(list?.[0]).toBe(theirs);
  });

  it("read one condition whole, absent when it does not fit", () => {
    const list = storedConditionsOf({ status: { conditions: [theirs, ours] } });
    expect(conditionIn(list, "Retrying")).toBe(ours);
    expect(conditionIn(list, "Ready")).toBeUndefined();
    expect(conditionIn(list, "Other")).toBeUndefined();
  });

  it("are absent when the list is not a list of typed objects", () => {
    expect(storedConditionsOf({ status: { conditions: [{ status: "True" }] } })).toBeUndefined();
    expect(storedConditionsOf({ status: { conditions: "Ready" } })).toBeUndefined();
    expect(storedConditionsOf({})).toBeUndefined();
  });
});

describe("claimOperationOf", () => {
  const op = {
    token: "t-1",
    phase: "Running",
    commit: "c1",
    targets: [{ uid: "u1", reason: "Repair" }],
    requestedAt: T0,
    startedAt: T0,
  };

  it("reads the operation a claim's status records: what a restart needs of it", () => {
    expect(claimOperationOf({ status: { operation: op } })).toEqual({
      token: "t-1",
      phase: "Running",
      commit: "c1",
      targets: [{ uid: "u1", reason: "Repair" }],
      requestedAt: T0,
    });
    const { requestedAt: _, ...before } = op;
    expect(claimOperationOf({ status: { operation: before } })).not.toHaveProperty("requestedAt");
  });

  it("is absent without a token, phase and commit that fit", () => {
    for (const bad of [{ token: "" }, { token: 7 }, { phase: "Sleeping" }, { phase: 1 }, { commit: null }])
      expect(
        claimOperationOf({ status: { operation: { ...op, ...bad } } }),
        JSON.stringify(bad),
      ).toBeUndefined();
    for (const status of [undefined, "x", { operation: "Running" }, { operation: [op] }])
      expect(claimOperationOf({ status })).toBeUndefined();
    expect(claimOperationOf(undefined)).toBeUndefined();
  });

  it("leaves out each target and the requestedAt that do not fit, not the operation", () => {
    const read = claimOperationOf({
      status: {
        operation: {
          ...op,
          targets: [{ uid: "u1", reason: "Repair", extra: 1 }, { uid: "" }, "u2", { uid: "u3", reason: 5 }],
          requestedAt: "yesterday",
        },
      },
    });
    expect(read).toEqual({
      token: "t-1",
      phase: "Running",
      commit: "c1",
      targets: [{ uid: "u1", reason: "Repair" }],
    });
    expect(claimOperationOf({ status: { operation: { ...op, targets: "u1" } } })?.targets).toEqual([]);
  });
});

describe("other controllers' objects", () => {
  describe("a Kustomization's source", () => {
    const ks = (sourceRef: unknown, namespace: string | null = "apps") => ({
      metadata: { name: "web", ...(namespace !== null ? { namespace } : {}) },
      spec: { sourceRef },
    });
    const repo = (namespace = "apps") => ({ kind: "GitRepository", name: "repo", namespace });

    it("is read with the kind and name given, the namespace the Kustomization's when not given", () => {
      const cases: [string, unknown, object][] = [
        ["all given", { kind: "GitRepository", name: "repo", namespace: "flux-system" }, repo("flux-system")],
        ["no namespace", { kind: "GitRepository", name: "repo" }, repo()],
        // Flux takes an empty namespace for none, as it does a missing one.
        ["an empty namespace", { kind: "GitRepository", name: "repo", namespace: "" }, repo()],
        ["a namespace that is no string", { kind: "GitRepository", name: "repo", namespace: 5 }, repo()],
        ["another kind", { kind: "OCIRepository", name: "repo" }, { ...repo(), kind: "OCIRepository" }],
      ];
      for (const [what, ref, want] of cases)
        for (const missing of ["none", "GitRepository"] as const)
          expect(kustomizationSourceOf(ks(ref), missing), `${what} (${missing})`).toEqual(want);
      expect(kustomizationSourceOf(ks({ kind: "GitRepository", name: "repo" }, null), "none")).toEqual(
        repo("default"),
      );
    });

    it("without a kind names no source, unless the caller reads it as a GitRepository", () => {
      for (const ref of [{ name: "repo" }, { name: "repo", kind: "" }, { name: "repo", kind: 3 }]) {
        expect(kustomizationSourceOf(ks(ref), "none"), JSON.stringify(ref)).toBeUndefined();
        expect(kustomizationSourceOf(ks(ref), "GitRepository"), JSON.stringify(ref)).toEqual(repo());
      }
    });

    it("without a name that fits names no source, whatever the caller makes of a kind", () => {
      for (const ref of [{ kind: "GitRepository" }, { kind: "GitRepository", name: "" }, { name: 5 }, "repo"])
        for (const missing of ["none", "GitRepository"] as const)
          expect(kustomizationSourceOf(ks(ref), missing), JSON.stringify(ref)).toBeUndefined();
      for (const spec of ["x", null, undefined])
        expect(kustomizationSourceOf({ metadata: {}, spec }, "GitRepository")).toBeUndefined();
      expect(kustomizationSourceOf(undefined, "GitRepository")).toBeUndefined();
    });
  });

  describe("Flux objects, as the sidecar reads them", () => {
    it("read spec.suspend as true only when it is the boolean true", () => {
      const cases: [unknown, boolean][] = [
        [{ suspend: true }, true],
        [{ suspend: false }, false],
        [{ suspend: "true" }, false],
        [{ suspend: 1 }, false],
        [{}, false],
        ["suspend", false],
      ];
      for (const [spec, want] of cases) expect(fluxSuspended({ spec }), JSON.stringify(spec)).toBe(want);
      expect(fluxSuspended(undefined)).toBe(false);
      expect(fluxSpecField({ spec: { suspend: "yes" } }, "suspend")).toBeUndefined();
    });

    it("read a GitRepository's url, ref and artifact, each field on its own", () => {
      const src = {
        spec: {
          url: "https://git.example/a.git",
          ref: { branch: "main", tag: 5, semver: "", commit: "abc" },
        },
        status: { artifact: { revision: "main@sha1:abc" } },
      };
      expect(fluxSpecField(src, "url")).toBe("https://git.example/a.git");
      expect(gitRepositoryRefOf(src)).toEqual({ branch: "main", commit: "abc" });
      expect(artifactRevisionOf(src)).toBe("main@sha1:abc");
      for (const bad of [
        { spec: { url: 7, ref: "main" }, status: { artifact: { revision: 1 } } },
        { status: { artifact: "x" } },
        {},
      ]) {
        expect(fluxSpecField(bad, "url"), JSON.stringify(bad)).toBeUndefined();
        expect(gitRepositoryRefOf(bad), JSON.stringify(bad)).toEqual({});
        expect(artifactRevisionOf(bad), JSON.stringify(bad)).toBeUndefined();
      }
    });

    it("read the Ready condition field by field, absent when there is none", () => {
      const ready = {
        type: "Ready",
        status: "False",
        reason: "BuildFailed",
        message: "m",
        lastTransitionTime: "t",
      };
      const other = { type: "Reconciling", status: "True" };
      expect(fluxReadyOf({ status: { conditions: [7, other, ready] } })).toEqual({
        status: "False",
        reason: "BuildFailed",
        message: "m",
        lastTransitionTime: "t",
      });
      expect(fluxReadyOf({ status: { conditions: [{ type: "Ready", status: "Yes", reason: 3 }] } })).toEqual(
        {},
      );
      for (const status of [
        { conditions: [other] },
        { conditions: "Ready" },
        { conditions: [{ type: 1 }] },
        "x",
        undefined,
      ])
        expect(fluxReadyOf({ status }), JSON.stringify(status)).toBeUndefined();
    });

    it("read the status fields the outcome reads, absent when they do not fit", () => {
      const status = { lastHandledReconcileAt: "T1", lastAppliedRevision: "main@sha1:abc" };
      expect(fluxStatusField({ status }, "lastHandledReconcileAt")).toBe("T1");
      expect(fluxStatusField({ status }, "lastAppliedRevision")).toBe("main@sha1:abc");
      const bad = { lastHandledReconcileAt: 1, lastAppliedRevision: "" };
      expect(fluxStatusField({ status: bad }, "lastHandledReconcileAt")).toBeUndefined();
      expect(fluxStatusField({ status: bad }, "lastAppliedRevision")).toBeUndefined();
    });

    it("read the newest history entry and the inventory, entry by entry", () => {
      const head = {
        digest: "d",
        lastReconciled: "t",
        lastReconciledStatus: "ok",
        totalReconciliations: "2",
      };
      expect(fluxHistoryHeadOf({ status: { history: [head, { digest: "older" }] } })).toEqual({
        digest: "d",
        lastReconciled: "t",
        lastReconciledStatus: "ok",
      });
      for (const history of [[], ["d"], "d", undefined])
        expect(fluxHistoryHeadOf({ status: { history } }), JSON.stringify(history)).toBeUndefined();
      const entry = { id: "apps_web_apps_Deployment", v: "v1" };
      expect(
        inventoryEntriesOf({ status: { inventory: { entries: [entry, { id: 5, v: "v1" }, "x"] } } }),
      ).toEqual([entry]);
      for (const inventory of [{ entries: "x" }, [entry], undefined])
        expect(inventoryEntriesOf({ status: { inventory } }), JSON.stringify(inventory)).toEqual([]);
    });
  });

  describe("managedFields", () => {
    const suspend = { "f:spec": { "f:suspend": {} } };
    it("tell whether a field set holds a path", () => {
      expect(fieldSetHolds(suspend, ["spec", "suspend"])).toBe(true);
      expect(fieldSetHolds(suspend, ["spec"])).toBe(true);
      for (const set of [
        { "f:spec": {} },
        { "f:spec": ["f:suspend"] },
        { "f:spec": "f:suspend" },
        "x",
        undefined,
      ])
        expect(fieldSetHolds(set, ["spec", "suspend"]), JSON.stringify(set)).toBe(false);
      expect(fieldSetHolds(suspend, [])).toBe(false);
    });

    it("name the managers that apply a field, each entry read on its own", () => {
      const managedFields = [
        { manager: "helm", operation: "Apply", fieldsV1: suspend },
        { operation: "Apply", fieldsV1: suspend },
        { manager: "flux", operation: "Update", fieldsV1: suspend },
        { manager: "status", operation: "Apply", subresource: "status", fieldsV1: suspend },
        { manager: "other", operation: "Apply", fieldsV1: { "f:spec": { "f:path": {} } } },
        { manager: 5, operation: "Apply", fieldsV1: suspend },
        { manager: "bad", operation: "Apply", fieldsV1: "f:spec" },
        "helm",
      ];
      expect(fieldAppliers({ metadata: { managedFields } }, ["spec", "suspend"])).toEqual([
        "helm",
        undefined,
        undefined,
      ]);
      expect(fieldAppliers({ metadata: { managedFields: "x" } }, ["spec", "suspend"])).toEqual([]);
      expect(fieldAppliers(undefined, ["spec", "suspend"])).toEqual([]);
    });
  });

  describe("Argo CD objects, as the sidecar reads them", () => {
    it("read the automated-sync switch field by field, absent when it is absent or null", () => {
      const spec = (automated: unknown) => ({ spec: { syncPolicy: { automated } } });
      expect(applicationAutomatedOf(spec({ enabled: false, prune: true }))).toEqual({
        enabled: false,
        prune: true,
      });
      expect(applicationAutomatedOf(spec({ enabled: null, selfHeal: "yes" }))).toEqual({ enabled: null });
      expect(applicationAutomatedOf(spec({}))).toEqual({});
      for (const automated of [null, undefined, "on", true, []])
        expect(applicationAutomatedOf(spec(automated)), JSON.stringify(automated)).toBeUndefined();
      expect(applicationAutomatedOf({ spec: { syncPolicy: "auto" } })).toBeUndefined();
      expect(applicationAutomatedOf(undefined)).toBeUndefined();
    });

    it("read an operation's fields each on its own, its info entry by entry", () => {
      const op = {
        sync: { revision: "c1", prune: true },
        initiatedBy: { username: "applygate", automated: "yes" },
        info: [{ name: "token", value: "t1" }, { name: "n", value: 2 }, "x"],
        retry: { limit: 2, backoff: { duration: "5s", factor: "2" }, refresh: true },
      };
      expect(argoOperationOf(op)).toEqual({
        sync: { revision: "c1" },
        initiatedBy: { username: "applygate" },
        info: [{ name: "token", value: "t1" }],
        retry: { limit: 2, backoff: { duration: "5s" } },
      });
      expect(argoOperationOf({ sync: "c1", info: "t1", retry: [] })).toEqual({ info: [] });
      for (const bad of [null, "sync", 3, undefined]) expect(argoOperationOf(bad)).toBeUndefined();
      expect(
        applicationOperationOf({ metadata: { name: "a" }, operation: { sync: { revision: 5 } } }),
      ).toEqual({
        sync: {},
        info: [],
      });
    });

    it("read the operation state each field on its own, the operation in it as `operation` is read", () => {
      const state = {
        phase: "Running",
        message: 5,
        startedAt: "t0",
        finishedAt: null,
        retryCount: "1",
        syncResult: { revision: "c1" },
        operation: { initiatedBy: { username: "applygate" } },
      };
      expect(operationStateOf({ status: { operationState: state } })).toEqual({
        phase: "Running",
        startedAt: "t0",
        syncResult: { revision: "c1" },
        operation: { initiatedBy: { username: "applygate" }, info: [] },
      });
      for (const status of [{ operationState: null }, { operationState: "Running" }, {}, "x", undefined])
        expect(operationStateOf({ status }), JSON.stringify(status)).toBeUndefined();
    });
  });

  it("read an Application's repository from its source, else the first of its sources", () => {
    const url = "https://git.example/org/site.git";
    expect(applicationRepoOf({ spec: { source: { repoURL: url } } })).toBe(url);
    expect(applicationRepoOf({ spec: { sources: [{ repoURL: url }, { repoURL: "other" }] } })).toBe(url);
    expect(applicationRepoOf({ spec: { source: "x", sources: [{ repoURL: url }] } })).toBe(url);
    // A source object is the one read, even when its repoURL does not fit.
    expect(
      applicationRepoOf({ spec: { source: { repoURL: 5 }, sources: [{ repoURL: url }] } }),
    ).toBeUndefined();
    for (const spec of [
      { source: { repoURL: "" } },
      { sources: "x" },
      { sources: [7, { repoURL: url }] },
      {},
      null,
    ])
      expect(applicationRepoOf({ spec }), JSON.stringify(spec)).toBeUndefined();
  });

  it("read an Application's destination field by field", () => {
    const destination = { namespace: "prod", server: "https://kubernetes.default.svc", name: "in-cluster" };
    expect(applicationDestinationOf({ spec: { destination } })).toEqual(destination);
    expect(
      applicationDestinationOf({ spec: { destination: { namespace: "prod", server: 1, name: "" } } }),
    ).toEqual({
      namespace: "prod",
    });
    expect(applicationDestinationOf({ spec: { destination: "prod" } })).toEqual({});
    expect(applicationDestinationOf(undefined)).toEqual({});
  });

  it("read a sync window's fields each on its own, a list for its strings", () => {
    const w = {
      kind: "deny",
      schedule: "",
      duration: "1h",
      manualSync: "yes",
      timeZone: 2,
      applications: ["a", 3, "b"],
    };
    expect(fieldOf(syncWindowFields, w, "kind")).toBe("deny");
    expect(fieldOf(syncWindowFields, w, "schedule")).toBe("");
    expect(fieldOf(syncWindowFields, w, "manualSync")).toBeUndefined();
    expect(fieldOf(syncWindowFields, w, "timeZone")).toBeUndefined();
    expect(stringsIn(fieldOf(syncWindowFields, w, "applications"))).toEqual(["a", "b"]);
    expect(stringsIn(fieldOf(syncWindowFields, { namespaces: "prod" }, "namespaces"))).toEqual([]);
  });

  it("read a Secret's data and stringData, absent when not a map of strings", () => {
    const secret = { data: { k: "YQ==" }, stringData: { k: 1 } };
    expect(fieldOf(secretFields, secret, "data")).toBe(secret.data);
    expect(fieldOf(secretFields, secret, "stringData")).toBeUndefined();
    expect(fieldOf(secretFields, { data: "YQ==" }, "data")).toBeUndefined();
  });
});

describe("isKObject", () => {
  it("takes a document with a name, and a kind, namespace and uid when they are strings", () => {
    expect(
      isKObject({ kind: "GitTarget", metadata: { name: "a", namespace: "team", uid: "u" }, spec: 1 }),
    ).toBe(true);
    expect(isKObject({ metadata: { name: "a" } })).toBe(true);
  });

  it("leaves out every other document", () => {
    for (const doc of [
      null,
      "x",
      [],
      {},
      { metadata: {} },
      { metadata: { name: 5 } },
      { metadata: "a" },
      { kind: 1, metadata: { name: "a" } },
      { metadata: { name: "a", namespace: 2 } },
      { metadata: { name: "a", uid: {} } },
    ])
      expect(isKObject(doc), JSON.stringify(doc)).toBe(false);
  });
});
