/**
 * What a claim reconciler pass costs the API server when it has nothing to change. Every event of
 * a held Application (each status write of Argo CD's) brings a pass; a pass that read the
 * Application and the claim from the API server and dry-ran the switch each time made an apply
 * cost several times what Argo CD's own webhook costs (issue 38). A pass decides on the watch
 * caches, and the switch's dry run (the CRD's answer) is asked once a minute.
 */
import { expect, it } from "vitest";
import { RESOURCES } from "../../queue/kube/index.js";
import { APPLICATION } from "../../sidecar/argocd/application.js";
import type { Sidecar } from "../../sidecar/main.js";
import { fileWorld } from "../support/file-world.js";
import { claimWatchCaughtUp } from "../support/sidecar-world.js";
import { heldApplication, startCluster, until } from "./harness.js";

const USER = "argocd-pass-count";
let sidecar: Sidecar | undefined;

const c = fileWorld(async () => {
  const c = await startCluster({ argo: {} });
  c.api.addUser(USER, `token-${USER}`, "all");
  sidecar = await c.startSidecar({
    applier: "argocd",
    resyncMs: 10 * 60_000,
    kubeConfig: c.api.kubeConfig(USER),
    options: { watchKinds: [] },
  });
  return c;
});

it("a pass with nothing to change reads neither the Application nor the claim, dry-runs nothing and writes nothing", async () => {
  const name = "web";
  await heldApplication(c, name);
  const reconciler = sidecar?.reconciler;
  if (!reconciler || !sidecar) throw new Error("no sidecar");
  await claimWatchCaughtUp(sidecar.kube, RESOURCES.argoCDClaim, { namespace: "argocd", name });
  await reconciler.whenIdle();

  // Label 0 untraced: its pass comes after every event of the adoption (one watch, in order).
  let trace: { requests: string[]; stop(): void } | undefined;
  for (let i = 0; i < 6; i++) {
    if (i === 1) trace = c.api.traceRequests(USER);
    const before = reconciler.passCount();
    await c.kube.mergePatch(APPLICATION, "argocd", name, { metadata: { labels: { seen: `l${i}` } } });
    await until(async () => reconciler.passCount() > before, `the pass after label ${i}`);
    await reconciler.whenIdle();
  }
  trace?.stop();
  expect(trace?.requests, trace?.requests.join("\n")).toEqual([]);

  // Switched on by somebody: the pass its event brings switches it off again.
  await c.kube.mergePatch(APPLICATION, "argocd", name, {
    spec: { syncPolicy: { automated: { enabled: true, prune: true } } },
  });
  await until(async () => {
    const app = await c.kube.get(APPLICATION, "argocd", name);
    const automated = (app?.spec as { syncPolicy?: { automated?: { enabled?: boolean } } })?.syncPolicy
      ?.automated;
    return automated?.enabled === false;
  }, "automated sync switched off again");
});
