/**
 * A snapshot's prune sweep, end to end: the mirror under its own ServiceAccount and the RBAC the
 * manifests grant, against the simulated API server, hands its writes through the intake gate to a
 * branch worker that commits to a real Git server. Under `prune.mode: OnEvent` a snapshot deletes
 * nothing; once the rule says `Always`, the next snapshot deletes the file of an object gone live
 * that the rule selects, and leaves the files the rule does not select (another label, another
 * kind) and those of live objects.
 */
import { join } from "node:path";
import * as k8s from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { crdFiles } from "../../queue/crds/files.js";
import { silentLogger } from "../../queue/log.js";
import { Mirror } from "../../sidecar/mirror/mirror.js";
import { type ApiServer, startApiServer } from "../cluster/apiserver/index.js";
import { gitOk } from "../git/cli.js";
import { deployedIdentities } from "../playground/identities.js";
import { FOLDER, type Harness, harness, waitFor } from "../worker/harness.js";

const yaml = (...objs: object[]) => objs.map((o) => JSON.stringify(o)).join("\n---\n");
const cmFile = (name: string, labels: Record<string, string>) =>
  `apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ${name}\n  namespace: team\n  labels:\n${Object.entries(
    labels,
  )
    .map(([k, v]) => `    ${k}: ${v}\n`)
    .join("")}data:\n  a: "1"\n`;
const path = (kind: string, name: string) => `${FOLDER}/${kind}/team/${name}.yaml`;

const GONE = path("core/configmap", "gone");
const LIVE = path("core/configmap", "live");
const OTHER_RULES = path("core/configmap", "db");
const OTHER_KIND = path("apps/deployment", "web");

let api: ApiServer;
let h: Harness;
let mirror: Mirror;
let applied: string;

const rule = (mode: "OnEvent" | "Always") => ({
  apiVersion: "applygate.dev/v1alpha1",
  kind: "WatchRule",
  metadata: { name: "web", namespace: "team" },
  spec: {
    targetRef: { name: "site" },
    kinds: [{ group: "", version: "v1", kind: "ConfigMap" }],
    selector: { matchLabels: { app: "web" } },
    prune: { mode },
  },
});

beforeAll(async () => {
  h = await harness({
    "README.md": "hi\n",
    [GONE]: cmFile("gone", { app: "web" }),
    [LIVE]: cmFile("live", { app: "web" }),
    [OTHER_RULES]: cmFile("db", { app: "db" }),
    [OTHER_KIND]:
      "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: team\n  labels:\n    app: web\n",
  });
  await h.newWorker();
  api = await startApiServer({ bookmarkIntervalMs: 200 });
  for (const f of crdFiles()) await api.installCrdFile(f);
  const deployed = deployedIdentities();
  await api.applyYaml(
    yaml(
      ...["applygate-system", "team"].map((name) => ({
        apiVersion: "v1",
        kind: "Namespace",
        metadata: { name },
      })),
    ),
  );
  await api.applyYaml(yaml(...deployed.rbac));
  await api.applyYaml(
    yaml(
      {
        apiVersion: "applygate.dev/v1alpha1",
        kind: "GitProvider",
        metadata: { name: "gp", namespace: "team" },
        spec: { url: h.url, type: "github", webhookSecretRef: { name: "hook" } },
      },
      {
        apiVersion: "applygate.dev/v1alpha1",
        kind: "GitTarget",
        metadata: { name: "site", namespace: "team" },
        spec: {
          providerRef: { name: "gp" },
          branch: "main",
          path: FOLDER,
          claimRef: { kind: "FluxClaim", name: "apps" },
        },
      },
      {
        apiVersion: "applygate.dev/v1alpha1",
        kind: "FluxClaim",
        metadata: { name: "apps", namespace: "team" },
        spec: { kustomizationRef: { name: "apps", namespace: "team" } },
      },
      {
        apiVersion: "v1",
        kind: "ConfigMap",
        metadata: { name: "live", namespace: "team", labels: { app: "web" } },
        data: { a: "2" },
      },
      rule("OnEvent"),
    ),
  );
  // The applier applied the repository as it starts: a sweep deletes only files Git held then.
  applied = (await gitOk(["rev-parse", "refs/heads/main"], { cwd: join(h.server.root, "site.git") })).trim();
  await api
    .kubeConfig()
    .makeApiClient(k8s.CustomObjectsApi)
    .patchNamespacedCustomObjectStatus(
      {
        group: "applygate.dev",
        version: "v1alpha1",
        namespace: "team",
        plural: "fluxclaims",
        name: "apps",
        body: { status: { lastAppliedCommit: applied } },
      },
      k8s.setHeaderOptions("Content-Type", k8s.PatchStrategy.MergePatch),
    );
  const sa = deployed.serviceAccounts.mirror;
  mirror = new Mirror({
    kubeConfig: api.kubeConfig(api.addServiceAccount(sa.namespace, sa.name)),
    redisUrl: h.redis.url,
    redisPrefix: h.redis.prefix,
    log: silentLogger(),
    resolveIntervalMs: 100,
    statusIntervalMs: 50,
  });
  await mirror.start();
});

afterAll(async () => {
  await mirror?.stop();
  await h?.close();
  await api?.close();
});

describe("prune after a snapshot", () => {
  it("OnEvent deletes nothing; Always deletes the gone object's file the rule selects, and nothing else", async () => {
    // The snapshot under OnEvent: the live object's difference is committed, the gone file stays.
    await waitFor("the live ConfigMap's snapshot in Git", async () =>
      (await h.file(LIVE))?.includes('a: "2"'),
    );
    await mirror.idle();
    expect(mirror.sent.some((w) => w.sweep)).toBe(false);
    expect(await h.file(GONE)).toBeDefined();

    // The rule changes to Always: its snapshot sweeps.
    const custom = api.kubeConfig().makeApiClient(k8s.CustomObjectsApi);
    await custom.patchNamespacedCustomObject(
      {
        group: "applygate.dev",
        version: "v1alpha1",
        namespace: "team",
        plural: "watchrules",
        name: "web",
        body: { spec: { prune: { mode: "Always" } } },
      },
      k8s.setHeaderOptions("Content-Type", k8s.PatchStrategy.MergePatch),
    );
    await waitFor("the gone object's file deleted", async () => (await h.file(GONE)) === undefined);
    expect(await h.file(LIVE)).toContain('a: "2"');
    expect(await h.file(OTHER_RULES)).toBeDefined(); // not selected by this rule
    expect(await h.file(OTHER_KIND)).toBeDefined(); // a kind the rule does not select
    const sweep = mirror.sent.find((w) => w.sweep);
    expect(sweep?.sweep).toMatchObject({
      kind: "ConfigMap",
      namespaces: ["team"],
      live: ["team/live"],
      appliedCommit: applied,
    });
    // Through the same intake gate and into a commit of its own.
    await waitFor("the sweep published", async () => (await h.published(sweep!.id)) !== null);
    expect(await h.inboxLength()).toBe(0);
    // The sweep is not a mirrored object: the rule counts the snapshot's writes alone.
    expect(mirror.ruleStates().get("team/web")?.mirrored).toBe(mirror.sent.filter((w) => !w.sweep).length);
  });
});
