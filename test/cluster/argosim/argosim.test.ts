/**
 * argosim against the simulated API server (over HTTP, through @kubernetes/client-node) and the
 * real Git server: the Argo CD facts of facts.ts, which the real tier runs against real Argo CD.
 */
import * as k8s from "@kubernetes/client-node";
import { type ApiServer, startApiServer } from "../apiserver/index.js";
import { type ArgoController, type ArgoFactsBackend, describeArgoFacts, type SimHandle } from "./facts.js";
import { type ArgoSim, startArgoSim } from "./index.js";

const crd = (file: string) => new URL(`../crds/${file}`, import.meta.url).pathname;

function simBackend(): ArgoFactsBackend {
  let api: ApiServer | undefined;
  let kc: k8s.KubeConfig;
  const sims: ArgoSim[] = [];
  const handles: SimHandle[] = ["hold", "fail", "syncs", "clock", "knobs", "versions", "stop", "appsets"];
  return {
    name: "argosim",
    handles: new Set(handles),
    async start() {
      api = await startApiServer({ bookmarkIntervalMs: 50 });
      for (const f of ["argocd-application.yaml", "argocd-appproject.yaml", "argocd-applicationset.yaml"])
        await api.installCrdFile(crd(f));
      kc = api.kubeConfig();
      const core = kc.makeApiClient(k8s.CoreV1Api);
      for (const name of ["argocd", "apps", "team"])
        await core.createNamespace({ body: { metadata: { name } } });
      return kc;
    },
    async controller(opts): Promise<ArgoController> {
      const s = await startArgoSim({
        kubeConfig: kc,
        ...opts,
        knobs: { refreshIntervalMs: 3_600_000, ...opts.knobs },
      });
      sims.push(s);
      return s;
    },
    async reset() {
      await Promise.all(sims.splice(0).map((s) => s.stop()));
    },
    async stop() {
      await Promise.all(sims.splice(0).map((s) => s.stop()));
      await api?.close();
    },
  };
}

describeArgoFacts(simBackend());
