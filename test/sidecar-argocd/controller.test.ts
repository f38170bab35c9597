/**
 * The ArgoCDClaim controller against argosim: holding automated sync off (and what that means to
 * Argo CD), switching it off again, each Configured reason, hand-back as it stood before, and the
 * window observer reporting Argo CD's own writes.
 */
import { describe, expect, it } from "vitest";
import type { KObject } from "../../queue/kube/index.js";
import { applicationAutomatedOf, RESOURCES } from "../../queue/kube/index.js";
import type { ClaimContext } from "../../sidecar/applier-kind.js";
import { APPLICATION, isAutomatedSyncEnabled, weHoldSwitch } from "../../sidecar/argocd/application.js";
import { ArgoCDClaimController } from "../../sidecar/argocd/controller.js";
import { ArgoCDWindowObserver } from "../../sidecar/argocd/observer.js";
import { memoryEvents } from "../../sidecar/events.js";
import { Following } from "../../sidecar/following.js";
import { memoryReporter } from "../../sidecar/reporter.js";
import { fileWorld } from "../support/file-world.js";
import { type Repo, startCluster, until } from "./harness.js";

let repo: Repo;
let n = 0;
let controller: ArgoCDClaimController;

const c = fileWorld(async () => {
  const c = await startCluster({ argo: {} });
  repo = await c.repo();
  controller = new ArgoCDClaimController({ kube: c.kube, log: c.log, watch: false });
  return c;
});

const ctx = (events = memoryEvents()): ClaimContext & { events: ReturnType<typeof memoryEvents> } => ({
  kube: c.kube,
  log: c.log,
  events,
  following: new Following(),
  now: c.now,
  // Argo CD records no operation of its own to follow.
  follow: () => false,
});

async function setup(spec: Record<string, unknown>, meta: Record<string, unknown> = {}) {
  const name = `app${++n}`;
  const ns = await c.namespace(`ctl-${name}`);
  await c.createApp(
    name,
    repo,
    { destination: { server: "https://kubernetes.default.svc", namespace: ns }, ...spec },
    meta,
  );
  await c.createClaim(name, name);
  const ref = { namespace: "argocd", name };
  return { name, ns, ref };
}
const claimOf = async (name: string) => (await c.kube.get<KObject>(RESOURCES.argoCDClaim, "argocd", name))!;
/** The reconciler's part: merge the hook's status into the claim. */
async function writeStatus(name: string, status: Record<string, unknown> | undefined) {
  if (!status) return;
  const claim = await claimOf(name);
  await c.kube.patchStatus(RESOURCES.argoCDClaim, "argocd", name, status, claim.metadata.resourceVersion);
}
async function hold(name: string, ref: { namespace: string; name: string }, events = memoryEvents()) {
  const r = await controller.hold(await claimOf(name), ref, ctx(events));
  await writeStatus(name, r.status);
  return r;
}
async function handBack(name: string, ref: { namespace: string; name: string }) {
  const r = await controller.handBack(await claimOf(name), ref, ctx());
  await writeStatus(name, r.status);
  return r;
}
const automated = async (name: string) => applicationAutomatedOf(await c.getApp(name));
/** Somebody sets the Application's automated block by hand, as `fieldManager`. */
const editAutomated = (name: string, block: Record<string, unknown>, fieldManager: string) =>
  c.kube.mergePatch(
    APPLICATION,
    "argocd",
    name,
    { spec: { syncPolicy: { automated: block } } },
    { fieldManager },
  );

describe("holding automated sync off", () => {
  it("adopts: owns enabled: false, keeps prune, records how it stood; Argo CD then only compares", async () => {
    const { name, ref } = await setup({ syncPolicy: { automated: { prune: true } } });
    // automated sync on: Argo CD syncs by itself (IsAutomatedSyncEnabled with enabled unset)
    await until(async () => c.argo!.syncs(ref).length === 1, "Argo CD's own automated sync");
    expect(await controller.checkExternal(await claimOf(name), ref, ctx())).toEqual({ configured: true });
    const events = memoryEvents();
    const r = await hold(name, ref, events);
    expect(r.conditions).toContainEqual(
      expect.objectContaining({ type: "InControl", status: "True", reason: "AutomatedSyncOff" }),
    );
    expect(await automated(name)).toEqual({ prune: true, enabled: false });
    const app = await c.getApp(name);
    expect(weHoldSwitch(app)).toBe(true);
    expect((await claimOf(name)).status).toMatchObject({ previousSuspendState: "AutomatedOn" });
    expect(events.events.map((e) => [e.reason, e.action])).toEqual([["Adopted", "HoldAutomatedSyncOff"]]);
    // a push and a refresh: Argo CD compares, and starts no sync of its own
    await repo.settings(`held-${name}`);
    await c.kube.mergePatch(APPLICATION, "argocd", name, {
      metadata: { annotations: { "argocd.argoproj.io/refresh": "normal" } },
    });
    await until(
      async () => !(await c.getApp(name)).metadata.annotations?.["argocd.argoproj.io/refresh"],
      "refreshed",
    );
    await c.argo!.idle();
    expect(c.argo!.syncs(ref)).toHaveLength(1);
    expect((await c.getApp(name)).status).toMatchObject({ sync: { status: "OutOfSync" } });
    // held: another pass writes nothing
    const rv = (await c.getApp(name)).metadata.resourceVersion;
    await hold(name, ref);
    expect((await c.getApp(name)).metadata.resourceVersion).toBe(rv);
  });

  it("switches it off again when somebody switches it on (ClaimedResourceReconciled)", async () => {
    const { name, ref } = await setup({ syncPolicy: { automated: { prune: true } } });
    await hold(name, ref);
    await editAutomated(name, { enabled: true }, "kubectl-patch");
    const events = memoryEvents();
    await hold(name, ref, events);
    expect(await automated(name)).toEqual({ prune: true, enabled: false });
    expect(events.events.map((e) => e.reason)).toEqual(["ClaimedResourceReconciled"]);
    expect((await claimOf(name)).status).toMatchObject({ previousSuspendState: "AutomatedOn" });
  });
});

describe("Configured reasons", () => {
  const check = async (name: string, ref: { namespace: string; name: string }) =>
    controller.checkExternal(await claimOf(name), ref, ctx());

  it("OwnedByApplicationSet while its template keeps automated sync on; fine when the template keeps it off", async () => {
    const set = (name: string, automatedBlock: Record<string, unknown>) =>
      c.kube.apply(
        { group: "argoproj.io", version: "v1alpha1", plural: "applicationsets", kind: "ApplicationSet" },
        {
          apiVersion: "argoproj.io/v1alpha1",
          kind: "ApplicationSet",
          metadata: { name, namespace: "argocd" },
          spec: {
            generators: [{ list: { elements: [{ name: `${name}-app` }] } }],
            template: {
              metadata: { name: "{{name}}" },
              spec: {
                project: "default",
                destination: { server: "https://kubernetes.default.svc", namespace: "web" },
                source: { repoURL: repo.url, path: "deploy", targetRevision: "main" },
                syncPolicy: { automated: automatedBlock },
              },
            },
          },
        },
        { fieldManager: "argocd-cli" },
      );
    await set("on", { prune: true });
    await set("off", { enabled: false, prune: true });
    for (const app of ["on-app", "off-app"]) {
      await until(() => c.kube.get(APPLICATION, "argocd", app), app);
      await c.createClaim(app, app);
    }
    expect(await check("on-app", { namespace: "argocd", name: "on-app" })).toMatchObject({
      configured: false,
      reason: "OwnedByApplicationSet",
    });
    expect(await check("off-app", { namespace: "argocd", name: "off-app" })).toEqual({ configured: true });
    // held, then handed back: the template's off stays off although its update took no share of it
    await hold("off-app", { namespace: "argocd", name: "off-app" });
    await handBack("off-app", { namespace: "argocd", name: "off-app" });
    expect(isAutomatedSyncEnabled(await automated("off-app"))).toBe(false);
  });

  it("AutomatedSyncOwnedElsewhere when another manager applies the switch on; nothing written", async () => {
    const name = `app${++n}`;
    await c.kube.apply(
      APPLICATION,
      {
        apiVersion: "argoproj.io/v1alpha1",
        kind: "Application",
        metadata: { name, namespace: "argocd" },
        spec: {
          project: "default",
          destination: { server: "https://kubernetes.default.svc", namespace: "web" },
          source: { repoURL: repo.url, path: "deploy", targetRevision: "main" },
          syncPolicy: { automated: { enabled: true } },
        },
      },
      { fieldManager: "platform-gitops" },
    );
    await c.createClaim(name, name);
    const verdict = await check(name, { namespace: "argocd", name });
    expect(verdict).toMatchObject({ configured: false, reason: "AutomatedSyncOwnedElsewhere" });
    expect((verdict as { message: string }).message).toContain("platform-gitops");
    expect(weHoldSwitch(await c.getApp(name))).toBe(false);
  });

  it("UnsupportedSource for a multi-source Application", async () => {
    const { name, ref } = await setup({
      source: undefined,
      sources: [
        { repoURL: repo.url, path: "deploy", targetRevision: "main" },
        { repoURL: repo.url, path: "other", targetRevision: "main" },
      ],
    });
    expect(await check(name, ref)).toMatchObject({ configured: false, reason: "UnsupportedSource" });
    expect(await controller.source(await claimOf(name), ref)).toMatchObject({ state: "Unsupported" });
  });

  it("ArgoCDVersionNotSupported before 3.1, told by a server-side dry run, before any write", async () => {
    const old = await startCluster({ argoVersion: "pre-3.1" });
    try {
      const r = await old.repo();
      await old.createApp("legacy", r, { syncPolicy: { automated: { prune: true } } });
      await old.createClaim("legacy", "legacy");
      const ctl = new ArgoCDClaimController({ kube: old.kube, log: old.log, watch: false });
      const claim = (await old.kube.get<KObject>(RESOURCES.argoCDClaim, "argocd", "legacy"))!;
      const before = await old.getApp("legacy");
      expect(await ctl.checkExternal(claim, { namespace: "argocd", name: "legacy" }, ctx())).toMatchObject({
        configured: false,
        reason: "ArgoCDVersionNotSupported",
      });
      const after = await old.getApp("legacy");
      expect(after.metadata.resourceVersion).toBe(before.metadata.resourceVersion);
      expect(weHoldSwitch(after)).toBe(false);
    } finally {
      await old.stop();
    }
  });
});

describe("hand-back", () => {
  it("gives the switch up: automated sync as it stood (AutomatedOn), and Argo CD syncs on its own again", async () => {
    const { name, ref } = await setup({ syncPolicy: { automated: { prune: true } } });
    await until(async () => c.argo!.syncs(ref).length === 1, "first automated sync");
    await hold(name, ref);
    const r = await handBack(name, ref);
    expect(r.done).toBe(true);
    expect(await automated(name)).toEqual({ prune: true });
    expect(weHoldSwitch(await c.getApp(name))).toBe(false);
    expect((await claimOf(name)).status).not.toHaveProperty("previousSuspendState");
    // Argo CD's automated sync is back: a push is synced without us
    await repo.settings(`back-${name}`);
    await c.kube.mergePatch(APPLICATION, "argocd", name, {
      metadata: { annotations: { "argocd.argoproj.io/refresh": "normal" } },
    });
    await until(async () => c.argo!.syncs(ref).length === 2, "automated sync after hand-back");
  });

  it("leaves no automated block when there was none (NoAutomated)", async () => {
    const { name, ref } = await setup({});
    await hold(name, ref);
    expect(await automated(name)).toEqual({ enabled: false });
    expect((await claimOf(name)).status).toMatchObject({ previousSuspendState: "NoAutomated" });
    await handBack(name, ref);
    expect(await automated(name)).toBeUndefined();
  });

  it("sets the value it stood at when letting go would leave it otherwise, and keeps it", async () => {
    const { name, ref } = await setup({});
    await hold(name, ref);
    // meanwhile somebody adds prune (an Update): letting go would leave automated sync on
    await editAutomated(name, { prune: true }, "kubectl-edit");
    await handBack(name, ref);
    expect(await automated(name)).toEqual({ prune: true, enabled: false });
  });

  it("leaves automated sync off for a successor claim", async () => {
    const { name, ref } = await setup({ syncPolicy: { automated: { prune: true } } });
    await hold(name, ref);
    const r = await controller.handBack(await claimOf(name), ref, { ...ctx(), successor: "argocd/next" });
    expect(r).toMatchObject({ done: true, conditions: [expect.objectContaining({ reason: "HandedOver" })] });
    expect(await automated(name)).toEqual({ prune: true, enabled: false });
  });
});

describe("the window observer", () => {
  /** A window observer of ConfigMaps, started, reporting to `reporter`. */
  const startObserver = (reporter: ReturnType<typeof memoryReporter>) =>
    c.startObserver(ArgoCDWindowObserver, reporter);

  it("reports Argo CD's own writes to objects carrying the Application's tracking annotation", async () => {
    const { name, ns } = await setup({ syncPolicy: { automated: { enabled: false } } });
    await c.markHeld(name);
    const reporter = memoryReporter();
    const observer = await startObserver(reporter);
    try {
      const [tip] = await repo.settings(`observed-${name}`);
      const token = `t-${name}`;
      const r = await c.run(c.executor({ pollMs: 20 }, { windows: observer }), c.attempt(name, tip));
      expect(r.phases().at(-1)).toBe("Succeeded");
      const write = await until(
        async () => reporter.reports.find((x) => x.type === "applierWrite" && x.object.namespace === ns),
        "the applier write reported",
      );
      expect(write).toMatchObject({
        type: "applierWrite",
        token,
        claim: { kind: "ArgoCDClaim", namespace: "argocd", name },
        object: { apiVersion: "v1", kind: "ConfigMap", namespace: ns, name: "settings" },
        manager: "argocd-controller",
      });
      // an edit by somebody else to that object is no applier write
      const before = reporter.reports.length;
      await c.editConfigMap(ns, "settings", { value: "edited" });
      // An absence, so it is waited out: the observer would report the edit within this.
      await new Promise((res) => setTimeout(res, 300));
      expect(reporter.reports.slice(before).filter((x) => x.type === "applierWrite")).toEqual([]);
    } finally {
      await observer.stop();
    }
  });

  it("a window opened again by a new process reports Argo CD's write made while nobody watched, and no older one (soak seed 152052)", async () => {
    const { name, ns } = await setup({ syncPolicy: { automated: { enabled: false } } });
    await c.markHeld(name);
    // The sync runs with no window observer at all: the process that would have watched is gone.
    const startedAt = new Date().toISOString();
    const [tip] = await repo.settings(`unwatched-${name}`);
    const r = await c.run(c.executor({ pollMs: 20 }), c.attempt(name, tip));
    expect(r.phases().at(-1)).toBe("Succeeded");

    const reporter = memoryReporter();
    const observer = await startObserver(reporter);
    const window = (token: string, missedSince: string) =>
      observer.open({
        token,
        claim: { kind: "ArgoCDClaim", namespace: "argocd", name },
        branchKey: "git/r@main",
        applier: { namespace: "argocd", name },
        missedSince,
      });
    const reported = (token: string) =>
      reporter.reports.filter((x) => x.type === "applierWrite" && x.token === token);
    try {
      // An operation that started after the write: the write is older, never its apply.
      window(`later-${name}`, new Date(Date.now() + 5_000).toISOString());
      // Opened again for the operation that ran while nobody watched: its write, as listed.
      window(`again-${name}`, startedAt);
      const write = await until(async () => reported(`again-${name}`)[0], "the unwatched write reported");
      expect(write).toMatchObject({
        claim: { kind: "ArgoCDClaim", namespace: "argocd", name },
        object: { apiVersion: "v1", kind: "ConfigMap", namespace: ns, name: "settings" },
        manager: "argocd-controller",
      });
      expect(reported(`later-${name}`)).toEqual([]);
    } finally {
      await observer.stop();
    }
  });
});
