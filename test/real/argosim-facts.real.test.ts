// argosim's Argo CD facts (test/cluster/argosim/facts.ts), the same test bodies, against real Argo CD
// on the real control plane: where the two differ, argosim is wrong (test/real/RESULTS.md lists
// each difference found). One cluster and one Argo CD for the file; after each test its
// Applications, AppProjects and destination objects are removed.
import * as k8s from "@kubernetes/client-node";
import { describe, it } from "vitest";
import {
  type ArgoController,
  type ArgoFactsBackend,
  describeArgoFacts,
  type SimHandle,
} from "../cluster/argosim/facts.js";
import { DEFAULT_KNOBS } from "../cluster/argosim/index.js";
import { until } from "../support/wait.js";
import { type RealArgoCD, startRealArgoCD } from "./argocd.js";
import { ARGOCD_BINARIES, CONTROL_PLANE, findRealBinaries } from "./binaries.js";
import { type RealCluster, startRealCluster } from "./cluster.js";

const GROUP = "argoproj.io";
const VERSION = "v1alpha1";
/** Timed refresh as good as off: the facts' default (an hour), as argosim's tests set it. */
const NO_TIMED_REFRESH_S = 3600;

const bins = findRealBinaries([...CONTROL_PLANE, ...ARGOCD_BINARIES]);
if (!bins.built) console.warn(`\n!!! SKIPPED test/real/argosim-facts.real.test.ts: ${bins.message}\n`);

const notOnReal = (handle: SimHandle) => () => {
  throw new Error(`real Argo CD has no ${handle} handle`);
};

function realBackend(): ArgoFactsBackend {
  let cluster: RealCluster | undefined;
  let argocd: RealArgoCD | undefined;
  let kc: k8s.KubeConfig;
  const apps = () => kc.makeApiClient(k8s.CustomObjectsApi);

  /** Every Application's resourceVersion: the controller is idle once these stop moving. */
  const appVersions = async (): Promise<string> => {
    const out: string[] = [];
    for (const namespace of ["argocd", "team"]) {
      const list = (await apps().listNamespacedCustomObject({
        group: GROUP,
        version: VERSION,
        namespace,
        plural: "applications",
      })) as { items: { metadata: { name: string; resourceVersion: string } }[] };
      out.push(...list.items.map((a) => `${namespace}/${a.metadata.name}@${a.metadata.resourceVersion}`));
    }
    return out.sort().join(",");
  };

  return {
    name: "real Argo CD",
    handles: new Set<SimHandle>(),
    async start() {
      cluster = await startRealCluster();
      argocd = await startRealArgoCD(cluster, {
        appResyncSeconds: NO_TIMED_REFRESH_S,
        appResyncJitterSeconds: 0,
        applicationNamespaces: ["team"],
      });
      kc = cluster.kubeConfig();
      const core = kc.makeApiClient(k8s.CoreV1Api);
      for (const name of ["apps", "team"]) await core.createNamespace({ body: { metadata: { name } } });
      // Applications outside argocd need their project to name the namespace (argosim asks nothing).
      await apps().patchNamespacedCustomObject(
        {
          group: GROUP,
          version: VERSION,
          namespace: "argocd",
          plural: "appprojects",
          name: "default",
          body: { spec: { sourceNamespaces: ["team"] } },
        },
        k8s.setHeaderOptions("Content-Type", k8s.PatchStrategy.MergePatch),
      );
      return kc;
    },
    async controller(opts): Promise<ArgoController> {
      if (!argocd) throw new Error("not started");
      const refreshMs = opts.knobs?.refreshIntervalMs;
      const resync = refreshMs === undefined ? NO_TIMED_REFRESH_S : Math.max(1, Math.ceil(refreshMs / 1000));
      if (argocd.controllerOptions().appResyncSeconds !== resync) {
        await argocd.restartController({ appResyncSeconds: resync });
      }
      return {
        knobs: { ...DEFAULT_KNOBS, ...opts.knobs },
        // An absence is waited out: nothing of the controller's moved for 1.5 s.
        idle: async () => {
          let last = await appVersions();
          let since = Date.now();
          await until(
            async () => {
              const now = await appVersions();
              if (now !== last) {
                last = now;
                since = Date.now();
              }
              return Date.now() - since >= 1_500;
            },
            "the real controller to be quiet",
            { timeoutMs: 30_000, everyMs: 250 },
          );
        },
        failNextSync: notOnReal("fail"),
        holdSync: notOnReal("hold"),
        syncs: notOnReal("syncs"),
      };
    },
    async reset() {
      const custom = apps();
      for (const namespace of ["argocd", "team"]) {
        await custom.deleteCollectionNamespacedCustomObject({
          group: GROUP,
          version: VERSION,
          namespace,
          plural: "applications",
        });
      }
      const projects = (await custom.listNamespacedCustomObject({
        group: GROUP,
        version: VERSION,
        namespace: "argocd",
        plural: "appprojects",
      })) as { items: { metadata: { name: string } }[] };
      for (const p of projects.items.filter((x) => x.metadata.name !== "default")) {
        await custom.deleteNamespacedCustomObject({
          group: GROUP,
          version: VERSION,
          namespace: "argocd",
          plural: "appprojects",
          name: p.metadata.name,
        });
      }
      await kc.makeApiClient(k8s.CoreV1Api).deleteCollectionNamespacedConfigMap({ namespace: "apps" });
    },
    async stop() {
      await argocd?.stop();
      await cluster?.stop();
    },
  };
}

if (bins.built) describeArgoFacts(realBackend(), 60_000);
else describe.skip("real Argo CD", () => it("needs the real components built", () => {}));
