/**
 * The real Flux sidecar (startSidecar: claim reconciler, executor host, Flux kind) in the Flux
 * world, with the safety-net pass set far off, and helpers that create claims and GitTargets and
 * wait for their status. Shared by the claim-timing tests and the `claims` benchmark.
 */
import { randomBytes } from "node:crypto";
import { API_VERSION } from "../../queue/crds/index.js";
import { RESOURCES } from "../../queue/kube/index.js";
import type { Sidecar, SidecarOptions } from "../../sidecar/main.js";
import {
  claimCondition,
  claimConditionReaches,
  createProvider,
  createTarget,
} from "../support/sidecar-world.js";
import { configMap, startWorld, type World } from "./harness.js";

export const SAFETY_NET_MS = 10 * 60_000;

type Condition = NonNullable<Awaited<ReturnType<typeof claimCondition>>>;

export interface ClaimWorld {
  world: World;
  sidecar: Sidecar;
  /** A namespace with a repository, its GitRepository and GitProvider, and a Kustomization `apps`. */
  namespaceWithApplier(): Promise<string>;
  /** Creates the claim `claim` holding `apps` (with the GitTarget `apps` naming it when asked). */
  createClaim(ns: string, withTarget?: boolean): Promise<void>;
  /** The claim's condition of this type, once it has one. */
  condition(ns: string, type: string): Promise<Condition | undefined>;
  /** Waits until the claim's condition of this type satisfies `ok`; returns the ms it took from `since`. */
  waitFor(ns: string, type: string, ok: (c: Condition) => boolean, since: number): Promise<number>;
  stop(): Promise<void>;
}

/**
 * `over`: settings of the sidecar beyond the world's (a test's own deadlines, say); `user`: the
 * sidecar talks to the API server as this user of its own (all rights), whose requests a test can
 * trace.
 */
export async function startClaimWorld(
  over: Partial<SidecarOptions<"flux">> = {},
  o: { user?: string } = {},
): Promise<ClaimWorld> {
  const world = await startWorld();
  if (o.user) world.api.addUser(o.user, `token-${o.user}`, "all");
  const sidecar = await world.startFluxSidecar({
    resyncMs: SAFETY_NET_MS,
    ...(o.user ? { kubeConfig: world.api.kubeConfig(o.user) } : {}),
    ...over,
  });
  const claim = (ns: string) => ({ namespace: ns, name: "claim" });
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
`);
      await createProvider(world.kube, ns, url);
      return ns;
    },
    async createClaim(ns, withTarget = false) {
      await world.api.applyYaml(`apiVersion: ${API_VERSION}
kind: FluxClaim
metadata: {name: claim, namespace: ${ns}}
spec: {kustomizationRef: {name: apps, namespace: ${ns}}}
`);
      if (withTarget)
        await createTarget(world.kube, {
          namespace: ns,
          name: "apps",
          path: "apps",
          claim: { kind: "FluxClaim", name: "claim" },
        });
    },
    condition: (ns, type) => claimCondition(world.kube, RESOURCES.fluxClaim, claim(ns), type),
    async waitFor(ns, type, ok, since) {
      await claimConditionReaches(world.kube, RESOURCES.fluxClaim, claim(ns), type, ok);
      return Date.now() - since;
    },
    stop: () => world.stop(),
  };
}
