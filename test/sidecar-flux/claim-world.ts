/**
 * The real Flux sidecar (startSidecar: claim reconciler, executor host, Flux kind) over fluxsim,
 * the simulated API server and real Redis, with the safety-net pass set far off, and helpers that
 * create claims and GitTargets and wait for their status. Shared by the claim-timing test and the
 * `claims` benchmark.
 */
import { randomBytes } from "node:crypto";
import { API_VERSION } from "../../queue/crds/index.js";
import { type KObject, RESOURCES } from "../../queue/kube/index.js";
import { silentLogger } from "../../queue/log.js";
import { findCondition } from "../../sidecar/claims/conditions.js";
import { type Sidecar, type SidecarOptions, startSidecar } from "../../sidecar/main.js";
import { isolatedRedis } from "../redis/isolated.js";
import { configMap, startWorld, until, type World } from "./harness.js";

export const SAFETY_NET_MS = 10 * 60_000;

type Conditions = Parameters<typeof findCondition>[0];

export interface ClaimWorld {
  world: World;
  sidecar: Sidecar;
  /** A namespace with a repository, its GitRepository and GitProvider, and a Kustomization `apps`. */
  namespaceWithApplier(): Promise<string>;
  /** Creates the claim `claim` holding `apps` (with the GitTarget naming it when asked). */
  createClaim(ns: string, withTarget?: boolean): Promise<void>;
  /** The claim's condition of this type, once it has one. */
  condition(ns: string, type: string): Promise<ReturnType<typeof findCondition>>;
  /** Waits until the claim's condition of this type satisfies `ok`; returns the ms it took from `since`. */
  waitFor(
    ns: string,
    type: string,
    ok: (c: NonNullable<ReturnType<typeof findCondition>>) => boolean,
    since: number,
  ): Promise<number>;
  stop(): Promise<void>;
}

/** `over`: settings of the sidecar beyond the world's (a test's own deadlines, say). */
export async function startClaimWorld(over: Partial<SidecarOptions<"flux">> = {}): Promise<ClaimWorld> {
  const world = await startWorld();
  const redis = await isolatedRedis("claims");
  const sidecar = await startSidecar({
    applier: "flux",
    kubeConfig: world.api.kubeConfig(),
    redisUrl: redis.url,
    redisPrefix: redis.prefix,
    log: silentLogger(),
    resyncMs: SAFETY_NET_MS,
    ...over,
    options: { pollMs: 50, shortRequeueMs: 20, windowGraceMs: 200, ...over.options },
  });
  const condition = async (ns: string, type: string) => {
    const c = await world.kube.get<KObject>(RESOURCES.fluxClaim, ns, "claim");
    return findCondition((c?.status as { conditions?: Conditions } | undefined)?.conditions, type);
  };
  return {
    world,
    sidecar,
    async namespaceWithApplier() {
      const ns = `claims-${randomBytes(3).toString("hex")}`;
      await world.kube.core.createNamespace({ body: { metadata: { name: ns } } });
      const url = await world.git.createRepo(ns, { "apps/cm.yaml": configMap("app-config", "1") });
      await world.api.applyYaml(`
apiVersion: source.toolkit.fluxcd.io/v1
kind: GitRepository
metadata: {name: repo, namespace: ${ns}}
spec: {interval: 100h, url: "${url}", ref: {branch: main}}
---
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {name: apps, namespace: ${ns}}
spec: {interval: 100h, prune: true, path: ./apps, targetNamespace: ${ns}, sourceRef: {kind: GitRepository, name: repo}}
---
apiVersion: ${API_VERSION}
kind: GitProvider
metadata: {name: repo, namespace: ${ns}}
spec: {url: "${url}", type: gitea, webhookSecretRef: {name: hook}}
`);
      return ns;
    },
    async createClaim(ns, withTarget = false) {
      const claim = `apiVersion: ${API_VERSION}
kind: FluxClaim
metadata: {name: claim, namespace: ${ns}}
spec: {kustomizationRef: {name: apps, namespace: ${ns}}}
`;
      const target = `---
apiVersion: ${API_VERSION}
kind: GitTarget
metadata: {name: apps, namespace: ${ns}}
spec: {providerRef: {name: repo}, branch: main, path: apps, claimRef: {kind: FluxClaim, name: claim}}
`;
      await world.api.applyYaml(withTarget ? `${claim}${target}` : claim);
    },
    condition,
    async waitFor(ns, type, ok, since) {
      await until(async () => {
        const c = await condition(ns, type);
        return c !== undefined && ok(c);
      }, `${type} of the claim in ${ns}`);
      return Date.now() - since;
    },
    async stop() {
      await sidecar.stop();
      await world.stop();
      await redis.cleanup();
    },
  };
}
