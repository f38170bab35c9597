// applygate as deployed on the real control plane, for a real-tier file: one Redis, Git server,
// cluster and install (test/real/applygate.ts) for the file, with Flux or Argo CD beside it, each
// component started under its ServiceAccount. After each test the file's cleanups run, newest
// first, then the audit check: no 403 and no 422 for any product component, and each one still
// running.
//
//   describe.skipIf(!bins.built)("applygate beside real Flux", () => {
//     const d = deployedSuite({ components: ["gateway", "worker"], sidecars: ["flux"],
//                               applier: { start: startRealFlux }, setupTimeoutMs: 300_000 });
//     it("…", async () => { await d.kubectlOk(["create", "namespace", ns]); d.cleanups.push(…); });
//   });
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CoreV1Api, CustomObjectsApi } from "@kubernetes/client-node";
import { afterAll, afterEach, beforeAll, beforeEach, expect } from "vitest";
import { type EmbeddedRedis, resolveEmbeddedRedis } from "../../queue/redis.js";
import { type GitServer, startGitServer } from "../git/server.js";
import { ensureRedisServer } from "../redis/install.js";
import {
  auditByComponent,
  auditProblems,
  auditTable,
  type ComponentName,
  deleteInstallKeys,
  type Installed,
  identitiesOf,
  installApplygate,
  kubectl,
  type Running,
  readAudit,
  type SidecarKind,
  startComponent,
  startSidecar,
} from "./applygate.js";
import { type RealCluster, startRealCluster } from "./cluster.js";

export interface DeployedOptions<A extends { stop(): Promise<void> }> {
  components: ComponentName[];
  sidecars: SidecarKind[];
  /**
   * Flux or Argo CD, started before applygate's install or, `afterInstall`, after it (the install
   * makes argocd with the Secret its sidecar reads; Flux makes flux-system itself).
   */
  applier?: { start(cluster: RealCluster): Promise<A>; afterInstall?: boolean };
  /** Before the install, with no applier running (e.g. Flux's CRDs alone). */
  prepare?: (cluster: RealCluster) => Promise<void>;
  /** Makes a scratch folder for the file's clones, named with this prefix, removed at the end. */
  workPrefix?: string;
  /** After each test's cleanups, before the audit check. */
  reset?: () => Promise<void>;
  setupTimeoutMs: number;
}

export interface Deployed<A> {
  readonly cluster: RealCluster;
  readonly redis: EmbeddedRedis;
  readonly git: GitServer;
  readonly installed: Installed;
  /** The username each component and sidecar runs as. */
  readonly identities: Record<string, string>;
  readonly custom: CustomObjectsApi;
  readonly core: CoreV1Api;
  readonly applier: A;
  /** The scratch folder (`workPrefix`). */
  readonly work: string;
  /** What runs now; a test that stops one puts its successor here. */
  readonly running: Partial<Record<ComponentName | SidecarKind, Running>>;
  /** Run after the test, newest first. */
  readonly cleanups: (() => Promise<void>)[];
  kubectlOk(args: string[], o?: Parameters<typeof kubectl>[2]): Promise<string>;
}

/** What `beforeAll` starts, each set once it has. */
const STARTED = [
  "cluster",
  "redis",
  "git",
  "installed",
  "identities",
  "custom",
  "core",
  "applier",
  "work",
] as const;
type Started<A> = { -readonly [K in (typeof STARTED)[number]]: Deployed<A>[K] };

/** Registers the file's hooks in the calling `describe`; the fields are set once `beforeAll` ran. */
export function deployedSuite<A extends { stop(): Promise<void> } = { stop(): Promise<void> }>(
  o: DeployedOptions<A>,
): Deployed<A> {
  const s: Partial<Started<A>> = {};
  let auditMark = 0;
  const running: Partial<Record<ComponentName | SidecarKind, Running>> = {};
  const cleanups: (() => Promise<void>)[] = [];

  beforeAll(async () => {
    const redis = (s.redis = await resolveEmbeddedRedis(process.env, { ensureServer: ensureRedisServer }));
    s.git = await startGitServer();
    // REAL_KEEP=1 keeps the cluster's folder (logs of every process, audit.log) after the run.
    const cluster = (s.cluster = await startRealCluster({ keep: Boolean(process.env.REAL_KEEP) }));
    if (process.env.REAL_KEEP) console.log(`keeping ${cluster.dir}`);
    s.custom = cluster.kubeConfig().makeApiClient(CustomObjectsApi);
    s.core = cluster.kubeConfig().makeApiClient(CoreV1Api);
    await o.prepare?.(cluster);
    if (o.applier && !o.applier.afterInstall) s.applier = await o.applier.start(cluster);
    const installed = (s.installed = await installApplygate(cluster, {
      redisUrl: redis.url,
      appliers: o.sidecars,
    }));
    if (o.applier?.afterInstall) s.applier = await o.applier.start(cluster);
    for (const c of o.components) running[c] = await startComponent(installed, c);
    for (const k of o.sidecars) running[k] = await startSidecar(installed, k);
    s.identities = await identitiesOf(installed, [...o.components, ...o.sidecars]);
    s.work = o.workPrefix ? await mkdtemp(join(tmpdir(), o.workPrefix)) : "";
  }, o.setupTimeoutMs);

  afterAll(async () => {
    for (const r of Object.values(running)) await r?.stop();
    await s.applier?.stop();
    await s.cluster?.stop();
    await s.git?.close();
    if (s.redis && s.installed) await deleteInstallKeys(s.installed);
    await s.redis?.stop();
    if (s.work) await rm(s.work, { recursive: true, force: true });
  }, 120_000);

  beforeEach(() => {
    auditMark = readAudit(d.cluster.auditLogPath).end;
  });

  afterEach(async (ctx) => {
    for (const c of cleanups.splice(0).reverse()) await c();
    await o.reset?.();
    const audit = auditByComponent(readAudit(d.cluster.auditLogPath, auditMark).events, d.identities);
    console.log(`API requests per component during "${ctx.task.name}":\n${auditTable(audit)}`);
    const problems = auditProblems(audit);
    expect(problems, `the audit log shows refusals of product components:\n${problems.join("\n")}`).toEqual(
      [],
    );
    for (const [name, r] of Object.entries(running))
      expect(r!.exitCodeNow(), `${name} is still running`).toBeNull();
  }, 180_000);

  const d = {
    running,
    cleanups,
    async kubectlOk(args: string[], opts?: Parameters<typeof kubectl>[2]) {
      const r = await kubectl(d.cluster, args, opts);
      if (r.code !== 0) throw new Error(`kubectl ${args.join(" ")}: ${r.out}${r.err}`);
      return r.out;
    },
  } as Deployed<A>;
  for (const key of STARTED)
    Object.defineProperty(d, key, {
      get: () => {
        const v = s[key];
        if (v === undefined) throw new Error(`${key} is not started (beforeAll has not run)`);
        return v;
      },
    });
  return d;
}
