/**
 * A cluster for the Argo CD applier's tests: the simulated API server with Argo CD's CRDs and
 * ours, argosim syncing from the real Git server, and helpers to make Applications, claims and
 * attempts. Tests wait on conditions, never on fixed sleeps.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as k8s from "@kubernetes/client-node";
import type { Attempt, ReportPhase } from "../../queue/contract.js";
import { crdFiles } from "../../queue/crds/files.js";
import { type KObject, Kube, RESOURCES } from "../../queue/kube/index.js";
import { silentLogger } from "../../queue/log.js";
import type { ReportExtra, ReportFn } from "../../sidecar/applier-kind.js";
import { APPLICATION, type Application } from "../../sidecar/argocd/application.js";
import { memoryEvents } from "../../sidecar/events.js";
import { type ApiServer, startApiServer } from "../cluster/apiserver/index.js";
import {
  type ArgoSim,
  type ArgoSimOptions,
  argocdApplicationCrd,
  startArgoSim,
} from "../cluster/argosim/index.js";
import { gitOk } from "../git/cli.js";
import { GitPeer } from "../git/peer.js";
import { type GitServer, startGitServer } from "../git/server.js";
import { untilWith } from "../support/wait.js";

const crd = (file: string) => new URL(`../cluster/crds/${file}`, import.meta.url).pathname;

export const until = untilWith({ timeoutMs: 15_000, everyMs: 15, retryErrors: true });

export interface Reported {
  phase: ReportPhase;
  extra: ReportExtra;
}

export function recorder(): { report: ReportFn; reports: Reported[]; phases: () => ReportPhase[] } {
  const reports: Reported[] = [];
  return {
    reports,
    report: async (phase, extra = {}) => {
      reports.push({ phase, extra });
    },
    phases: () => reports.map((r) => r.phase),
  };
}

export interface Cluster {
  api: ApiServer;
  git: GitServer;
  kube: Kube;
  kc: k8s.KubeConfig;
  argo?: ArgoSim;
  log: ReturnType<typeof silentLogger>;
  events: ReturnType<typeof memoryEvents>;
  startArgo(opts?: Partial<ArgoSimOptions>): Promise<ArgoSim>;
  repo(): Promise<Repo>;
  createApp(
    name: string,
    repo: Repo,
    spec?: Record<string, unknown>,
    meta?: Record<string, unknown>,
  ): Promise<Application>;
  /** A namespace to deploy into (one per Application, so their objects never meet). */
  namespace(name: string): Promise<string>;
  getApp(name: string): Promise<Application>;
  /** Creates the claim and a GitTarget `<name>-target` naming it (what an attempt's target is). */
  createClaim(name: string, app: string): Promise<void>;
  /** Marks the claim InControl=True, as the reconciler does once it holds the Application. */
  markHeld(name: string): Promise<void>;
  /**
   * A fresh Application held off (automated enabled: false, prune on) deploying into a namespace
   * of its own (`ns-<name>`), with its claim marked held. `spec` adds to the Application's spec;
   * its `syncPolicy` merges into the held-off one.
   */
  heldApp(
    name: string,
    repo: Repo,
    spec?: Record<string, unknown>,
  ): Promise<{ ns: string; ref: { namespace: string; name: string } }>;
  attempt(claim: string, app: string, commit: string, token: string): Attempt;
  close(): Promise<void>;
}

export interface Repo {
  name: string;
  url: string;
  tip(): Promise<string>;
  push(file: string, content: string): Promise<string>;
  /** Several commits in one clone, one push each; returns their ids in order. */
  pushAll(changes: [file: string, content: string][]): Promise<string[]>;
  /** A local clone holding every commit, for ancestry. */
  clone(): Promise<string>;
}

export const cm = (name: string, value: string) =>
  `apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ${name}\ndata:\n  value: "${value}"\n`;

export async function startCluster(opts: { argoVersion?: "3.5" | "pre-3.1" } = {}): Promise<Cluster> {
  const api = await startApiServer({ bookmarkIntervalMs: 50 });
  await api.installCrdFile(argocdApplicationCrd(opts.argoVersion ?? "3.5"));
  for (const f of ["argocd-appproject.yaml", "argocd-applicationset.yaml"]) await api.installCrdFile(crd(f));
  for (const f of crdFiles()) await api.installCrdFile(f);
  const kc = api.kubeConfig();
  const core = kc.makeApiClient(k8s.CoreV1Api);
  for (const name of ["argocd", "apps", "web"]) await core.createNamespace({ body: { metadata: { name } } });
  const git = await startGitServer();
  const kube = new Kube(kc);
  const dirs: string[] = [];
  let seq = 0;
  const targetUids = new Map<string, string>();
  const c: Cluster = {
    api,
    git,
    kube,
    kc,
    log: silentLogger(),
    events: memoryEvents(),
    async startArgo(o = {}) {
      c.argo = await startArgoSim({
        kubeConfig: kc,
        version: opts.argoVersion ?? "3.5",
        ...o,
        knobs: { refreshIntervalMs: 3_600_000, ...o.knobs },
      });
      return c.argo;
    },
    async repo() {
      const name = `r${++seq}`;
      await git.createRepo(name, { "deploy/cm.yaml": cm("settings", "v0") });
      const url = git.repoUrl(name);
      return {
        name,
        url,
        tip: async () => (await git.tip(name, "main")) as string,
        async push(file, content) {
          const peer = await GitPeer.clone(url, "main");
          try {
            return await peer.commitAndPush(`deploy/${file}`, content, `change ${file}`);
          } finally {
            await peer.remove();
          }
        },
        async pushAll(changes) {
          const peer = await GitPeer.clone(url, "main");
          try {
            const out: string[] = [];
            for (const [file, content] of changes) {
              out.push(await peer.commitAndPush(`deploy/${file}`, content, `change ${file}`));
            }
            return out;
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
    async createApp(name, repo, spec = {}, meta = {}) {
      return kube.apply<Application>(
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
    async namespace(name) {
      await core.createNamespace({ body: { metadata: { name } } });
      return name;
    },
    async getApp(name) {
      return (await kube.get<Application>(APPLICATION, "argocd", name))!;
    },
    async createClaim(name, app) {
      await kube.apply(RESOURCES.argoCDClaim, {
        apiVersion: "applygate.dev/v1alpha1",
        kind: "ArgoCDClaim",
        metadata: { name, namespace: "argocd" },
        spec: { applicationRef: { name: app, namespace: "argocd" } },
      });
      const t = await kube.apply<KObject>(RESOURCES.gitTarget, {
        apiVersion: "applygate.dev/v1alpha1",
        kind: "GitTarget",
        metadata: { name: `${name}-target`, namespace: "argocd" },
        spec: {
          providerRef: { name: "repo" },
          branch: "main",
          path: `apps/${name}`,
          claimRef: { kind: "ArgoCDClaim", name },
        },
      });
      targetUids.set(name, t.metadata.uid ?? "");
    },
    async markHeld(name) {
      const claim = await kube.get<KObject>(RESOURCES.argoCDClaim, "argocd", name);
      if (!claim) throw new Error(`no claim ${name}`);
      const now = new Date().toISOString();
      await kube.patchStatus(
        RESOURCES.argoCDClaim,
        "argocd",
        name,
        {
          conditions: [
            {
              type: "InControl",
              status: "True",
              reason: "AutomatedSyncOff",
              message: "held",
              lastTransitionTime: now,
            },
          ],
        },
        undefined,
      );
    },
    async heldApp(name, repo, spec = {}) {
      const ns = await this.namespace(`ns-${name}`);
      const { syncPolicy, ...rest } = spec;
      await this.createApp(name, repo, {
        destination: { server: "https://kubernetes.default.svc", namespace: ns },
        syncPolicy: { automated: { enabled: false, prune: true }, ...((syncPolicy as object) ?? {}) },
        ...rest,
      });
      await this.createClaim(name, name);
      await this.markHeld(name);
      return { ns, ref: { namespace: "argocd", name } };
    },
    attempt(claim, app, commit, token) {
      return {
        token,
        claim: { kind: "ArgoCDClaim", namespace: "argocd", name: claim },
        applier: { kind: "argocd", namespace: "argocd", name: app },
        branchKey: "git/r@main",
        repository: "git/r",
        branch: "main",
        commit,
        targets: [
          {
            uid: targetUids.get(claim) ?? "",
            namespace: "argocd",
            name: `${claim}-target`,
            reason: "ForeignCommit",
          },
        ],
        sentAt: new Date().toISOString(),
      };
    },
    async close() {
      await c.argo?.stop();
      await git.close();
      await api.close();
      for (const d of dirs) await rm(d, { recursive: true, force: true });
    },
  };
  return c;
}
