/**
 * The Flux applier's tests: the sidecar world (test/support/sidecar-world.ts) with Flux's CRDs
 * and fluxsim. Each test gets a scene: a namespace and repository of its own, with a
 * GitRepository, a Kustomization applied once by Flux, a FluxClaim naming it, and the GitProvider
 * and GitTarget an attempt stands on.
 */
import { randomBytes } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { Attempt, Report } from "../../queue/contract.js";
import {
  artifactRevisionOf,
  claimStatusOf,
  fluxStatusField,
  type KObject,
  type Kube,
  RESOURCES,
} from "../../queue/kube/index.js";
import { silentLogger } from "../../queue/log.js";
import type { ClaimContext, OperationExecutor, SafetyChecks } from "../../sidecar/applier-kind.js";
import { approvalRecheck } from "../../sidecar/approval-recheck.js";
import { isConditionTrue, setConditions } from "../../sidecar/claims/conditions.js";
import { type EventSpec, memoryEvents } from "../../sidecar/events.js";
import type { FluxKindOptions } from "../../sidecar/flux/index.js";
import * as flux from "../../sidecar/flux/index.js";
import { GIT_REPOSITORY, KUSTOMIZATION, REQUESTED_AT } from "../../sidecar/flux/resources.js";
import { Following } from "../../sidecar/following.js";
import { GitAncestry, remoteFromCluster } from "../../sidecar/git-ancestry.js";
import type { Sidecar, SidecarOptions } from "../../sidecar/main.js";
import { type Operation, operationOf } from "../../sidecar/operation-record.js";
import { memoryReporter } from "../../sidecar/reporter.js";
import { type FluxKnobs, type FluxSim, startFluxSim } from "../cluster/fluxsim/index.js";
import { GitPeer } from "../git/peer.js";
import { unrecordedChecks } from "../support/safety-checks.js";
import {
  attemptFor,
  configMapYaml,
  createProvider,
  createTarget,
  inControl,
  type Reported,
  recorder,
  type SidecarWorld,
  startSidecarWorld,
  until,
} from "../support/sidecar-world.js";

export { until };

const crd = (file: string) => fileURLToPath(new URL(`../cluster/crds/${file}`, import.meta.url));

export const configMap = (name: string, value: string) => configMapYaml(name, "v", value);

/** The Flux kind's settings in these tests: quick polls, requeues and window grace. */
export const FLUX_TEST_OPTIONS: FluxKindOptions = { pollMs: 50, shortRequeueMs: 20, windowGraceMs: 200 };

export interface World extends SidecarWorld {
  /** The executor's own clones (what an apply would bring, for a claim that requires approval). */
  clones: GitAncestry;
  sim: FluxSim;
  /** Stops fluxsim and starts a fresh one (to hold the controllers still for a moment). */
  restartSim(paused?: () => Promise<void>): Promise<void>;
  /** The real sidecar with the Flux kind (FLUX_TEST_OPTIONS unless `over.options` says otherwise). */
  startFluxSidecar(over?: Partial<SidecarOptions<"flux">>): Promise<Sidecar>;
}

export const DEFAULT_TEST_KNOBS: Partial<FluxKnobs> = { defaultIntervalScale: 0.001, perObjectApplyMs: 1 };

export async function startWorld(knobs: Partial<FluxKnobs> = DEFAULT_TEST_KNOBS): Promise<World> {
  const base = await startSidecarWorld({
    crds: [crd("flux-gitrepository.yaml"), crd("flux-kustomization.yaml")],
    label: "flux",
  });
  const cacheDir = await mkdtemp(join(tmpdir(), "flux-clones-"));
  const world: World = Object.assign(base, {
    clones: new GitAncestry({ cacheDir, remoteFor: remoteFromCluster(base.kube) }),
    sim: await startFluxSim({ kubeConfig: base.kc, knobs }),
    async restartSim(paused?: () => Promise<void>) {
      await world.sim.stop();
      await paused?.();
      world.sim = await startFluxSim({ kubeConfig: base.kc, knobs: world.sim.knobs });
    },
    startFluxSidecar: (over: Partial<SidecarOptions<"flux">> = {}) =>
      base.startSidecar({ applier: "flux", ...over, options: { ...FLUX_TEST_OPTIONS, ...over.options } }),
  });
  base.onStop(() => rm(cacheDir, { recursive: true, force: true }));
  base.onStop(() => world.sim.stop());
  return world;
}

let seq = 0;

type Ref = { namespace: string; name: string };

export interface Scene {
  ns: string;
  url: string;
  peer: GitPeer;
  claim: Ref;
  ks: Ref;
  source: Ref;
  kind: ReturnType<typeof flux.createApplierKind>;
  /** ClaimContext.follow: the kind's recovery, registered as followed, as the executor host runs it. */
  follow: ClaimContext["follow"];
  events: EventSpec[];
  reports: Report[];
  following: Following;
  readKs(name?: string): Promise<KObject>;
  readClaim(): Promise<KObject>;
  /** The claim's recorded operation. */
  operation(): Promise<Operation | undefined>;
  /** Puts `op` on the claim's status, as an earlier process (or another writer) left it. */
  recordOperation(op: Operation): Promise<void>;
  configValue(name?: string): Promise<string | undefined>;
  /** Commits files and pushes; returns the new commit. */
  push(files: Record<string, string>, message?: string): Promise<string>;
  /** Pushes a commit that sets app-config's value (apps/cm.yaml); returns it. */
  pushConfig(value: string): Promise<string>;
  /** Asks the GitRepository to fetch (as `flux reconcile source` does); with `commit`, waits until its artifact holds it. */
  fetch(label: string, commit?: string): Promise<void>;
  /** The GitRepository's last fetch request (its requestedAt annotation), the executor's or `fetch`'s. */
  fetchRequested(): Promise<string | undefined>;
  /** A merge patch of the Kustomization `apps` by `fieldManager` (`flux` for `flux resume`/`suspend`). */
  patchKs(patch: Record<string, unknown>, fieldManager: string): Promise<void>;
  /** Server-side applies `spec` on the Kustomization `apps` as `fieldManager`, taking what others own. */
  applyKs(spec: Record<string, unknown>, fieldManager: string): Promise<void>;
  /** A ClaimContext for calling the controller's hooks directly, as the reconciler does. */
  ctx(over?: Partial<ClaimContext>, claimName?: string): Promise<ClaimContext>;
  /** Drives the claim's hold until InControl=True, as the reconciler would (finalizer first). */
  adopt(claimName?: string): Promise<KObject>;
  /** Writes a hook result's conditions and status onto the claim, as the reconciler does. */
  writeResult(
    claimName: string,
    r: {
      conditions?: { type: string; status: "True" | "False" | "Unknown"; reason: string; message?: string }[];
      status?: Record<string, unknown>;
    },
  ): Promise<KObject>;
  attempt(commit: string, over?: Partial<Attempt>): Attempt;
  /**
   * Runs one attempt; returns the phases reported in order, the last (its reason and revision
   * mismatch) and every report. `on` is called as each phase is reported, before the executor goes on.
   */
  run(
    attempt: Attempt,
    signal?: AbortSignal,
    on?: (phase: string) => void,
  ): Promise<{
    phases: string[];
    last: { phase: string; reason?: string; revisionMismatch?: boolean };
    reports: Reported[];
  }>;
  /** Waits until the claim is in control as the sidecar's reconciler makes it. */
  inControl(): Promise<unknown>;
}

export interface SceneOptions {
  /** The client the Flux kind talks through (default the world's): a user of its own counts its requests. */
  executorKube?: Kube;
  /** Extra fields of the apps Kustomization's spec (e.g. a short retryInterval). */
  ksSpec?: Record<string, unknown>;
  options?: FluxKindOptions;
  /** Replaces a safety check (the tip is the Git server's head by default). */
  checks?: Partial<SafetyChecks>;
  /** Extra Kustomizations on the same GitRepository: name → folder. */
  extra?: Record<string, string>;
  suspendedBefore?: boolean;
  /** The apps folder holds this many ConfigMaps (cm-0 …) instead of the one app-config. */
  objects?: number;
}

/** What a scene needs of its world: any API server, the Git server and the executor's clones. */
export type SceneWorld = Pick<World, "kube" | "git" | "clones">;

export async function scene(world: SceneWorld, o: SceneOptions = {}): Promise<Scene> {
  const ns = `t${++seq}-${randomBytes(2).toString("hex")}`;
  const kube = world.kube;
  await kube.core.createNamespace({ body: { metadata: { name: ns } } });
  const files: Record<string, string> = o.objects
    ? Object.fromEntries(
        Array.from({ length: o.objects }, (_, i) => [`apps/cm-${i}.yaml`, configMap(`cm-${i}`, "1")]),
      )
    : { "apps/cm.yaml": configMap("app-config", "1") };
  for (const folder of Object.values(o.extra ?? {}))
    files[`${folder}/cm.yaml`] = configMap(`${folder}-config`, "1");
  const url = await world.git.createRepo(ns, files);
  const peer = await GitPeer.clone(url);
  await kube.custom.createNamespacedCustomObject({
    ...GIT_REPOSITORY,
    namespace: ns,
    body: {
      apiVersion: "source.toolkit.fluxcd.io/v1",
      kind: "GitRepository",
      metadata: { name: "repo", namespace: ns },
      spec: { interval: "100h", url, ref: { branch: "main" } },
    },
  });
  const ksBody = (name: string, path: string) => ({
    apiVersion: "kustomize.toolkit.fluxcd.io/v1",
    kind: "Kustomization",
    metadata: { name, namespace: ns },
    spec: {
      interval: "100h",
      prune: true,
      path: `./${path}`,
      targetNamespace: ns,
      sourceRef: { kind: "GitRepository", name: "repo" },
      ...(o.suspendedBefore && name === "apps" ? { suspend: true } : {}),
      ...(name === "apps" ? (o.ksSpec ?? {}) : {}),
    },
  });
  for (const [name, folder] of [["apps", "apps"] as const, ...Object.entries(o.extra ?? {})])
    await kube.custom.createNamespacedCustomObject({
      ...KUSTOMIZATION,
      namespace: ns,
      body: ksBody(name, folder),
    });
  const readKs = async (name = "apps") => (await kube.get(KUSTOMIZATION, ns, name))!;
  if (!o.suspendedBefore) {
    await until(async () => fluxStatusField(await readKs(), "lastAppliedRevision"), "the first apply");
  }
  for (const name of Object.keys(o.extra ?? {}))
    await until(
      async () => fluxStatusField(await readKs(name), "lastAppliedRevision"),
      `the first apply of ${name}`,
    );
  // Each claim (`claim` holding apps, `<name>-claim` each extra one), and a GitTarget naming it
  // in the repository's GitProvider: an attempt's targets must still stand at the write.
  const claims = [
    { claim: "claim", ks: "apps", target: "target" },
    ...Object.keys(o.extra ?? {}).map((n) => ({ claim: `${n}-claim`, ks: n, target: `${n}-target` })),
  ];
  for (const c of claims)
    await kube.custom.createNamespacedCustomObject({
      ...RESOURCES.fluxClaim,
      namespace: ns,
      body: {
        apiVersion: "applygate.dev/v1alpha1",
        kind: "FluxClaim",
        metadata: { name: c.claim, namespace: ns },
        spec: { kustomizationRef: { name: c.ks, namespace: ns } },
      },
    });
  await createProvider(kube, ns, url);
  const targetUids = new Map<string, string>();
  for (const c of claims)
    targetUids.set(
      c.claim,
      await createTarget(kube, {
        namespace: ns,
        name: c.target,
        path: c.target,
        claim: { kind: "FluxClaim", name: c.claim },
      }),
    );

  const events = memoryEvents();
  const reporter = memoryReporter();
  const following = new Following();
  const log = silentLogger();
  const now = () => new Date();
  const kind = flux.createApplierKind({
    kind: "flux",
    kube: o.executorKube ?? kube,
    log,
    events,
    following,
    reporter,
    now,
    // The tip is the branch's head on the Git server, as the worker would have recorded it.
    checks: unrecordedChecks(
      kube,
      { tip: async (a) => (await world.git.tip(ns)) === a.commit, ...o.checks },
      approvalRecheck({ kube, git: world.clones }),
    ),
    options: { ...FLUX_TEST_OPTIONS, ...o.options },
  });
  await kind.controller.start?.({ requeueApplier: () => {} });

  const readClaim = async (name = "claim") => (await kube.get<KObject>(RESOURCES.fluxClaim, ns, name))!;
  const writeResult: Scene["writeResult"] = async (name, r) => {
    const c = await readClaim(name);
    const conditions = claimStatusOf(c)?.conditions;
    return kube.patchStatus(
      RESOURCES.fluxClaim,
      ns,
      name,
      {
        ...(r.conditions ? { conditions: setConditions(conditions, r.conditions, new Date()) } : {}),
        ...(r.status ?? {}),
      },
      c.metadata.resourceVersion,
    );
  };
  const follow = followLikeHost(kind.executor, following);
  const ctx: Scene["ctx"] = async (over = {}, claimName = "claim") => {
    const op = operationOf(await readClaim(claimName));
    return {
      kube,
      log,
      events,
      following,
      now,
      follow,
      ...(op ? { operation: op } : {}),
      branchKey: `${url}@main`,
      ...over,
    };
  };
  const s: Scene = {
    ns,
    url,
    peer,
    claim: { namespace: ns, name: "claim" },
    ks: { namespace: ns, name: "apps" },
    source: { namespace: ns, name: "repo" },
    kind,
    follow,
    events: events.events,
    reports: reporter.reports,
    following,
    readKs,
    readClaim: () => readClaim(),
    operation: async () => operationOf(await readClaim()),
    async recordOperation(op) {
      const c = await readClaim();
      await kube.patchStatus(RESOURCES.fluxClaim, ns, "claim", { operation: op }, c.metadata.resourceVersion);
    },
    async configValue(name = "app-config") {
      try {
        const cm = await kube.core.readNamespacedConfigMap({ namespace: ns, name });
        return cm.data?.v;
      } catch {
        return undefined;
      }
    },
    async push(changes, message = "change") {
      for (const [path, content] of Object.entries(changes)) await peer.writeFile(path, content);
      await peer.commit(message);
      const out = await peer.push();
      if (!out.ok) throw new Error(out.stderr);
      return (await world.git.tip(ns))!;
    },
    pushConfig: (value) => s.push({ "apps/cm.yaml": configMap("app-config", value) }),
    async fetch(label, commit) {
      await kube.mergePatch(GIT_REPOSITORY, ns, "repo", {
        metadata: { annotations: { [REQUESTED_AT]: label } },
      });
      if (commit)
        await until(async () => {
          const src = await kube.get(GIT_REPOSITORY, ns, "repo");
          return artifactRevisionOf(src) === `main@sha1:${commit}`;
        }, `the source to fetch ${commit}`);
    },
    async fetchRequested() {
      return (await kube.get(GIT_REPOSITORY, ns, "repo"))?.metadata.annotations?.[REQUESTED_AT];
    },
    async patchKs(patch, fieldManager) {
      await kube.mergePatch(KUSTOMIZATION, ns, "apps", patch, { fieldManager });
    },
    async applyKs(spec, fieldManager) {
      await kube.apply(
        KUSTOMIZATION,
        {
          apiVersion: "kustomize.toolkit.fluxcd.io/v1",
          kind: "Kustomization",
          metadata: { name: "apps", namespace: ns },
          spec,
        },
        { fieldManager, force: true },
      );
    },
    ctx,
    writeResult,
    async adopt(name = "claim") {
      const c0 = await readClaim(name);
      await kube.setFinalizer(RESOURCES.fluxClaim, c0, "applygate.dev/flux-claim", true);
      return until(async () => {
        const c = await readClaim(name);
        const applier = kind.controller.applierOf(c);
        const r = await kind.controller.hold(c, applier, await ctx({}, name));
        const written = await writeResult(name, r);
        return isConditionTrue(claimStatusOf(written)?.conditions, "InControl") && written;
      }, "adoption");
    },
    attempt(commit, over = {}) {
      const claimName = over.claim?.name ?? "claim";
      const targetName = claims.find((c) => c.claim === claimName)?.target ?? "target";
      return {
        ...attemptFor({
          claim: { kind: "FluxClaim", namespace: ns, name: "claim" },
          applier: { kind: "flux", namespace: ns, name: "apps" },
          branchKey: `${url}@main`,
          repository: url,
          commit,
          targets: [
            {
              uid: targetUids.get(claimName) ?? "",
              namespace: ns,
              name: targetName,
              reason: "ForeignCommit",
            },
          ],
        }),
        ...over,
      };
    },
    async run(attempt, signal = new AbortController().signal, on = () => {}) {
      const r = recorder();
      await kind.executor.execute(
        attempt,
        async (phase, extra) => {
          await r.report(phase, extra);
          on(phase);
        },
        signal,
      );
      const last = r.reports.at(-1);
      return {
        phases: r.phases(),
        last: last
          ? {
              phase: last.phase,
              ...(last.extra.reason ? { reason: last.extra.reason } : {}),
              ...(last.extra.revisionMismatch !== undefined
                ? { revisionMismatch: last.extra.revisionMismatch }
                : {}),
            }
          : { phase: "none" },
        reports: r.reports,
      };
    },
    inControl: () => inControl(kube, RESOURCES.fluxClaim, { namespace: ns, name: "claim" }),
  };
  return s;
}

/** A scene whose claim holds its Kustomization already (adopted). */
export async function adopted(world: SceneWorld, o: SceneOptions = {}): Promise<Scene> {
  const s = await scene(world, o);
  await s.adopt();
  return s;
}

/**
 * What the executor host does for ClaimContext.follow, without its queue: the kind's recovery of
 * the operation, registered as followed while it runs (refused when followed already).
 */
export function followLikeHost(executor: OperationExecutor, following: Following): ClaimContext["follow"] {
  return (r) => {
    let unfollow: () => void;
    try {
      unfollow = following.follow(r.operation.token, `${r.claim.namespace}/${r.claim.name}`);
    } catch {
      return false;
    }
    void executor
      .recover?.(r, async () => {}, new AbortController().signal)
      .catch(() => {})
      .finally(() => unfollow());
    return true;
  };
}
