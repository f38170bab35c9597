import { execFile } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Writable } from "node:stream";
import { promisify } from "node:util";
import {
  ApiException,
  CoreV1Api,
  CustomObjectsApi,
  PatchStrategy,
  setHeaderOptions,
} from "@kubernetes/client-node";
import pino from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { crdFiles } from "../queue/crds/files.js";
import { RESOURCES } from "../queue/kube/index.js";
import { type ApiServer, type AuthRule, startApiServer } from "../test/cluster/apiserver/index.js";
import { KUBECTL_AVAILABLE } from "../test/manifests/kustomize.js";
import { fixtureYaml, NS, pathOf, SECRETS } from "../test/support/gateway.js";
import { untilWith } from "../test/support/wait.js";
import { ClusterCatalog, type RefreshTimer } from "./catalog-cluster.js";
import { hookPath } from "./verify.js";

const until = untilWith({ timeoutMs: 10_000, everyMs: 10 });

/** The refresh interval, fired by hand. */
class ManualTimer implements RefreshTimer {
  intervalMs: number | undefined;
  #tick: (() => Promise<void>) | undefined;
  every(ms: number, tick: () => Promise<void>): () => void {
    this.intervalMs = ms;
    this.#tick = tick;
    return () => {
      this.#tick = undefined;
    };
  }
  fire(): Promise<void> {
    if (!this.#tick) throw new Error("no refresh scheduled");
    return this.#tick();
  }
}

/** JSON log lines, to check what is logged about unreadable Secrets. */
function capturingLogger() {
  const lines: Record<string, any>[] = [];
  const stream = new Writable({
    write(chunk, _enc, done) {
      for (const l of String(chunk).split("\n")) if (l) lines.push(JSON.parse(l));
      done();
    },
  });
  return { log: pino({ level: "info" }, stream), lines };
}

const secretYaml = (namespace: string, name: string, token: string) =>
  `apiVersion: v1\nkind: Secret\nmetadata: {name: ${name}, namespace: ${namespace}}\ndata: {token: ${Buffer.from(token).toString("base64")}}\n`;

const providerYaml = (namespace: string, name: string, secret: string) =>
  `apiVersion: applygate.dev/v1alpha1\nkind: GitProvider\nmetadata: {name: ${name}, namespace: ${namespace}}\nspec: {url: "https://git.example.com/${namespace}/${name}.git", type: generic-hmac, webhookSecretRef: {name: ${secret}}}\n`;

/** What the deployed RBAC gives the gateway: our kinds everywhere, `get` on Secrets in NS only. */
const LEAST_PRIVILEGE: AuthRule[] = [
  { verbs: ["get", "list", "watch"], groups: ["applygate.dev"], resources: ["gitproviders", "gittargets"] },
  { verbs: ["get"], groups: [""], resources: ["secrets"], namespaces: [NS] },
  { verbs: ["patch"], groups: ["applygate.dev"], resources: ["gitproviders/status"] },
  { verbs: ["get", "list", "watch"], groups: [""], resources: ["namespaces"] },
];
const GATEWAY_TOKEN = "gateway-token";
const PROVIDERS_PATH = "/apis/applygate.dev/v1alpha1/gitproviders";

describe("cluster catalog with only get on Secrets", () => {
  let server: ApiServer;
  let catalog: ClusterCatalog;
  const timer = new ManualTimer();
  const { log, lines } = capturingLogger();
  const ready = (token: string, name: string, namespace = NS) =>
    catalog.snapshot().providerByHookPath(hookPath(token, name, namespace)) !== undefined;
  const unreadableLogs = (secret: string) => lines.filter((l) => l.secret === secret && l.level === 40);
  const watchFailures = (path: string) =>
    lines.filter((l) => l.path === path && l.msg === "watch failed; retrying").length;

  beforeAll(async () => {
    server = await startApiServer({ bookmarkIntervalMs: 100 });
    for (const f of crdFiles()) await server.installCrdFile(f);
    await server.applyYaml(
      `apiVersion: v1\nkind: Namespace\nmetadata: {name: ${NS}}\n---\napiVersion: v1\nkind: Namespace\nmetadata: {name: team-b}\n`,
    );
    await server.applyYaml(fixtureYaml());
    // A namespace that did not opt in: its Secret exists but the gateway may not read it.
    await server.applyYaml(secretYaml("team-b", "other-webhook", "other-token"));
    await server.applyYaml(providerYaml("team-b", "other", "other-webhook"));
    server.addUser("gateway", GATEWAY_TOKEN, LEAST_PRIVILEGE);
    catalog = await ClusterCatalog.start({
      kubeConfig: server.kubeConfig("gateway"),
      log,
      timer,
      secretRefreshMs: 5_000,
      backoffMs: 20,
    });
  });
  afterAll(async () => {
    await catalog?.close();
    await server?.close();
  });

  it("loads with that identity, which cannot list Secrets", async () => {
    const core = server.kubeConfig("gateway").makeApiClient(CoreV1Api);
    const denied = await core.listNamespacedSecret({ namespace: NS }).catch((e: unknown) => e);
    expect(denied).toBeInstanceOf(ApiException);
    expect((denied as ApiException<unknown>).code).toBe(403);

    expect(catalog.loaded()).toBe(true);
    expect(timer.intervalMs).toBe(5_000);
    const snap = catalog.snapshot();
    expect(snap.providerByHookPath(pathOf(SECRETS.gitlab, "gitlab"))?.type).toBe("gitlab");
    expect(snap.providerByHookPath(pathOf(SECRETS.github, "github"))?.type).toBe("github");
    expect(snap.target(NS, "infra")).toMatchObject({
      intakeToken: SECRETS.intakeToken,
      intakeHmacKey: SECRETS.intakeHmac,
    });
  });

  it("leaves only the provider whose Secret it may not read not ready, logging it once without the value", async () => {
    const other = catalog.snapshot().providers.find((p) => p.namespace === "team-b")!;
    expect(other.name).toBe("other");
    expect(other.hookPath).toBeUndefined();
    expect(ready(SECRETS.github, "github")).toBe(true);

    await timer.fire();
    await timer.fire();
    const logged = unreadableLogs("team-b/other-webhook");
    expect(logged).toHaveLength(1);
    expect(logged[0]).toMatchObject({ status: 403, usedBy: ["GitProvider team-b/other"] });
    // The missing Secret of the fixture's "nosecret" provider: 404, also once.
    expect(unreadableLogs(`${NS}/nosecret-webhook`)).toMatchObject([{ status: 404 }]);
    expect(JSON.stringify(lines)).not.toContain("other-token");

    // The namespace opts in: the next refresh reads it.
    server.addUser("gateway", GATEWAY_TOKEN, [
      ...LEAST_PRIVILEGE,
      { verbs: ["get"], groups: [""], resources: ["secrets"], namespaces: ["team-b"] },
    ]);
    await timer.fire();
    await until(() => ready("other-token", "other", "team-b"), "access granted");
  });

  it("writes each GitProvider's status: Ready with its webhook path, or why not", async () => {
    const custom = server.kubeConfig().makeApiClient(CustomObjectsApi);
    const statusOf = async (namespace: string, name: string) =>
      (
        (await custom.getNamespacedCustomObject({
          group: "applygate.dev",
          version: "v1alpha1",
          plural: "gitproviders",
          namespace,
          name,
        })) as {
          status?: { webhookPath?: string; conditions?: { type: string; status: string; reason: string }[] };
        }
      ).status;
    const github = await until(async () => {
      const st = await statusOf(NS, "github");
      return st?.webhookPath ? st : undefined;
    }, "github's status");
    expect(github?.webhookPath).toBe(pathOf(SECRETS.github, "github"));
    expect(github?.conditions).toMatchObject([
      { type: "Ready", status: "True", reason: "WebhookReady" },
      { type: "Accepted", status: "True", reason: "Accepted" },
    ]);
    if (KUBECTL_AVAILABLE) {
      // What docs/install.md tells the user to run.
      const dir = mkdtempSync(join(tmpdir(), "applygate-catalog-"));
      try {
        await server.writeKubeconfig(join(dir, "kubeconfig"));
        // Asynchronously: the simulated API server answers from this process.
        const { stdout: out } = await promisify(execFile)(
          "kubectl",
          [
            "--kubeconfig",
            join(dir, "kubeconfig"),
            "-n",
            NS,
            "wait",
            "--for=condition=Ready",
            "gitprovider/github",
            "--timeout=20s",
          ],
          { encoding: "utf8", timeout: 30_000 },
        );
        expect(out).toMatch(/gitprovider.* condition met/);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    }
    const missing = await until(() => statusOf(NS, "nosecret"), "nosecret's status");
    expect(missing?.webhookPath).toBeUndefined();
    expect(missing?.conditions).toMatchObject([
      { type: "Ready", status: "False", reason: "SecretNotFound" },
      { type: "Accepted", status: "True", reason: "Accepted" },
    ]);
    // A Secret created later turns it Ready on the next refresh, with its path.
    await server.applyYaml(secretYaml(NS, "nosecret-webhook", "late-token"));
    await timer.fire();
    await until(
      async () => (await statusOf(NS, "nosecret"))?.webhookPath === hookPath("late-token", "nosecret", NS),
      "nosecret Ready",
    );
    expect((await statusOf(NS, "nosecret"))?.conditions).toMatchObject([
      { type: "Ready", status: "True" },
      { type: "Accepted", status: "True" },
    ]);
  });

  it("takes a rotated Secret on the next refresh, and keeps the last value through a server error", async () => {
    await server.applyYaml(secretYaml(NS, "gitlab-webhook", "rotated-1"));
    // No watch on Secrets: nothing changes until the refresh.
    await new Promise((r) => setImmediate(r));
    expect(ready(SECRETS.gitlab, "gitlab")).toBe(true);
    await timer.fire();
    await until(() => ready("rotated-1", "gitlab"), "rotation");
    expect(ready(SECRETS.gitlab, "gitlab")).toBe(false);

    server.faults.failNext(1, { status: 500, pathPrefix: `/api/v1/namespaces/${NS}/secrets/gitlab-webhook` });
    await timer.fire();
    await new Promise((r) => setImmediate(r));
    expect(ready("rotated-1", "gitlab")).toBe(true);
    expect(unreadableLogs(`${NS}/gitlab-webhook`)).toMatchObject([{ status: 500 }]);
  });

  it("reads a newly named Secret at once, and a Secret created after its provider on the next refresh", async () => {
    await server.applyYaml(secretYaml(NS, "early-webhook", "early-token"));
    await server.applyYaml(providerYaml(NS, "early", "early-webhook"));
    await until(() => ready("early-token", "early"), "newly named Secret read without a refresh");

    await server.applyYaml(providerYaml(NS, "late", "late-webhook"));
    await until(() => catalog.snapshot().providers.some((p) => p.name === "late"), "late provider");
    await until(() => unreadableLogs(`${NS}/late-webhook`).length === 1, "404 logged");
    expect(unreadableLogs(`${NS}/late-webhook`)[0]).toMatchObject({ status: 404 });
    await server.applyYaml(secretYaml(NS, "late-webhook", "late-token"));
    await timer.fire();
    await until(() => ready("late-token", "late"), "Secret created late");

    // A provider that switches to another Secret is ready with it at once.
    await server.applyYaml(providerYaml(NS, "early", "late-webhook"));
    await until(() => ready("late-token", "early"), "switched Secret");
    expect(ready("early-token", "early")).toBe(false);
  });

  it("keeps watching GitProviders through broken watches and failed lists", async () => {
    server.faults.dropWatches("", true);
    await server.applyYaml(secretYaml(NS, "after-drop-webhook", "after-drop"));
    await server.applyYaml(providerYaml(NS, "after-drop", "after-drop-webhook"));
    await until(() => ready("after-drop", "after-drop"), "after drop");

    // The layer's informer of GitProviders, the one the catalog holds.
    const providers = catalog.kube.informer(RESOURCES.gitProvider);
    const failuresBefore = watchFailures(PROVIDERS_PATH);
    server.faults.failNext(3, { status: 500, pathPrefix: PROVIDERS_PATH });
    server.faults.dropWatches("", true);
    await server.applyYaml(providerYaml(NS, "after-errors", "after-drop-webhook"));
    await until(() => ready("after-drop", "after-errors"), "after errors");
    // Restarted after each error.
    expect(watchFailures(PROVIDERS_PATH)).toBeGreaterThan(failuresBefore);

    // While the re-watch is held back a provider is created and the server forgets its history:
    // the re-watch is answered 410 and the informer lists again.
    const listsBefore = providers.informer.lists;
    server.faults.latency(300, { method: "GET", pathPrefix: PROVIDERS_PATH });
    expect(server.faults.dropWatches(PROVIDERS_PATH)).toBe(1);
    await server.applyYaml(providerYaml(NS, "after-expiry", "after-drop-webhook"));
    server.faults.expireHistory();
    await until(() => providers.informer.lists > listsBefore, "a relist after 410");
    server.faults.latency(0);
    await until(() => ready("after-drop", "after-expiry"), "after expiry");
    await providers.release();
    expect(catalog.kube.informers.running()).toContain(PROVIDERS_PATH);
  });

  it("watches one informer per kind from the cluster-access layer, and no Secrets", () => {
    expect([...catalog.kube.informers.running()].sort()).toEqual(
      [
        "/apis/applygate.dev/v1alpha1/gitproviders",
        "/apis/applygate.dev/v1alpha1/gittargets",
        "/apis/applygate.dev/v1alpha1/scopegrants",
        "/apis/applygate.dev/v1alpha1/webhookclaims",
        "/api/v1/namespaces",
      ].sort(),
    );
  });

  it("knows each namespace's Pod Security level from its labels, as they change", async () => {
    expect(catalog.snapshot().podSecurityLevel(NS)).toBe("baseline");
    const label = (level: string) =>
      server.applyYaml(
        `apiVersion: v1\nkind: Namespace\nmetadata: {name: ${NS}, labels: {pod-security.kubernetes.io/enforce: ${level}}}\n`,
      );
    await label("privileged");
    await until(() => catalog.snapshot().podSecurityLevel(NS) === "privileged", "the label read");
    await label("restricted");
    await until(() => catalog.snapshot().podSecurityLevel(NS) === "restricted", "the new label read");
    expect(catalog.snapshot().podSecurityLevel("team-b")).toBe("baseline");
    expect(catalog.snapshot().podSecurityLevel("no-such-namespace")).toBe("baseline");
  });

  it("reads no Secret of a namespace being deleted, whose RoleBindings go in no set order, and keeps its last value", async () => {
    const access = [
      ...LEAST_PRIVILEGE,
      { verbs: ["get"], groups: [""], resources: ["secrets"], namespaces: ["team-b", "team-c"] },
    ];
    server.addUser("gateway", GATEWAY_TOKEN, access);
    await server.applyYaml(`apiVersion: v1\nkind: Namespace\nmetadata: {name: team-c}\n`);
    await server.applyYaml(secretYaml("team-c", "hook", "c-token"));
    // A finalizer keeps the provider, and so the namespace, while the rest of its content goes.
    await server.applyYaml(
      providerYaml("team-c", "c", "hook").replace(
        "metadata: {",
        "metadata: {finalizers: [example.com/hold], ",
      ),
    );
    await until(() => ready("c-token", "c", "team-c"), "team-c's provider ready");

    const admin = server.kubeConfig();
    await admin.makeApiClient(CoreV1Api).deleteNamespace({ name: "team-c" });
    // The namespace's RoleBinding goes with the rest of its content.
    server.addUser("gateway", GATEWAY_TOKEN, access.slice(0, -1));
    const namespaces = catalog.kube.namespaceInformer();
    try {
      await until(
        () => namespaces.informer.get("team-c")?.metadata.deletionTimestamp !== undefined,
        "the catalog to see team-c terminating",
      );
    } finally {
      await namespaces.release();
    }
    await timer.fire();
    expect(unreadableLogs("team-c/hook")).toEqual([]);
    expect(ready("c-token", "c", "team-c")).toBe(true);

    // The provider goes once its finalizer does, and the namespace with it.
    const custom = admin.makeApiClient(CustomObjectsApi);
    await custom.patchNamespacedCustomObject(
      {
        group: "applygate.dev",
        version: "v1alpha1",
        plural: "gitproviders",
        namespace: "team-c",
        name: "c",
        body: [{ op: "remove", path: "/metadata/finalizers" }],
      },
      setHeaderOptions("Content-Type", PatchStrategy.JsonPatch),
    );
    await until(() => !ready("c-token", "c", "team-c"), "team-c's provider gone");
    expect(unreadableLogs("team-c/hook")).toEqual([]);
  });
});

describe("cluster catalog start", () => {
  let server: ApiServer;
  beforeAll(async () => {
    server = await startApiServer();
    for (const f of crdFiles()) await server.installCrdFile(f);
  });
  afterAll(async () => {
    await server?.close();
  });

  it("fails, naming the refusal, when GitProviders cannot be listed", async () => {
    server.addUser("no-providers", "no-providers-token", [
      { verbs: ["get", "list", "watch"], groups: ["applygate.dev"], resources: ["gittargets"] },
    ]);
    await expect(
      ClusterCatalog.start({ kubeConfig: server.kubeConfig("no-providers"), writeStatus: false }),
    ).rejects.toThrow(/gitproviders.* 403/);
  });

  it("waits out a busy server at the first list (429 while a new CRD's storage initializes), and loads", async () => {
    server.addUser("busy", "busy-token", [
      {
        verbs: ["get", "list", "watch"],
        groups: ["applygate.dev"],
        resources: ["gitproviders", "gittargets"],
      },
    ]);
    server.faults.failNext(2, {
      status: 429,
      pathPrefix: PROVIDERS_PATH,
      message: "storage is (re)initializing",
    });
    const c = await ClusterCatalog.start({
      kubeConfig: server.kubeConfig("busy"),
      writeStatus: false,
      backoffMs: 5,
    });
    try {
      expect(c.loaded()).toBe(true);
      expect(server.faults.pending(PROVIDERS_PATH)).toBe(0);
    } finally {
      await c.close();
    }
  });

  it("starts without ScopeGrants or WebhookClaims it may not list, and is loaded", async () => {
    server.addUser("kinds-only", "kinds-only-token", [
      {
        verbs: ["get", "list", "watch"],
        groups: ["applygate.dev"],
        resources: ["gitproviders", "gittargets"],
      },
    ]);
    const c = await ClusterCatalog.start({
      kubeConfig: server.kubeConfig("kinds-only"),
      writeStatus: false,
      backoffMs: 5,
    });
    try {
      expect(c.loaded()).toBe(true);
      expect(c.kube.unsyncedWatches().sort()).toEqual([
        "/api/v1/namespaces",
        "/apis/applygate.dev/v1alpha1/scopegrants",
        "/apis/applygate.dev/v1alpha1/webhookclaims",
      ]);
    } finally {
      await c.close();
    }
  });
});
