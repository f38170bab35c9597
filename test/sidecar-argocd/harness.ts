/**
 * The Argo CD applier's tests: the sidecar world (test/support/sidecar-world.ts) with Argo CD's
 * CRDs and argosim syncing from the real Git server, and what makes Applications, claims, held
 * Applications, executors and attempts.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Attempt, ReportPhase } from "../../queue/contract.js";
import { type KObject, type Kube, KubeError, operationStateOf, RESOURCES } from "../../queue/kube/index.js";
import type { SafetyChecks } from "../../sidecar/applier-kind.js";
import { APPLICATION } from "../../sidecar/argocd/application.js";
import {
  ArgoCDExecutor,
  type ArgoCDExecutorDeps,
  type ArgoCDExecutorOptions,
} from "../../sidecar/argocd/executor.js";
import { buildSyncOperation, startSyncUpdate } from "../../sidecar/argocd/sync.js";
import type { ClaimLocator } from "../../sidecar/operation-record.js";
import {
  type ArgoSim,
  type ArgoSimOptions,
  argocdApplicationCrd,
  startArgoSim,
} from "../cluster/argosim/index.js";
import { gitOk } from "../git/cli.js";
import { GitPeer } from "../git/peer.js";
import { inControlStatus } from "../support/claims.js";
import { unrecordedChecks } from "../support/safety-checks.js";
import {
  attemptFor,
  configMapYaml,
  createProvider,
  createTarget,
  inControl,
  recorder,
  type SidecarWorld,
  startSidecarWorld,
  until,
} from "../support/sidecar-world.js";

export { recorder, until };

const crd = (file: string) => new URL(`../cluster/crds/${file}`, import.meta.url).pathname;

export const cm = (name: string, value: string) => configMapYaml(name, "value", value);

type Ref = { namespace: string; name: string };
type Recorder = ReturnType<typeof recorder>;

/** A held Application and its claim, both named `name` in argocd. */
export interface Held {
  name: string;
  /** The namespace it deploys into. */
  ns: string;
  ref: Ref;
  claim: ClaimLocator;
  /** The claim's status subresource, for faults injected on its writes. */
  statusPath: string;
}

/** What an executor is built with beyond its options: all but the kube have the world's defaults. */
export interface ExecutorParts extends Partial<Omit<ArgoCDExecutorDeps, "options" | "checks">> {
  /** Replaces safety checks of `unrecordedChecks`. */
  checks?: Partial<SafetyChecks>;
  /** The client the standing recheck reads the claim with (default the executor's). */
  standingKube?: Kube;
}

export interface Cluster extends SidecarWorld {
  argo?: ArgoSim;
  startArgo(opts?: Partial<ArgoSimOptions>): Promise<ArgoSim>;
  repo(): Promise<Repo>;
  /** A new repository whose ConfigMap `settings` takes `values` in turn: it, then the commits in order. */
  history<V extends string[]>(...values: V): Promise<[Repo, ...{ [K in keyof V]: string }]>;
  createApp(
    name: string,
    repo: Repo,
    spec?: Record<string, unknown>,
    meta?: Record<string, unknown>,
  ): Promise<KObject>;
  /** A namespace to deploy into (one per KObject, so their objects never meet). */
  namespace(name: string): Promise<string>;
  getApp(name: string): Promise<KObject>;
  /** Creates the claim and a GitTarget `<name>-target` naming it (what an attempt's target is). */
  createClaim(name: string, app: string): Promise<void>;
  /** Marks the claim InControl=True, as the reconciler does once it holds the Application. */
  markHeld(name: string): Promise<void>;
  /**
   * A fresh Application held off (automated enabled: false, prune on) deploying into a namespace
   * of its own (`ns-<name>`), with its claim marked held. `spec` adds to the Application's spec;
   * its `syncPolicy` merges into the held-off one.
   */
  heldApp(name: string, repo: Repo, spec?: Record<string, unknown>): Promise<{ ns: string; ref: Ref }>;
  /** `heldApp` under the next free name `<prefix><n>`. */
  held(prefix: string, repo: Repo, spec?: Record<string, unknown>): Promise<Held>;
  /** An attempt of the claim `name` for the Application `name` (token `t-<name>` unless given). */
  attempt(name: string, commit: string, token?: string): Attempt;
  /** The Argo CD executor on the world's client, log, Events and clock, with no recorded tip. */
  executor(options?: ArgoCDExecutorOptions, parts?: ExecutorParts): ArgoCDExecutor;
  /**
   * Starts `attempt`: what it reports, and its end. `on` is called as each phase is reported,
   * before the executor goes on.
   */
  start(e: ArgoCDExecutor, attempt: Attempt, o?: RunOptions): Recorder & { done: Promise<void> };
  /** Carries `attempt` out to its end: what it reported. */
  run(e: ArgoCDExecutor, attempt: Attempt, o?: RunOptions): Promise<Recorder>;
  /** Sets an operation on the Application directly, as another sync (or our earlier one) would. */
  setOperation(name: string, op: ReturnType<typeof buildSyncOperation>): Promise<void>;
  /**
   * A sync of `commit` set on the Application (ours, or `foreign`: admin's) and held Running by
   * argosim: release the hold to let it end.
   */
  syncRunning(
    name: string,
    o: { commit: string; token: string; foreign?: boolean },
  ): Promise<{ release(): void }>;
}

export interface RunOptions {
  signal?: AbortSignal;
  on?: (phase: ReportPhase) => void;
}

export interface Repo {
  name: string;
  url: string;
  tip(): Promise<string>;
  /**
   * Commits the ConfigMap `settings` (deploy/cm.yaml) at each value in turn, one push each, from
   * one clone; answers the commits in order.
   */
  settings<V extends string[]>(...values: V): Promise<{ [K in keyof V]: string }>;
  /** A local clone holding every commit, for ancestry. */
  clone(): Promise<string>;
}

export interface ClusterOptions {
  argoVersion?: "3.5" | "pre-3.1";
  /** Starts argosim at once, with these options. */
  argo?: Partial<ArgoSimOptions>;
}

export async function startCluster(opts: ClusterOptions = {}): Promise<Cluster> {
  const base = await startSidecarWorld({
    crds: [
      argocdApplicationCrd(opts.argoVersion ?? "3.5"),
      crd("argocd-appproject.yaml"),
      crd("argocd-applicationset.yaml"),
    ],
    namespaces: ["argocd", "apps", "web"],
    label: "argocd",
  });
  const { kube, git } = base;
  const dirs: string[] = [];
  let repos = 0;
  let apps = 0;
  const targetUids = new Map<string, string>();
  const c: Cluster = Object.assign(base, {
    async startArgo(o: Partial<ArgoSimOptions> = {}) {
      c.argo = await startArgoSim({
        kubeConfig: base.kc,
        version: opts.argoVersion ?? "3.5",
        ...o,
        knobs: { refreshIntervalMs: 3_600_000, ...o.knobs },
      });
      return c.argo;
    },
    async repo(): Promise<Repo> {
      const name = `r${++repos}`;
      await git.createRepo(name, { "deploy/cm.yaml": cm("settings", "v0") });
      const url = git.repoUrl(name);
      return {
        name,
        url,
        tip: async () => (await git.tip(name, "main")) as string,
        async settings<V extends string[]>(...values: V) {
          const peer = await GitPeer.clone(url, "main");
          try {
            const out: string[] = [];
            for (const v of values)
              out.push(await peer.commitAndPush("deploy/cm.yaml", cm("settings", v), "change cm.yaml"));
            return out as { [K in keyof V]: string };
          } finally {
            await peer.remove();
          }
        },
        async clone() {
          const dir = await mkdtemp(join(tmpdir(), "ancestry-"));
          dirs.push(dir);
          await gitOk(["clone", "-q", "--bare", url, dir]);
          return dir;
        },
      };
    },
    async history<V extends string[]>(...values: V): Promise<[Repo, ...{ [K in keyof V]: string }]> {
      const repo = await c.repo();
      return [repo, ...(await repo.settings(...values))];
    },
    async createApp(name: string, repo: Repo, spec = {}, meta = {}) {
      return kube.apply(
        APPLICATION,
        {
          apiVersion: "argoproj.io/v1alpha1",
          kind: "Application",
          metadata: { name, namespace: "argocd", ...meta },
          spec: {
            project: "default",
            destination: { server: "https://kubernetes.default.svc", namespace: "web" },
            source: { repoURL: repo.url, path: "deploy", targetRevision: "main" },
            ...spec,
          },
        },
        { fieldManager: "argocd-cli" },
      );
    },
    async namespace(name: string) {
      await kube.core.createNamespace({ body: { metadata: { name } } });
      return name;
    },
    async getApp(name: string) {
      return (await kube.get(APPLICATION, "argocd", name))!;
    },
    async createClaim(name: string, app: string) {
      await kube.apply(RESOURCES.argoCDClaim, {
        apiVersion: "applygate.dev/v1alpha1",
        kind: "ArgoCDClaim",
        metadata: { name, namespace: "argocd" },
        spec: { applicationRef: { name: app, namespace: "argocd" } },
      });
      const uid = await createTarget(kube, {
        namespace: "argocd",
        name: `${name}-target`,
        path: `apps/${name}`,
        claim: { kind: "ArgoCDClaim", name },
      });
      targetUids.set(name, uid);
    },
    async markHeld(name: string) {
      const claim = await kube.get(RESOURCES.argoCDClaim, "argocd", name);
      if (!claim) throw new Error(`no claim ${name}`);
      await kube.patchStatus(
        RESOURCES.argoCDClaim,
        "argocd",
        name,
        inControlStatus("AutomatedSyncOff"),
        undefined,
      );
    },
    async heldApp(name: string, repo: Repo, spec: Record<string, unknown> = {}) {
      const ns = await c.namespace(`ns-${name}`);
      const { syncPolicy, ...rest } = spec;
      await c.createApp(name, repo, {
        destination: { server: "https://kubernetes.default.svc", namespace: ns },
        syncPolicy: { automated: { enabled: false, prune: true }, ...((syncPolicy as object) ?? {}) },
        ...rest,
      });
      await c.createClaim(name, name);
      await c.markHeld(name);
      return { ns, ref: { namespace: "argocd", name } };
    },
    async held(prefix: string, repo: Repo, spec?: Record<string, unknown>): Promise<Held> {
      const name = `${prefix}${++apps}`;
      const { ns, ref } = await c.heldApp(name, repo, spec);
      return {
        name,
        ns,
        ref,
        claim: { type: RESOURCES.argoCDClaim, namespace: "argocd", name },
        statusPath: `/apis/applygate.dev/v1alpha1/namespaces/argocd/argocdclaims/${name}/status`,
      };
    },
    attempt(name: string, commit: string, token = `t-${name}`) {
      return attemptFor({
        token,
        claim: { kind: "ArgoCDClaim", namespace: "argocd", name },
        applier: { kind: "argocd", namespace: "argocd", name },
        branchKey: "git/r@main",
        repository: "git/r",
        commit,
        targets: [
          {
            uid: targetUids.get(name) ?? "",
            namespace: "argocd",
            name: `${name}-target`,
            reason: "ForeignCommit",
          },
        ],
      });
    },
    executor(options: ArgoCDExecutorOptions = {}, parts: ExecutorParts = {}) {
      const { checks, standingKube, ...deps } = parts;
      const client = deps.kube ?? kube;
      return new ArgoCDExecutor({
        log: base.log,
        events: base.events,
        now: base.now,
        ...deps,
        kube: client,
        options,
        checks: unrecordedChecks(standingKube ?? client, checks),
      });
    },
    start(e: ArgoCDExecutor, attempt: Attempt, o: RunOptions = {}) {
      const r = recorder();
      const report: typeof r.report = async (phase, extra) => {
        await r.report(phase, extra);
        o.on?.(phase);
      };
      return { ...r, done: e.execute(attempt, report, o.signal ?? new AbortController().signal) };
    },
    async run(e: ArgoCDExecutor, attempt: Attempt, o?: RunOptions) {
      const r = c.start(e, attempt, o);
      await r.done;
      return r;
    },
    async setOperation(name: string, op: ReturnType<typeof buildSyncOperation>) {
      // Argo CD's own refresh may write between our read and our update: read again, as any writer does.
      for (let attempt = 0; ; attempt++) {
        const app = await c.getApp(name);
        try {
          await kube.replace(APPLICATION, startSyncUpdate(app, op));
          return;
        } catch (err) {
          if (!(err instanceof KubeError) || err.code !== 409 || attempt >= 10) throw err;
        }
      }
    },
    async syncRunning(name: string, o: { commit: string; token: string; foreign?: boolean }) {
      const hold = c.argo!.holdSync({ namespace: "argocd", name });
      const op = buildSyncOperation(await c.getApp(name), { commit: o.commit, token: o.token });
      await c.setOperation(name, o.foreign ? { ...op, initiatedBy: { username: "admin" }, info: [] } : op);
      await until(
        async () => operationStateOf(await c.getApp(name))?.phase === "Running",
        `the sync ${o.token} running`,
      );
      return hold;
    },
  });
  base.onStop(async () => {
    for (const d of dirs) await rm(d, { recursive: true, force: true });
  });
  base.onStop(() => c.argo?.stop());
  if (opts.argo) await c.startArgo(opts.argo);
  return c;
}

/**
 * An Application `name` in argocd with automated sync off, and the GitProvider, GitTarget and
 * ArgoCDClaim that make the sidecar hold it; resolves once the claim is InControl.
 */
export async function heldApplication(c: Cluster, name: string): Promise<{ repo: Repo; ns: string }> {
  const repo = await c.repo();
  const ns = await c.namespace(`ns-${name}`);
  await c.createApp(name, repo, {
    destination: { server: "https://kubernetes.default.svc", namespace: ns },
    syncPolicy: { automated: { enabled: false, prune: true } },
  });
  // The GitProvider and a GitTarget naming the claim (the sidecar's clone fetches through them).
  await createProvider(c.kube, "argocd", repo.url);
  await createTarget(c.kube, {
    namespace: "argocd",
    name,
    path: "deploy",
    claim: { kind: "ArgoCDClaim", name },
  });
  await c.createClaim(name, name);
  await inControl(c.kube, RESOURCES.argoCDClaim, { namespace: "argocd", name });
  return { repo, ns };
}
