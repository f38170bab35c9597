/**
 * What people and tools do to the playground, shared by the race and the scenarios: an API edit
 * (made on the cluster as the field manager "user", then mirrored into Git through the gateway's
 * intake API with its `editedAt`), a Git push by somebody else, and reads of what the cluster,
 * Git and the appliers hold.
 */
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import * as k8s from "@kubernetes/client-node";
import { git, gitOk } from "../git/cli.js";
import { GitPeer } from "../git/peer.js";
import { untilWith } from "../support/wait.js";
import type { Assembly } from "./assembly.js";
import {
  ARGOCD_NAMESPACE,
  DEMO_APPLIERS,
  DEMO_NAMESPACE,
  DEMO_REPO,
  DEMO_TARGETS,
  demoConfigMap,
  demoConfigPath,
  FLUX_NAMESPACE,
  INTAKE_TOKEN,
  PLAYGROUND_APPS,
  type PlaygroundApp,
} from "./demo.js";

/** The field manager API edits are made with: somebody editing through the Kubernetes API. */
export const USER_MANAGER = "user";

const APPLY = k8s.setHeaderOptions("Content-Type", k8s.PatchStrategy.ServerSideApply);

export const until = untilWith({ timeoutMs: 30_000, everyMs: 25, retryErrors: true });

export interface WriteAnswer {
  status: number;
  body: { id?: string; published?: boolean; commit?: string; error?: string };
}

/** Posts a write to a GitTarget through the gateway's intake API. */
export async function postWrite(
  a: Assembly,
  app: PlaygroundApp,
  body: Record<string, unknown>,
  opts: { wait?: boolean } = {},
): Promise<WriteAnswer> {
  const target = DEMO_TARGETS[app];
  const q = opts.wait === false ? "" : "?wait=published&timeout=30";
  const res = await fetch(`${a.gateway.url}/v1/targets/${DEMO_NAMESPACE}/${target}/writes${q}`, {
    method: "POST",
    headers: { authorization: `Bearer ${INTAKE_TOKEN}`, "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json().catch(() => ({}))) as WriteAnswer["body"] };
}

/**
 * An API edit: the demo ConfigMap's greeting set on the cluster by "user", and at the same moment
 * the write reported to the gateway (by default a save: a commit boundary; `save: false` lets it join
 * the open commit window). Resolves with the intake's answer.
 */
export async function apiEdit(
  a: Assembly,
  app: PlaygroundApp,
  greeting: string,
  opts: { wait?: boolean; author?: string; save?: boolean } = {},
): Promise<WriteAnswer> {
  const object = demoConfigMap(app, { greeting });
  const core = a.kubeConfig.makeApiClient(k8s.CoreV1Api);
  const written = await core.patchNamespacedConfigMap(
    {
      name: PLAYGROUND_APPS[app].name,
      namespace: PLAYGROUND_APPS[app].namespace,
      body: object,
      fieldManager: USER_MANAGER,
      force: true,
    },
    APPLY,
  );
  const editedAt = editTime(written) ?? new Date().toISOString();
  return postWrite(
    a,
    app,
    {
      changes: [{ op: "upsert", object }],
      author: { name: opts.author ?? "user", email: `${opts.author ?? "user"}@example.com` },
      message: `${app}: set greeting to ${greeting}`,
      save: opts.save ?? true,
      editedAt,
    },
    opts,
  );
}

/**
 * An API edit with nobody posting it to the intake API: the demo ConfigMap's greeting set on the
 * cluster by "user", for the watch plane to mirror.
 */
export async function clusterEdit(a: Assembly, app: PlaygroundApp, greeting: string): Promise<void> {
  const core = a.kubeConfig.makeApiClient(k8s.CoreV1Api);
  await core.patchNamespacedConfigMap(
    {
      name: PLAYGROUND_APPS[app].name,
      namespace: PLAYGROUND_APPS[app].namespace,
      body: demoConfigMap(app, { greeting }),
      fieldManager: USER_MANAGER,
      force: true,
    },
    APPLY,
  );
}

/** Commits on the branch after `from` that change the demo file of `app`, oldest first. */
export async function commitsTouching(a: Assembly, from: string, app: PlaygroundApp): Promise<string[]> {
  const out = await gitOk([
    "--git-dir",
    repoDir(a),
    "log",
    "--reverse",
    "--format=%H",
    `${from}..${a.demo.branch}`,
    "--",
    demoConfigPath(app),
  ]);
  return out.split("\n").filter(Boolean);
}

/** The time the user's managedFields entry records (whole seconds, as the server writes it). */
function editTime(o: k8s.V1ConfigMap): string | undefined {
  const entry = o.metadata?.managedFields?.find((m) => m.manager === USER_MANAGER);
  return entry?.time ? new Date(entry.time).toISOString() : undefined;
}

export interface ClusterValue {
  greeting: string | undefined;
  /** The field manager that owns data.greeting now. */
  manager: string | undefined;
  resourceVersion: string | undefined;
}

/** The demo ConfigMap's greeting on the cluster, and who wrote it. */
export async function clusterValue(a: Assembly, app: PlaygroundApp): Promise<ClusterValue> {
  const core = a.kubeConfig.makeApiClient(k8s.CoreV1Api);
  const cm = await core.readNamespacedConfigMap({
    name: PLAYGROUND_APPS[app].name,
    namespace: PLAYGROUND_APPS[app].namespace,
  });
  const owner = cm.metadata?.managedFields?.find((m) =>
    JSON.stringify(m.fieldsV1 ?? {}).includes('"f:greeting"'),
  )?.manager;
  return { greeting: cm.data?.greeting, manager: owner, resourceVersion: cm.metadata?.resourceVersion };
}

/*
 * Reads of Git that waits poll (every 25 ms, for several apps at once) answer from memory when
 * nothing moved: the branch's ref is read from its file, and what a commit holds is fixed by its
 * id. Spawning the git CLI for every probe made the waits themselves the heaviest load of the
 * process (30 to 50 spawns a second, the event loop busy all the time) exactly while the worker
 * it waits on commits and pushes in that process, which on a loaded machine took the worker past
 * the waits' bounds.
 */
const fileByCommit = new Map<string, string | undefined>();
const ancestry = new Map<string, boolean>();
const remember = <K, V>(m: Map<K, V>, k: K, v: V) => {
  if (m.size > 10_000) m.clear();
  m.set(k, v);
};

/** The branch's tip from its ref file (what receive-pack writes), else from the git CLI. */
async function branchTip(a: Assembly): Promise<string | undefined> {
  const ref = await readFile(join(repoDir(a), "refs", "heads", a.demo.branch), "utf8").catch(() => "");
  return /^[0-9a-f]{40}$/.test(ref.trim()) ? ref.trim() : a.git.tip(DEMO_REPO, a.demo.branch);
}

/** The greeting the demo file holds at the tip of the branch. */
export async function gitValue(a: Assembly, app: PlaygroundApp): Promise<string | undefined> {
  const at = await branchTip(a);
  const key = `${repoDir(a)} ${at} ${demoConfigPath(app)}`;
  let text = at ? fileByCommit.get(key) : undefined;
  if (text === undefined) {
    text = await gitOk(["--git-dir", repoDir(a), "show", `${at ?? a.demo.branch}:${demoConfigPath(app)}`]);
    if (at) remember(fileByCommit, key, text);
  }
  return /greeting: (.*)/.exec(text)?.[1]?.trim();
}

const repoDir = (a: Assembly) => join(a.git.root, `${DEMO_REPO}.git`);

export async function tip(a: Assembly): Promise<string> {
  return (await a.git.tip(DEMO_REPO, a.demo.branch)) as string;
}

/** Whether `commit` holds `ancestor` (is it or descends from it), in the demo repository. */
export async function holds(
  a: Assembly,
  commit: string | undefined,
  ancestor: string | undefined,
): Promise<boolean> {
  if (!commit || !ancestor) return false;
  if (commit === ancestor) return true;
  const key = `${repoDir(a)} ${ancestor} ${commit}`;
  const known = ancestry.get(key);
  if (known !== undefined) return known;
  const { code } = await git(["--git-dir", repoDir(a), "merge-base", "--is-ancestor", ancestor, commit]);
  // 0: it holds it, 1: it does not, for good; anything else (a commit not here yet) is asked again.
  if (code === 0 || code === 1) remember(ancestry, key, code === 0);
  return code === 0;
}

/** Commits on the branch after `from`, oldest first, as `sha subject`. */
export async function commitsSince(
  a: Assembly,
  from: string,
): Promise<Array<{ sha: string; subject: string }>> {
  const out = await gitOk([
    "--git-dir",
    repoDir(a),
    "log",
    "--reverse",
    "--format=%H %s",
    `${from}..${a.demo.branch}`,
  ]);
  return out
    .split("\n")
    .filter(Boolean)
    .map((l) => ({ sha: l.slice(0, 40), subject: l.slice(41) }));
}

/** Somebody pushes to the branch with the git CLI (a foreign commit). */
export async function foreignPush(a: Assembly, app: PlaygroundApp, greeting: string): Promise<string> {
  const peer = await GitPeer.clone(a.demo.repoUrl, a.demo.branch);
  try {
    const { objectYaml } = await import("../../queue/git/layout.js");
    return await peer.commitAndPush(
      demoConfigPath(app),
      objectYaml(demoConfigMap(app, { greeting })),
      `greeting ${greeting} (pushed to Git)`,
    );
  } finally {
    await peer.remove();
  }
}

const custom = (a: Assembly) => a.kubeConfig.makeApiClient(k8s.CustomObjectsApi);
type Obj = {
  metadata?: Record<string, unknown>;
  spec?: Record<string, unknown>;
  status?: Record<string, unknown>;
};

/** The revision the Flux GitRepository's artifact holds (its commit id), once fetched. */
export async function fluxArtifactCommit(a: Assembly): Promise<string | undefined> {
  const repo = (await custom(a).getNamespacedCustomObject({
    group: "source.toolkit.fluxcd.io",
    version: "v1",
    plural: "gitrepositories",
    namespace: FLUX_NAMESPACE,
    name: "demo",
  })) as Obj;
  const rev = (repo.status?.artifact as { revision?: string } | undefined)?.revision;
  return rev?.split(":").pop();
}

/** The commit Argo CD's last comparison of the Application resolved the branch to. */
export async function argoComparedCommit(a: Assembly): Promise<string | undefined> {
  const app = (await custom(a).getNamespacedCustomObject({
    group: "argoproj.io",
    version: "v1alpha1",
    plural: "applications",
    namespace: ARGOCD_NAMESPACE,
    name: DEMO_APPLIERS.argocd.name,
  })) as Obj;
  return (app.status?.sync as { revision?: string } | undefined)?.revision;
}

/** Applies the applier has completed, oldest first, as commit ids. */
export function appliedCommits(a: Assembly, app: PlaygroundApp): string[] {
  if (app === "webhook") return [...a.deployer.applies];
  if (app === "flux") {
    return a.flux.appliedRevisions(DEMO_APPLIERS.flux).map((r) => r.split(":").pop() as string);
  }
  return a.argo
    .syncs({ namespace: ARGOCD_NAMESPACE, name: DEMO_APPLIERS.argocd.name })
    .map((s) => s.revision);
}

const CLAIM_PLURALS: Record<PlaygroundApp, string> = {
  flux: "fluxclaims",
  argocd: "argocdclaims",
  webhook: "webhookclaims",
};

/** A claim as the cluster holds it. */
export async function readClaim(a: Assembly, app: PlaygroundApp): Promise<Obj | undefined> {
  return (await custom(a)
    .getNamespacedCustomObject({
      group: "applygate.dev",
      version: "v1alpha1",
      plural: CLAIM_PLURALS[app],
      namespace: DEMO_NAMESPACE,
      name: DEMO_TARGETS[app],
    })
    .catch(() => undefined)) as Obj | undefined;
}

const condition = (o: Obj | undefined, type: string) =>
  ((o?.status?.conditions ?? []) as Array<{ type: string; status: string }>).find((c) => c.type === type)
    ?.status;

/**
 * Waits until the claims hold their appliers and the converge at the start applied the tip: the
 * state every scenario starts from (Flux's and Argo CD's claims unless `apps` names others).
 */
export async function settled(
  a: Assembly,
  timeoutMs = 30_000,
  apps: readonly PlaygroundApp[] = ["flux", "argocd"],
): Promise<string> {
  const head = await tip(a);
  for (const app of apps) {
    await until(
      async () => {
        const c = await readClaim(a, app);
        return condition(c, "InControl") === "True" && c?.status?.lastAppliedCommit === head;
      },
      `the ${app} claim to hold its applier at ${head.slice(0, 8)}`,
      timeoutMs,
    );
  }
  return head;
}

export async function deleteClaims(a: Assembly): Promise<void> {
  for (const app of ["flux", "argocd"] as const) {
    await custom(a)
      .deleteNamespacedCustomObject({
        group: "applygate.dev",
        version: "v1alpha1",
        plural: app === "flux" ? "fluxclaims" : "argocdclaims",
        namespace: DEMO_NAMESPACE,
        name: app === "flux" ? "flux-app" : "argo-app",
      })
      .catch(() => undefined);
  }
}

/** A value the demo ConfigMap's greeting took on the cluster, and who wrote it. */
export interface ValueSample {
  at: number;
  value: string | undefined;
  manager?: string | undefined;
}

/** Every value the app's ConfigMap takes on the cluster, from a watch (each resourceVersion). */
export async function watchValue(
  kc: k8s.KubeConfig,
  app: PlaygroundApp,
  into: ValueSample[],
): Promise<() => void> {
  const { namespace, name } = PLAYGROUND_APPS[app];
  let stopped = false;
  let req: { abort(): void } | undefined;
  const seen = (cm: k8s.V1ConfigMap | undefined) => {
    const value = cm?.data?.greeting;
    if (into.length && into[into.length - 1]?.value === value) return;
    const manager = cm?.metadata?.managedFields?.find((m) =>
      JSON.stringify(m.fieldsV1 ?? {}).includes('"f:greeting"'),
    )?.manager;
    into.push({ at: Date.now(), value, manager });
  };
  const core = kc.makeApiClient(k8s.CoreV1Api);
  const start = async (): Promise<void> => {
    if (stopped) return;
    const list = await core.listNamespacedConfigMap({ namespace, fieldSelector: `metadata.name=${name}` });
    seen(list.items[0]);
    req = await new k8s.Watch(kc).watch(
      `/api/v1/namespaces/${namespace}/configmaps`,
      { fieldSelector: `metadata.name=${name}`, resourceVersion: list.metadata?.resourceVersion },
      (type, obj: k8s.V1ConfigMap) => {
        if (type === "DELETED") seen(undefined);
        else if (type === "ADDED" || type === "MODIFIED") seen(obj);
      },
      () => {
        // The watch ended (a timeout or a 410): list again and go on, as an informer does.
        if (!stopped) void start().catch(() => {});
      },
    );
  };
  await start();
  return () => {
    stopped = true;
    req?.abort();
  };
}
