/**
 * A simulated cluster for the Flux applier: the API server over HTTP with our CRDs and Flux's,
 * fluxsim, and a real Git server. Each test gets a namespace and repository of its own, with a
 * GitRepository, a Kustomization applied once by Flux, and a FluxClaim naming it.
 */
import { randomBytes } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { Attempt, Report } from "../../queue/contract.js";
import { crdFiles } from "../../queue/crds/files.js";
import { type KObject, Kube, RESOURCES } from "../../queue/kube/index.js";
import { silentLogger } from "../../queue/log.js";
import type { ClaimContext, OperationExecutor, ReportFn, SafetyChecks } from "../../sidecar/applier-kind.js";
import { approvalRecheck } from "../../sidecar/approval-recheck.js";
import { setConditions } from "../../sidecar/claims/conditions.js";
import { type EventSpec, memoryEvents } from "../../sidecar/events.js";
import type { FluxKindOptions } from "../../sidecar/flux/index.js";
import { createApplierKind } from "../../sidecar/flux/index.js";
import { GIT_REPOSITORY, KUSTOMIZATION, type Kustomization } from "../../sidecar/flux/resources.js";
import { Following } from "../../sidecar/following.js";
import { GitAncestry, remoteFromCluster } from "../../sidecar/git-ancestry.js";
import { memoryReporter } from "../../sidecar/reporter.js";
import { type ApiServer, startApiServer } from "../cluster/apiserver/index.js";
import { type FluxKnobs, type FluxSim, startFluxSim } from "../cluster/fluxsim/index.js";
import { GitPeer } from "../git/peer.js";
import { type GitServer, startGitServer } from "../git/server.js";
import { unrecordedChecks } from "../support/safety-checks.js";
import { untilWith } from "../support/wait.js";

const crd = (file: string) => fileURLToPath(new URL(`../cluster/crds/${file}`, import.meta.url));

export const configMap = (name: string, value: string) =>
  `apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ${name}\ndata:\n  v: "${value}"\n`;

export const until = untilWith({ timeoutMs: 30_000, everyMs: 20 });

export interface World {
  api: ApiServer;
  git: GitServer;
  /** The executor's own clones (what an apply would bring, for a claim that requires approval). */
  clones: GitAncestry;
  sim: FluxSim;
  kube: Kube;
  /** Stops fluxsim and starts a fresh one (to hold the controllers still for a moment). */
  restartSim(paused?: () => Promise<void>): Promise<void>;
  stop(): Promise<void>;
}

export const DEFAULT_TEST_KNOBS: Partial<FluxKnobs> = { defaultIntervalScale: 0.001, perObjectApplyMs: 1 };

export async function startWorld(knobs: Partial<FluxKnobs> = DEFAULT_TEST_KNOBS): Promise<World> {
  const api = await startApiServer({ bookmarkIntervalMs: 100 });
  for (const f of crdFiles()) await api.installCrdFile(f);
  await api.installCrdFile(crd("flux-gitrepository.yaml"));
  await api.installCrdFile(crd("flux-kustomization.yaml"));
  const git = await startGitServer();
  const kc = api.kubeConfig();
  let sim = await startFluxSim({ kubeConfig: kc, knobs });
  const kube = new Kube(kc);
  const cacheDir = await mkdtemp(join(tmpdir(), "flux-clones-"));
  const world: World = {
    api,
    git,
    clones: new GitAncestry({ cacheDir, remoteFor: remoteFromCluster(kube) }),
    sim,
    kube,
    async restartSim(paused) {
      await world.sim.stop();
      await paused?.();
      sim = await startFluxSim({ kubeConfig: kc, knobs: world.sim.knobs });
      world.sim = sim;
    },
    async stop() {
      await world.sim.stop();
      await api.close();
      await git.close();
      await rm(cacheDir, { recursive: true, force: true });
    },
  };
  return world;
}

let seq = 0;

export interface Scene {
  ns: string;
  url: string;
  peer: GitPeer;
  claim: { namespace: string; name: string };
  ks: { namespace: string; name: string };
  source: { namespace: string; name: string };
  kind: ReturnType<typeof createApplierKind>;
  /** ClaimContext.follow: the kind's recovery, registered as followed, as the executor host runs it. */
  follow: ClaimContext["follow"];
  events: EventSpec[];
  reports: Report[];
  following: Following;
  readKs(name?: string): Promise<Kustomization>;
  readClaim(): Promise<KObject>;
  configValue(name?: string): Promise<string | undefined>;
  /** Commits files and pushes; returns the new commit. */
  push(files: Record<string, string>, message?: string): Promise<string>;
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
  /** Runs one attempt; returns the phases reported in order. */
  run(
    attempt: Attempt,
    signal?: AbortSignal,
  ): Promise<{ phases: string[]; last: { phase: string; reason?: string; revisionMismatch?: boolean } }>;
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
  await kube.custom.createNamespacedCustomObject({
    ...KUSTOMIZATION,
    namespace: ns,
    body: ksBody("apps", "apps"),
  });
  for (const [name, folder] of Object.entries(o.extra ?? {}))
    await kube.custom.createNamespacedCustomObject({
      ...KUSTOMIZATION,
      namespace: ns,
      body: ksBody(name, folder),
    });
  const readKs = async (name = "apps") => (await kube.get<Kustomization>(KUSTOMIZATION, ns, name))!;
  if (!o.suspendedBefore) {
    await until(async () => (await readKs()).status?.lastAppliedRevision, "the first apply");
  }
  for (const name of Object.keys(o.extra ?? {}))
    await until(async () => (await readKs(name)).status?.lastAppliedRevision, `the first apply of ${name}`);
  const claimBody = (name: string, ks: string) => ({
    apiVersion: "applygate.dev/v1alpha1",
    kind: "FluxClaim",
    metadata: { name, namespace: ns },
    spec: { kustomizationRef: { name: ks, namespace: ns } },
  });
  await kube.custom.createNamespacedCustomObject({
    ...RESOURCES.fluxClaim,
    namespace: ns,
    body: claimBody("claim", "apps"),
  });
  for (const name of Object.keys(o.extra ?? {}))
    await kube.custom.createNamespacedCustomObject({
      ...RESOURCES.fluxClaim,
      namespace: ns,
      body: claimBody(`${name}-claim`, name),
    });

  // The GitProvider the GitTargets name: the repository whose commits an apply would bring.
  await kube.custom.createNamespacedCustomObject({
    ...RESOURCES.gitProvider,
    namespace: ns,
    body: {
      apiVersion: "applygate.dev/v1alpha1",
      kind: "GitProvider",
      metadata: { name: "repo", namespace: ns },
      spec: { url, type: "gitea", webhookSecretRef: { name: "hook" } },
    },
  });
  // A GitTarget naming each claim: an attempt's targets must still stand at the write.
  const targetUids = new Map<string, string>();
  for (const [claimName, targetName] of [
    ["claim", "target"],
    ...Object.keys(o.extra ?? {}).map((n) => [`${n}-claim`, `${n}-target`]),
  ] as const) {
    const t = await kube.custom.createNamespacedCustomObject({
      ...RESOURCES.gitTarget,
      namespace: ns,
      body: {
        apiVersion: "applygate.dev/v1alpha1",
        kind: "GitTarget",
        metadata: { name: targetName, namespace: ns },
        spec: {
          providerRef: { name: "repo" },
          branch: "main",
          path: targetName,
          claimRef: { kind: "FluxClaim", name: claimName },
        },
      },
    });
    targetUids.set(claimName, (t as KObject).metadata.uid ?? "");
  }

  const events = memoryEvents();
  const reporter = memoryReporter();
  const following = new Following();
  const log = silentLogger();
  const kind = createApplierKind({
    kind: "flux",
    kube: o.executorKube ?? kube,
    log,
    events,
    following,
    reporter,
    now: () => new Date(),
    // The tip is the branch's head on the Git server, as the worker would have recorded it.
    checks: unrecordedChecks(
      kube,
      { tip: async (a) => (await world.git.tip(ns)) === a.commit, ...o.checks },
      approvalRecheck({ kube, git: world.clones }),
    ),
    options: { pollMs: 50, shortRequeueMs: 20, windowGraceMs: 200, ...o.options },
  });
  await kind.controller.start?.({ requeueApplier: () => {} });

  const readClaim = async (name = "claim") => (await kube.get<KObject>(RESOURCES.fluxClaim, ns, name))!;
  const writeResult: Scene["writeResult"] = async (name, r) => {
    const c = await readClaim(name);
    const st = (c.status ?? {}) as { conditions?: never[] };
    return kube.patchStatus(
      RESOURCES.fluxClaim,
      ns,
      name,
      {
        ...(r.conditions ? { conditions: setConditions(st.conditions, r.conditions, new Date()) } : {}),
        ...(r.status ?? {}),
      },
      c.metadata.resourceVersion,
    );
  };
  const follow = followLikeHost(kind.executor, following);
  const ctxFor = async (name: string) => {
    const c = await readClaim(name);
    const op = (c.status as { operation?: never } | undefined)?.operation;
    return {
      kube,
      log,
      events,
      following,
      now: () => new Date(),
      follow,
      ...(op ? { operation: op } : {}),
      branchKey: `${url}@main`,
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
    writeResult,
    async adopt(name = "claim") {
      const c0 = await readClaim(name);
      await kube.setFinalizer(RESOURCES.fluxClaim, c0, "applygate.dev/flux-claim", true);
      return until(async () => {
        const c = await readClaim(name);
        const applier = kind.controller.applierOf(c);
        const r = await kind.controller.hold(c, applier, await ctxFor(name));
        const written = await writeResult(name, r);
        const ic = (written.status as { conditions?: { type: string; status: string }[] }).conditions?.find(
          (x) => x.type === "InControl",
        );
        return ic?.status === "True" && written;
      }, "adoption");
    },
    attempt(commit, over = {}) {
      const claimName = over.claim?.name ?? "claim";
      const targetName = claimName === "claim" ? "target" : claimName.replace(/-claim$/, "-target");
      return {
        token: `op-${randomBytes(4).toString("hex")}`,
        claim: { kind: "FluxClaim", namespace: ns, name: "claim" },
        applier: { kind: "flux", namespace: ns, name: "apps" },
        branchKey: `${url}@main`,
        repository: url,
        branch: "main",
        commit,
        targets: [
          { uid: targetUids.get(claimName) ?? "", namespace: ns, name: targetName, reason: "ForeignCommit" },
        ],
        sentAt: new Date().toISOString(),
        ...over,
      };
    },
    async run(attempt, signal = new AbortController().signal) {
      const phases: { phase: string; reason?: string; revisionMismatch?: boolean }[] = [];
      const report: ReportFn = async (phase, extra = {}) => {
        phases.push({
          phase,
          ...(extra.reason ? { reason: extra.reason } : {}),
          ...(extra.revisionMismatch !== undefined ? { revisionMismatch: extra.revisionMismatch } : {}),
        });
      };
      await kind.executor.execute(attempt, report, signal);
      return { phases: phases.map((p) => p.phase), last: phases.at(-1) ?? { phase: "none" } };
    },
  };
  return s;
}

export { ctxOf };

/** A ClaimContext for calling the controller's hooks directly, as the reconciler does. */
async function ctxOf(s: Scene, world: World, over: Record<string, unknown> = {}) {
  const c = await s.readClaim();
  const op = (c.status as { operation?: never } | undefined)?.operation;
  return {
    kube: world.kube,
    log: silentLogger(),
    events: { emit: async (e: EventSpec) => void s.events.push(e) },
    following: s.following,
    now: () => new Date(),
    follow: s.follow,
    ...(op ? { operation: op } : {}),
    branchKey: `${s.url}@main`,
    ...over,
  };
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
