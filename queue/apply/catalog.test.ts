import { describe, expect, it } from "vitest";
import { initialState, step } from "../decide/index.js";
import type { KObject } from "../kube/resources.js";
import { listBranch, MemoryObjects } from "./catalog.js";

const target = (
  name: string,
  claim?: { kind: string; name: string },
  extra: Partial<KObject> = {},
): KObject => ({
  kind: "GitTarget",
  metadata: { name, namespace: "team", uid: `uid-${name}` },
  spec: { path: name, branch: "main", ...(claim ? { claimRef: claim } : {}), onRefusal: "Reapply" },
  ...extra,
});

const argoGrant: KObject = {
  kind: "ApplierGrant",
  metadata: { name: "team", namespace: "argocd" },
  spec: { from: [{ namespace: "team", kind: "ArgoCDClaim" }], to: [{ name: "web" }] },
};

function objects(grant = true): MemoryObjects {
  return new MemoryObjects([
    ...(grant ? [argoGrant] : []),
    target("a", { kind: "FluxClaim", name: "fc" }, { status: { publication: { commit: "c1" } } }),
    target("b", { kind: "ArgoCDClaim", name: "ac" }),
    target("c"),
    {
      kind: "FluxClaim",
      metadata: { name: "fc", namespace: "team" },
      spec: { kustomizationRef: { name: "apps" } },
    },
    {
      kind: "ArgoCDClaim",
      metadata: { name: "ac", namespace: "team" },
      spec: { applicationRef: { name: "web", namespace: "argocd" } },
      status: {
        repairPending: true,
        lastAppliedCommit: "c0",
        operation: {
          token: "t-1",
          phase: "Running",
          commit: "c1",
          targets: [{ uid: "uid-b", reason: "Repair" }],
        },
      },
    },
    {
      kind: "Kustomization",
      metadata: { name: "apps", namespace: "team" },
      spec: { sourceRef: { kind: "GitRepository", name: "repo", namespace: "flux-system" } },
    },
    {
      kind: "Application",
      metadata: { name: "web", namespace: "argocd" },
      spec: { source: { repoURL: "https://Git.example.com/org/site.git" } },
    },
  ]);
}

describe("catalog: GitTargets, claims, appliers and sources of a branch", () => {
  it("maps each GitTarget to its claim's applier and the source that applier reads", async () => {
    const l = await listBranch(objects(), [
      { namespace: "team", name: "a" },
      { namespace: "team", name: "b" },
      { namespace: "team", name: "c" },
      { namespace: "team", name: "gone" },
    ]);
    expect(l.targets.map((t) => [t.uid, t.claim?.name ?? null, t.applier?.kind ?? null, t.source])).toEqual([
      ["uid-a", "fc", "flux", "flux/GitRepository/flux-system/repo"],
      ["uid-b", "ac", "argocd", "argocd/git.example.com/org/site"],
      ["uid-c", null, null, null],
    ]);
    expect(l.targets[0]?.onRefusal).toBe("Reapply");
  });

  it("an applier in another namespace is held only through an ApplierGrant there", async () => {
    const names = [{ namespace: "team", name: "b" }];
    const refused = await listBranch(objects(false), names);
    expect(refused.targets.map((t) => [t.uid, t.claim, t.applier])).toEqual([["uid-b", null, null]]);
    expect(refused.claims).toEqual([]);
    const granted = await listBranch(objects(true), names);
    expect(granted.targets[0]?.applier).toEqual({ kind: "argocd", namespace: "argocd", name: "web" });
  });

  it("a GitTarget naming a claim in another namespace needs the claim's spec.accessFrom", async () => {
    const o = objects();
    o.objects.push({
      kind: "GitTarget",
      metadata: { name: "x", namespace: "other", uid: "uid-x" },
      spec: { path: "x", branch: "main", claimRef: { kind: "FluxClaim", name: "fc", namespace: "team" } },
    });
    const names = [{ namespace: "other", name: "x" }];
    expect((await listBranch(o, names)).targets[0]?.claim).toBeNull();
    const fc = o.objects.find((x) => x.kind === "FluxClaim")!;
    fc.spec = { ...(fc.spec as Record<string, unknown>), accessFrom: { namespaces: ["other"] } };
    expect((await listBranch(o, names)).targets[0]?.claim).toEqual({
      kind: "FluxClaim",
      namespace: "team",
      name: "fc",
    });
  });

  it("reads operation, repairPending and the last applied commit from the claims' status", async () => {
    const l = await listBranch(objects(), [{ namespace: "team", name: "b" }]);
    expect(l.claims).toEqual([
      {
        claim: { kind: "ArgoCDClaim", namespace: "team", name: "ac" },
        applier: { kind: "argocd", namespace: "argocd", name: "web" },
        source: "argocd/git.example.com/org/site",
        lastAppliedCommit: "c0",
        repairPending: true,
        operation: {
          token: "t-1",
          phase: "Running",
          commit: "c1",
          targets: [{ uid: "uid-b", reason: "Repair" }],
        },
      },
    ]);
  });

  it("a restart keeps out an operation the claim recorded, with the saved reasons it carried not given back", async () => {
    const mem = objects();
    const names = [{ namespace: "team", name: "a" }];
    const l0 = await listBranch(mem, names);
    const branch = { key: "k", repository: "r", branch: "main" };
    let s = step(
      initialState(branch, "p"),
      { type: "Restarted", tokenPrefix: "p", claims: l0.claims },
      0,
    ).state;
    s = step(s, { type: "TargetsListed", targets: l0.targets }, 0).state;
    // The baseline leaves a converge pending: the flush, then one attempt (its folder is in c1).
    const baseline = step(s, { type: "Observed", tip: "c1", pushedByUs: false, folders: ["uid-a"] }, 1);
    const flush = baseline.actions.find((a) => a.type === "Flush");
    expect(flush).toBeDefined();
    const r = step(
      baseline.state,
      {
        type: "Published",
        upToMark: null,
        tip: "c1",
        flush: flush?.type === "Flush" ? flush.flush : 0,
        folders: ["uid-a"],
      },
      2,
    );
    const attempt = r.actions.find((a) => a.type === "SendAttempt");
    expect(attempt?.type === "SendAttempt" && attempt.attempt.targets[0]?.reason).toBe("CatchUp");
    const token = attempt?.type === "SendAttempt" ? attempt.attempt.token : "";
    // The executor records it on the claim; then the worker restarts with the saved state.
    await mem.patchClaimStatus({ kind: "FluxClaim", namespace: "team", name: "fc" }, () => ({
      operation: {
        token,
        phase: "Running",
        commit: "c2",
        targets: [{ uid: "uid-a", reason: "ForeignCommit" }],
      },
    }));
    const l1 = await listBranch(mem, names);
    const restarted = step(
      r.state,
      { type: "Restarted", tokenPrefix: "q", claims: l1.claims, saved: r.state },
      3,
    ).state;
    const a = restarted.appliers["FluxClaim/team/fc"];
    expect(a?.operation?.token).toBe(token);
    expect(a?.pending.all).toEqual([]);
    expect(Object.values(a?.pending.byTarget ?? {}).flat()).toEqual([]);
  });
});

describe("listBranch: fields a tenant wrote ill-typed", () => {
  it("read as absent, and hide none of the object's other fields", async () => {
    const o = objects();
    const t = o.objects.find((x) => x.metadata.name === "a")!;
    t.spec = { ...(t.spec as Record<string, unknown>), suspend: "yes", onRefusal: 5, path: ["a"] };
    const fc = o.objects.find((x) => x.kind === "FluxClaim")!;
    fc.status = {
      lastAppliedCommit: 7,
      repairPending: "true",
      operation: { token: "t", phase: 2, commit: "c" },
    };
    const ks = o.objects.find((x) => x.kind === "Kustomization")!;
    ks.spec = { sourceRef: { name: 5 } };
    const l = await listBranch(o, [{ namespace: "team", name: "a" }]);
    expect(l.targets).toEqual([
      {
        uid: "uid-a",
        namespace: "team",
        name: "a",
        claim: { kind: "FluxClaim", namespace: "team", name: "fc" },
        applier: { kind: "flux", namespace: "team", name: "apps" },
        source: "claim/FluxClaim/team/fc",
        onRefusal: "Ignore",
        suspended: false,
      },
    ]);
    expect(l.claims).toEqual([
      {
        claim: { kind: "FluxClaim", namespace: "team", name: "fc" },
        applier: { kind: "flux", namespace: "team", name: "apps" },
        source: "claim/FluxClaim/team/fc",
      },
    ]);
  });
});

describe("listBranch: a GitTarget naming a WebhookClaim", () => {
  it("applies through the claim's own endpoint: the applier is the claim, the source the claim", async () => {
    const listing = await listBranch(
      new MemoryObjects([
        target("w", { kind: "WebhookClaim", name: "deployer" }),
        {
          kind: "WebhookClaim",
          metadata: { name: "deployer", namespace: "team" },
          spec: { url: "https://deploy.example/hook", secretRef: { name: "k" }, fieldManagers: ["deployer"] },
          status: { lastAppliedCommit: "c0" },
        },
      ]),
      [{ namespace: "team", name: "w" }],
    );
    expect(listing.targets[0]).toMatchObject({
      claim: { kind: "WebhookClaim", namespace: "team", name: "deployer" },
      applier: { kind: "webhook", namespace: "team", name: "deployer", fieldManagers: ["deployer"] },
      source: "claim/WebhookClaim/team/deployer",
    });
    expect(listing.claims[0]).toMatchObject({ lastAppliedCommit: "c0" });
  });
});

describe("catalog: the sync windows of an Argo CD Application's AppProject", () => {
  const project = (name: string, namespace: string, syncWindows: unknown[]): KObject => ({
    kind: "AppProject",
    metadata: { name, namespace },
    spec: { syncWindows },
  });
  const withApp = (spec: Record<string, unknown>, ...more: KObject[]) => {
    const o = objects();
    const app = o.objects.find((x) => x.kind === "Application")!;
    app.spec = { ...(app.spec as Record<string, unknown>), ...spec };
    o.objects.push(...more);
    return o;
  };
  const names = [{ namespace: "team", name: "b" }];
  const freeze = { kind: "deny", schedule: "0 18 * * *", duration: "1h", timeZone: "Europe/Berlin" };

  it("lists the windows of the Application's project that belong to it, and only those", async () => {
    const o = withApp(
      { project: "shop", destination: { namespace: "prod", server: "https://kubernetes.default.svc" } },
      project("shop", "argocd", [
        { ...freeze, applications: ["w*"], manualSync: true },
        { ...freeze, namespaces: ["dev"] },
        { kind: "allow", schedule: "0 9 * * 1-5", duration: "8h", clusters: ["https://kubernetes.*"] },
      ]),
      project("default", "argocd", [{ ...freeze, applications: ["*"] }]),
    );
    const l = await listBranch(o, names);
    expect(l.targets[0]?.governance?.syncWindows).toEqual([
      { ...freeze, applications: ["w*"], manualSync: true },
      { kind: "allow", schedule: "0 9 * * 1-5", duration: "8h", clusters: ["https://kubernetes.*"] },
    ]);
    // No claim governance of its own: only the sync windows.
    expect(l.targets[0]?.governance?.changeWindows).toEqual([]);
  });

  it("no project named reads the default project, in Argo CD's namespace (configurable)", async () => {
    const o = withApp(
      { destination: { namespace: "prod" } },
      project("default", "argocd", [{ ...freeze, applications: ["web"] }]),
      project("default", "gitops", [{ ...freeze, applications: ["web"], duration: "2h" }]),
    );
    expect((await listBranch(o, names)).targets[0]?.governance?.syncWindows?.[0]?.duration).toBe("1h");
    const other = await listBranch(o, names, { argocdNamespace: "gitops" });
    expect(other.targets[0]?.governance?.syncWindows?.[0]?.duration).toBe("2h");
  });

  it("a project with no window of the Application, or none at all, or one that cannot be read, governs nothing", async () => {
    const none = withApp(
      { project: "shop" },
      project("shop", "argocd", [{ ...freeze, applications: ["api"] }]),
    );
    expect((await listBranch(none, names)).targets[0]?.governance).toBeUndefined();
    const missing = withApp({ project: "gone" });
    expect((await listBranch(missing, names)).targets[0]?.governance).toBeUndefined();
    const failing = withApp({ project: "shop" });
    const get = failing.get.bind(failing);
    failing.get = async (kind, ns, name) => {
      if (kind === "AppProject") throw new Error("appprojects.argoproj.io is forbidden");
      return get(kind, ns, name);
    };
    const l = await listBranch(failing, names);
    expect(l.targets[0]?.applier?.kind).toBe("argocd");
    expect(l.targets[0]?.governance).toBeUndefined();
  });
});
