// The scenes of the scenario files beside real Flux and Argo CD (scenarios-flux.real.test.ts,
// scenarios-argocd.real.test.ts), on applygate as deployed (deployed.ts): a namespace's repository
// with one ConfigMap, applygate's GitProvider and GitTarget on its folder, the applier and, held,
// the claim; and what a person, a tool and another Git writer do in it.
import { randomBytes } from "node:crypto";
import { readdirSync, readFileSync } from "node:fs";
import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { PatchStrategy, setHeaderOptions, type V1ConfigMap } from "@kubernetes/client-node";
import { expect } from "vitest";
import { objectPath, objectYaml } from "../../queue/git/layout.js";
import { gitOk } from "../git/cli.js";
import { untilWith } from "../support/wait.js";
import { kubectl, startComponent } from "./applygate.js";
import { ARGOCD_NAMESPACE, type RealArgoCD, startRealArgoCD } from "./argocd.js";
import type { RealCluster } from "./cluster.js";
import { type Deployed, deployedSuite } from "./deployed.js";
import { FLUX_NAMESPACE, type RealFlux, startRealFlux } from "./flux.js";
import { gitProviderYaml, gitTargetYaml, secretAccessBindings, secretYaml, webhookPathOf } from "./tenant.js";

export interface Scene {
  ns: string;
  repo: string;
  repoUrl: string;
  /** Name of the applier (Kustomization, Application) in its namespace: the scene's namespace. */
  applier: string;
  intakeToken: string;
  /** The ConfigMap's file in the repository. */
  file: string;
  /** The tip when the scene was ready. */
  start: string;
}

/**
 * Flux or Argo CD beside applygate: its claim kind, its namespace, the kinds a scene makes there
 * (each named after the scene's namespace), and how it is started.
 */
interface Appliers {
  flux: RealFlux;
  argocd: RealArgoCD;
}

const APPLIERS: {
  [K in keyof Appliers]: {
    claim: "FluxClaim" | "ArgoCDClaim";
    namespace: string;
    kinds: string[];
    firstApply: string;
    start(cluster: RealCluster): Promise<Appliers[K]>;
    afterInstall: boolean;
    setupTimeoutMs: number;
  };
} = {
  flux: {
    claim: "FluxClaim",
    namespace: FLUX_NAMESPACE,
    kinds: ["kustomization", "gitrepository", "appliergrant"],
    firstApply: "the first apply of the tip",
    start: (cluster: RealCluster) => startRealFlux(cluster),
    afterInstall: false,
    setupTimeoutMs: 300_000,
  },
  // applygate first: its install makes the argocd namespace with the Secret its sidecar reads.
  // Argo CD as installed (install.yaml's defaults: a timed refresh every 120 s, a minute of
  // jitter, the repo-server's branch resolutions cached 3 minutes).
  argocd: {
    claim: "ArgoCDClaim",
    namespace: ARGOCD_NAMESPACE,
    kinds: ["application", "appliergrant"],
    firstApply: "the first sync of the tip",
    start: (cluster: RealCluster) => startRealArgoCD(cluster),
    afterInstall: true,
    setupTimeoutMs: 420_000,
  },
};

/** The applier's objects and, `held`, the claim `web` holding it, after the GitTarget. */
export type SceneObjects = (o: { ns: string; repoUrl: string; folder: string; held: boolean }) => string;

const USER = "user";
const APPLY = setHeaderOptions("Content-Type", PatchStrategy.ServerSideApply);
const MERGE = setHeaderOptions("Content-Type", PatchStrategy.MergePatch);

export type Resource = { group: string; version: string; plural: string };

/**
 * applygate's gateway and worker as deployed beside `applier`, its sidecar with it (deployed.ts's
 * hooks, registered in the calling `describe`); the scenes, and what a person, a tool and another
 * Git writer do in them.
 */
export function applierScenes<K extends keyof Appliers>(applier: K, objects: SceneObjects) {
  const kind = APPLIERS[applier];
  const d: Deployed<Appliers[K]> = deployedSuite({
    components: ["gateway", "worker"],
    sidecars: [applier],
    applier: { start: (cluster) => kind.start(cluster), afterInstall: kind.afterInstall },
    workPrefix: `applygate-real-${applier}-`,
    setupTimeoutMs: kind.setupTimeoutMs,
  });
  const until = untilWith({ timeoutMs: 90_000, everyMs: 100, retryErrors: true });
  const claims = `${kind.claim.toLowerCase()}s`;

  /** The scene's object of `resource` in the applier's namespace, named as the applier. */
  const read = (s: Scene, resource: Resource): Promise<unknown> =>
    d.custom.getNamespacedCustomObject({ ...resource, namespace: kind.namespace, name: s.applier });
  /** Annotates it, as `flux reconcile` or `argocd app get --refresh` asks its controller to look now. */
  const annotate = (s: Scene, resource: Resource, annotations: Record<string, string>) =>
    d.custom.patchNamespacedCustomObject(
      {
        ...resource,
        namespace: kind.namespace,
        name: s.applier,
        body: { metadata: { annotations } },
      },
      MERGE,
    );
  /** The scene's claim, `web`. */
  const claim = (s: Scene): Promise<unknown> =>
    d.custom.getNamespacedCustomObject({
      group: "applygate.dev",
      version: "v1alpha1",
      plural: claims,
      namespace: s.ns,
      name: "web",
    });

  const greeting = async (ns: string) =>
    (await d.core.readNamespacedConfigMap({ name: "web", namespace: ns }).catch(() => undefined))?.data
      ?.greeting;

  /**
   * A namespace's repository (ConfigMap `web`, greeting "hello", in apps/web), applygate's
   * GitTarget `web` on its folder with the bindings docs/install.md makes, the applier (and,
   * `held`, the claim), the Git host's webhook to the gateway; ready once the applier applied the tip.
   */
  async function open(held: boolean): Promise<Scene> {
    const ns = `race-${randomBytes(3).toString("hex")}`;
    const repo = ns;
    const folder = "apps/web";
    const file = objectPath(folder, { apiVersion: "v1", kind: "ConfigMap", namespace: ns, name: "web" });
    const repoUrl = await d.git.createRepo(repo, {
      [file]: objectYaml({
        apiVersion: "v1",
        kind: "ConfigMap",
        metadata: { name: "web", namespace: ns },
        data: { greeting: "hello" },
      }),
    });
    const hookToken = randomBytes(12).toString("hex");
    const intakeToken = randomBytes(12).toString("hex");
    await d.kubectlOk(["create", "namespace", ns]);
    d.cleanups.push(async () => {
      await kubectl(d.cluster, ["-n", ns, "delete", claims, "--all", "--wait=true", "--timeout=60s"]);
      for (const k of kind.kinds)
        await kubectl(d.cluster, [
          "-n",
          kind.namespace,
          "delete",
          k,
          ns,
          "--ignore-not-found",
          "--wait=true",
        ]);
      await kubectl(d.cluster, ["delete", "namespace", ns, "--wait=true", "--timeout=90s"]);
    });
    for (const args of secretAccessBindings(ns)) await d.kubectlOk(args);
    await d.kubectlOk(["apply", "-f", "-"], {
      input: [
        secretYaml(ns, "hook", { token: hookToken }),
        secretYaml(ns, "intake", { token: intakeToken }),
        gitProviderYaml(ns, repoUrl),
        gitTargetYaml(ns, { name: "web", folder, claim: { kind: kind.claim, name: "web" }, intake: true }),
        objects({ ns, repoUrl, folder, held }),
      ].join("---\n"),
    });
    const webhookPath = await until(() => webhookPathOf(d.custom, ns), "the GitProvider's webhook path");
    const remove = d.git.addWebhook({
      url: `${d.running.gateway!.url("http")}${webhookPath}`,
      secret: hookToken,
    });
    d.cleanups.push(async () => remove());
    await until(async () => (await greeting(ns)) === "hello", kind.firstApply);
    const start = (await d.git.tip(repo))!;
    return { ns, repo, repoUrl, applier: ns, intakeToken, file, start };
  }

  /** Commits on main since the scene was ready, newest first. */
  const commitsSince = async (s: Scene) =>
    (await gitOk(["--git-dir", join(d.git.root, `${s.repo}.git`), "log", "--format=%H", `${s.start}..main`]))
      .split("\n")
      .filter(Boolean);

  /** The API edit itself: the ConfigMap's greeting set by "user"; answers when it was made. */
  async function clusterEdit(s: Scene, value: string): Promise<string> {
    const written: V1ConfigMap = await d.core.patchNamespacedConfigMap(
      {
        name: "web",
        namespace: s.ns,
        body: {
          apiVersion: "v1",
          kind: "ConfigMap",
          metadata: { name: "web", namespace: s.ns },
          data: { greeting: value },
        },
        fieldManager: USER,
        force: true,
      },
      APPLY,
    );
    const time = written.metadata?.managedFields?.find((m) => m.manager === USER)?.time;
    return time ? new Date(time).toISOString() : new Date().toISOString();
  }

  /** The tool that made an edit reports it to the intake API as a save; answers its commit. */
  async function report(s: Scene, value: string, editedAt: string): Promise<string> {
    const res = await fetch(
      `${d.running.gateway!.url("http")}/v1/targets/${s.ns}/web/writes?wait=published&timeout=30`,
      {
        method: "POST",
        headers: { authorization: `Bearer ${s.intakeToken}`, "content-type": "application/json" },
        body: JSON.stringify({
          changes: [
            {
              op: "upsert",
              object: {
                apiVersion: "v1",
                kind: "ConfigMap",
                metadata: { name: "web", namespace: s.ns },
                data: { greeting: value },
              },
            },
          ],
          author: { name: USER, email: `${USER}@example.com` },
          message: `web: greeting ${value}`,
          save: true,
          editedAt,
        }),
      },
    );
    const body = (await res.json()) as { commit?: string; published?: boolean };
    expect({ status: res.status, published: body.published }).toEqual({ status: 200, published: true });
    return body.commit!;
  }

  /** An API edit reported to the intake API as a save at once; answers its commit. */
  const edit = async (s: Scene, value: string) => report(s, value, await clusterEdit(s, value));

  /** Every value the ConfigMap's greeting takes, with the manager of its field, until stopped. */
  function record(s: Scene) {
    const seen: { value: string | undefined; manager: string | undefined }[] = [];
    let on = true;
    const loop = (async () => {
      while (on) {
        const cm = await d.core
          .readNamespacedConfigMap({ name: "web", namespace: s.ns })
          .catch(() => undefined);
        const value = cm?.data?.greeting;
        const manager = cm?.metadata?.managedFields?.find((m) =>
          JSON.stringify(m.fieldsV1 ?? {}).includes('"f:greeting"'),
        )?.manager;
        if (seen.at(-1)?.value !== value || seen.at(-1)?.manager !== manager) seen.push({ value, manager });
        await new Promise((r) => setTimeout(r, 50));
      }
    })();
    return {
      seen,
      async stop() {
        on = false;
        await loop;
      },
      /** Whether "green" was replaced by something an applier wrote. */
      revertedBy: () => {
        const i = seen.findIndex((x) => x.value === "green");
        return i < 0
          ? []
          : seen
              .slice(i + 1)
              .filter((x) => x.value !== "green")
              .map((x) => x.manager);
      },
    };
  }

  /** A clone of the scene's repository in the scratch folder. */
  async function clone(s: Scene): Promise<string> {
    const dir = join(d.work, `${s.ns}-${randomBytes(2).toString("hex")}`);
    await gitOk(["clone", "-q", s.repoUrl, dir]);
    return dir;
  }

  /** A commit by somebody else, pushed with git to the branch. */
  async function foreignPush(s: Scene, value: string): Promise<string> {
    const dir = await clone(s);
    const path = join(dir, s.file);
    await writeFile(path, (await readFile(path, "utf8")).replace(/greeting: \S+/, `greeting: ${value}`));
    await gitOk(
      ["-c", "user.name=Bob", "-c", "user.email=bob@example.com", "commit", "-qam", `greeting ${value}`],
      { cwd: dir },
    );
    await gitOk(["push", "-q", "origin", "HEAD:main"], { cwd: dir });
    return (await gitOk(["rev-parse", "HEAD"], { cwd: dir })).trim();
  }

  /**
   * The worker stopped (SIGTERM, as a rollout stops the pod: the branch is given back), a push
   * made while none runs, which the gateway acknowledges and nothing applies for 3 s, then the next
   * worker started; answers the pushed commit.
   */
  async function pushWhileNoWorker(s: Scene, value: string): Promise<string> {
    expect(await d.running.worker!.stop()).toBe(0);
    const pushed = await foreignPush(s, value);
    await new Promise((r) => setTimeout(r, 3_000));
    expect(await greeting(s.ns)).toBe("hello");
    d.running.worker = await startComponent(d.installed, "worker");
    return pushed;
  }

  /** The apply attempts every worker process sent for `commit`, read from their logs. */
  const attemptsSent = (commit: string) =>
    readdirSync(d.installed.dir)
      .filter((f) => /^worker-.*\.log$/.test(f))
      // Whole lines only: the last one may be half written.
      .flatMap((f) => readFileSync(join(d.installed.dir, f), "utf8").split("\n").slice(0, -1))
      .filter((l) => l.includes('"msg":"apply attempt sent"'))
      .map((l) => JSON.parse(l) as { commit?: string; token?: string })
      .filter((l) => l.commit === commit);

  return {
    d,
    open,
    read,
    annotate,
    claim,
    greeting,
    commitsSince,
    clusterEdit,
    report,
    edit,
    record,
    clone,
    foreignPush,
    pushWhileNoWorker,
    attemptsSent,
  };
}
