/**
 * Tenants do not reach each other's repository: a GitProvider in namespace B naming A's repository
 * (in any spelling) is refused, and B's writes never reach A's repository; a branch uses only its
 * own GitProvider's credentials, even when B's provider is admitted and listed first. End to end:
 * the simulated API server (its clock moved between A's objects and B's, as time passes between
 * two teams' onboarding), the gateway's door and its GitProvider status, a worker replica, and a
 * real Git server that takes A's credentials only.
 */
import { randomUUID } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as k8s from "@kubernetes/client-node";
import { Queue } from "bullmq";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createGateway, type Gateway } from "../../gateway/app.js";
import { ClusterCatalog } from "../../gateway/catalog-cluster.js";
import { createDecisions, type Decisions, KubeObjects } from "../../queue/apply/index.js";
import { type AcceptedWrite, branchKey, QUEUES } from "../../queue/contract.js";
import { crdFiles } from "../../queue/crds/files.js";
import { acceptWrite } from "../../queue/intake.js";
import { createLogger, silentLogger } from "../../queue/log.js";
import { ClusterCache } from "../../queue/worker/cluster-cache.js";
import { KubeDirectory, KubeStatusSink } from "../../queue/worker/kube.js";
import type { Replica } from "../../queue/worker/replica.js";
import { type ApiServer, startApiServer } from "../cluster/apiserver/index.js";
import { gitOk } from "../git/cli.js";
import { type GitServer, startGitServer } from "../git/server.js";
import { type IsolatedRedis, isolatedRedis } from "../redis/isolated.js";
import { testReplica, waitFor } from "./harness.js";

const A = "team-a";
/** Sorts before team-a: the order of a listing gives it nothing. */
const B = "a-team";
const GROUP = { group: "applygate.dev", version: "v1alpha1" };
const A_TOKEN = "team-a-intake";
const B_TOKEN = "a-team-intake";
const CREDS = { username: "platform-bot", password: "platform-secret" };
const log = () =>
  process.env.APPLYGATE_TEST_LOG
    ? createLogger({ level: process.env.APPLYGATE_TEST_LOG, pretty: false })
    : silentLogger();

type Conditions = { type: string; status: string; reason: string; message: string }[];

describe("tenants and repositories: a GitProvider holds its repository and its credentials", () => {
  let api: ApiServer;
  let git: GitServer;
  let redis: IsolatedRedis;
  let url: string;
  let catalog: ClusterCatalog;
  let gw: Gateway;
  let cache: ClusterCache;
  let replica: Replica;
  let decisions: Decisions;
  let custom: k8s.CustomObjectsApi;
  let cacheDir: string;
  let skew = 0;
  /** B's GitProviders: A's repository, spelled otherwise. */
  let spellings: Record<string, string>;

  beforeAll(async () => {
    api = await startApiServer({ bookmarkIntervalMs: 100, now: () => Date.now() + skew });
    for (const f of crdFiles()) await api.installCrdFile(f);
    git = await startGitServer({ auth: CREDS });
    url = await git.createRepo("site", { "apps/a/README.md": "a\n" });
    const port = new URL(url).port;
    spellings = {
      exact: url,
      "no-git": url.replace(/\.git$/, ""),
      slash: `${url}/`,
      "upper-path": url.replace("/site.git", "/SITE.git"),
      "hex-host": `http://0x7f.0.0.1:${port}/site.git`,
      "short-host": `http://127.1:${port}/site`,
      "dot-segment": `http://127.0.0.1:${port}/x/../site.git`,
      https: url.replace(/^http:/, "https:"),
    };
    redis = await isolatedRedis("tenancy");
    const kc = api.kubeConfig();
    custom = kc.makeApiClient(k8s.CustomObjectsApi);
    const core = kc.makeApiClient(k8s.CoreV1Api);
    for (const ns of [A, B]) await core.createNamespace({ body: { metadata: { name: ns } } });
    const secret = (namespace: string, name: string, stringData: Record<string, string>) =>
      core.createNamespacedSecret({ namespace, body: { metadata: { name }, stringData } });
    await secret(A, "creds", CREDS);
    await secret(A, "hook", { token: "a-hook" });
    await secret(A, "intake", { token: A_TOKEN });
    await secret(B, "hook", { token: "b-hook" });
    await secret(B, "intake", { token: B_TOKEN });
    const create = (plural: string, namespace: string, body: Record<string, unknown>) =>
      custom.createNamespacedCustomObject({
        ...GROUP,
        plural,
        namespace,
        body: { apiVersion: "applygate.dev/v1alpha1", ...body },
      });
    await create("gitproviders", A, {
      kind: "GitProvider",
      metadata: { name: "repo", namespace: A },
      spec: {
        url,
        type: "gitea",
        webhookSecretRef: { name: "hook" },
        credentialsSecretRef: { name: "creds" },
      },
    });
    await create("gittargets", A, {
      kind: "GitTarget",
      metadata: { name: "site", namespace: A },
      spec: {
        providerRef: { name: "repo" },
        branch: "main",
        path: "apps/a",
        intakeSecretRef: { name: "intake" },
        commitWindow: { idleSeconds: 1, maxSeconds: 30 },
      },
    });
    // Team B comes a minute later and names A's repository, spelled in every way it can think of.
    skew = 60_000;
    for (const [name, spelled] of Object.entries(spellings)) {
      await create("gitproviders", B, {
        kind: "GitProvider",
        metadata: { name, namespace: B },
        spec: { url: spelled, type: "gitea", webhookSecretRef: { name: "hook" } },
      });
      await create("gittargets", B, {
        kind: "GitTarget",
        metadata: { name: `web-${name}`, namespace: B },
        spec: {
          providerRef: { name },
          branch: "main",
          path: `apps/b-${name}`,
          intakeSecretRef: { name: "intake" },
          commitWindow: { idleSeconds: 1, maxSeconds: 30 },
        },
      });
    }

    catalog = await ClusterCatalog.start({ kubeConfig: kc, log: silentLogger() });
    gw = await createGateway({
      redisUrl: redis.url,
      prefix: redis.prefix,
      catalog,
      processMetrics: false,
      queueEvents: false,
      maxWaitMs: 20_000,
    });
    cache = new ClusterCache(kc, silentLogger());
    await cache.start();
    const status = new KubeStatusSink(cache.kube, silentLogger(), Date.now, 8, cache);
    // The Git server speaks plain http: the operator's flag lets credentials go over it.
    const directory = new KubeDirectory(
      cache,
      { log: silentLogger(), status },
      { allowHttpCredentials: true },
    );
    cacheDir = await mkdtemp(join(tmpdir(), "applygate-tenancy-"));
    // As `applygate worker` assembles it: the decisions list each branch again at every change.
    decisions = createDecisions({
      redisUrl: redis.url,
      prefix: redis.prefix,
      objects: new KubeObjects(cache.kube, silentLogger(), {}, cache),
      directory,
      log: silentLogger(),
      changes: cache,
      keys: (namespace, name) => cache.secret(namespace, name),
      listIntervalMs: 600_000,
    });
    replica = testReplica(redis, { directory, cacheDir, log: log(), status, attach: decisions.attach });
    await replica.start();
  }, 60_000);

  afterAll(async () => {
    await replica?.stop();
    await decisions?.close();
    await cache?.close();
    await gw?.close();
    await catalog?.close();
    await git?.close();
    await redis?.cleanup();
    await api?.close();
    if (cacheDir) await rm(cacheDir, { recursive: true, force: true });
  });

  const conditionsOf = async (plural: string, namespace: string, name: string) =>
    ((
      (await custom.getNamespacedCustomObject({ ...GROUP, plural, namespace, name })) as {
        status?: { conditions?: Conditions };
      }
    ).status?.conditions ?? []) as Conditions;
  const condition = async (plural: string, namespace: string, name: string, type: string) =>
    (await conditionsOf(plural, namespace, name)).find((c) => c.type === type);
  const write = (namespace: string, token: string, target: string, name: string, wait = false) =>
    gw.app.inject({
      method: "POST",
      url: `/v1/targets/${namespace}/${target}/writes${wait ? "?wait=published" : ""}`,
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      payload: {
        changes: [
          {
            op: "upsert",
            object: { apiVersion: "v1", kind: "ConfigMap", metadata: { name, namespace }, data: { v: "1" } },
          },
        ],
        author: { name: "Dev", email: "dev@example.com" },
        save: true,
      },
    });
  const filesOnMain = async () =>
    (await gitOk(["ls-tree", "-r", "--name-only", "main"], { cwd: join(git.root, "site.git") }))
      .split("\n")
      .filter(Boolean);

  it("B's GitProviders naming A's repository, in every spelling, are refused naming A's, and B's writes never reach A's repository", async () => {
    for (const name of Object.keys(spellings))
      await waitFor(`a-team/${name} refused`, async () => {
        const c = await condition("gitproviders", B, name, "Accepted");
        return c?.status === "False" && c.reason === "RepositoryHeld";
      });
    for (const name of Object.keys(spellings)) {
      const c = await condition("gitproviders", B, name, "Accepted");
      expect(c?.message, name).toContain(`held by GitProvider ${A}/repo`);
      expect(await condition("gitproviders", B, name, "Ready"), name).toMatchObject({
        status: "False",
        reason: "RepositoryHeld",
      });
    }
    expect(await condition("gitproviders", A, "repo", "Accepted")).toMatchObject({ status: "True" });

    // The door: B's writes are refused before anything is queued.
    for (const name of Object.keys(spellings)) {
      const r = await write(B, B_TOKEN, `web-${name}`, `b-${name}`);
      expect(r.statusCode, name).toBe(409);
      expect(r.json().error, name).toContain("RepositoryHeld");
    }

    // A's own write is published, with A's credentials (the Git server takes no other).
    const own = await write(A, A_TOKEN, "site", "a-one", true);
    expect(own.statusCode).toBe(200);
    const tip = await git.tip("site");
    expect(await filesOnMain()).toContain("apps/a/core/configmap/team-a/a-one.yaml");

    // B's GitTargets say why, as the worker judges them.
    for (const name of Object.keys(spellings))
      await waitFor(`a-team/web-${name} not accepted`, async () => {
        const c = await condition("gittargets", B, `web-${name}`, "Accepted");
        return c?.status === "False" && c.reason === "RepositoryHeld";
      });

    // A write that got into B's branch inbox anyway (a forged queue entry) is settled refused.
    const forged: AcceptedWrite = {
      id: randomUUID(),
      target: { namespace: B, name: "web-exact" },
      branchKey: branchKey({ namespace: B, name: "exact" }, url, "main"),
      path: "apps/a",
      acceptedAt: new Date().toISOString(),
      author: { name: "Eve", email: "eve@example.com" },
      changes: [
        {
          op: "upsert",
          object: {
            apiVersion: "v1",
            kind: "ConfigMap",
            metadata: { name: "forged", namespace: B },
            data: {},
          },
        },
      ],
      save: true,
    };
    const branches = new Queue(QUEUES.branches, {
      connection: { url: redis.url, maxRetriesPerRequest: null },
      prefix: redis.prefix,
    });
    try {
      expect((await acceptWrite(redis.client, redis.prefix, forged, branches)).accepted).toBe(true);
    } finally {
      await branches.close();
    }
    const settled = await waitFor("the forged write settled", () =>
      redis.client.get(`${redis.prefix}:write:${forged.id}:published`),
    );
    expect(settled).toMatch(/^refused: RepositoryHeld/);
    expect(await git.tip("site")).toBe(tip);
    expect((await filesOnMain()).filter((f) => f.includes("a-team"))).toEqual([]);
    expect(git.counts().push).toBe(1);
  });

  it("admitted by A (accessFrom), B's GitProvider is its own branch with its own credentials, listed first or not: never A's", async () => {
    const core = api.kubeConfig().makeApiClient(k8s.CoreV1Api);
    await core.createNamespacedSecret({
      namespace: B,
      body: { metadata: { name: "creds" }, stringData: { username: CREDS.username, password: "guessed" } },
    });
    const merge = k8s.setHeaderOptions("Content-Type", k8s.PatchStrategy.MergePatch);
    await custom.patchNamespacedCustomObject(
      {
        ...GROUP,
        plural: "gitproviders",
        namespace: B,
        name: "exact",
        body: { spec: { credentialsSecretRef: { name: "creds" } } },
      },
      merge,
    );
    await custom.patchNamespacedCustomObject(
      {
        ...GROUP,
        plural: "gitproviders",
        namespace: A,
        name: "repo",
        body: { spec: { accessFrom: { namespaces: [B] } } },
      },
      merge,
    );
    await waitFor("a-team/exact admitted", async () => {
      const c = await condition("gitproviders", B, "exact", "Accepted");
      return c?.status === "True";
    });
    // The worker's own cache sees the consent before B writes (the door may see it first).
    await waitFor("the worker sees the consent", () =>
      cache.providers.get("repo", A)?.spec.accessFrom?.namespaces.includes(B),
    );
    const pushes = git.counts().push;
    const tip = await git.tip("site");
    await waitFor(
      "the door takes B's write",
      async () => (await write(B, B_TOKEN, "web-exact", "b-admitted")).statusCode === 202,
    );
    // B's branch pushes with B's credentials, which the Git server refuses: the write waits.
    await waitFor("B's publication retrying on its own credentials", async () => {
      const c = await condition("gittargets", B, "web-exact", "Ready");
      return c?.status === "False" && c.reason === "PublicationRetrying";
    });
    expect(await git.tip("site")).toBe(tip);
    expect((await filesOnMain()).filter((f) => f.includes("a-team"))).toEqual([]);
    // A's branch goes on with A's credentials.
    const own = await write(A, A_TOKEN, "site", "a-two", true);
    expect(own.statusCode).toBe(200);
    expect(await filesOnMain()).toContain("apps/a/core/configmap/team-a/a-two.yaml");
    expect(git.counts().push).toBe(pushes + 1);
  });

  it("a folder is one namespace's: B's GitTargets on A's folder, inside it or around it, are refused naming A's, even where B may use the repository", async () => {
    // A admits a-team (the test before): the repository is B's to use, not A's folders.
    const create = (name: string, provider: { name: string; namespace?: string }, path: string) =>
      custom.createNamespacedCustomObject({
        ...GROUP,
        plural: "gittargets",
        namespace: B,
        body: {
          apiVersion: "applygate.dev/v1alpha1",
          kind: "GitTarget",
          metadata: { name, namespace: B },
          spec: { providerRef: provider, branch: "main", path, intakeSecretRef: { name: "intake" } },
        },
      });
    await create("inside", { name: "exact" }, "apps/a/b-side");
    await create("around", { name: "repo", namespace: A }, "apps");
    await create("same-case", { name: "repo", namespace: A }, "Apps/A");
    for (const name of ["inside", "around", "same-case"]) {
      await waitFor(`a-team/${name} refused its folder`, async () => {
        const c = await condition("gittargets", B, name, "Accepted");
        return c?.status === "False" && c.reason === "FolderHeld";
      });
      expect((await condition("gittargets", B, name, "Accepted"))?.message, name).toContain(
        `of GitTarget ${A}/site`,
      );
      const r = await write(B, B_TOKEN, name, `b-${name}`);
      expect(r.statusCode, name).toBe(409);
      expect(r.json().error, name).toContain("FolderHeld");
    }
    // A's own GitTarget is untouched, and A's folder holds only A's objects.
    expect(await condition("gittargets", A, "site", "Accepted")).not.toMatchObject({ status: "False" });
    const own = await write(A, A_TOKEN, "site", "a-three", true);
    expect(own.statusCode).toBe(200);
    expect((await filesOnMain()).filter((f) => f.startsWith("apps/a/") && !f.includes("/team-a/"))).toEqual([
      "apps/a/README.md",
    ]);
  });

  it("a branch uses its GitProvider's current credentials: removed, they stop; rotated, the new ones are used at once", async () => {
    const core = api.kubeConfig().makeApiClient(k8s.CoreV1Api);
    const credentials = async () =>
      (await condition("gittargets", A, "site", "CredentialsAvailable")) as Conditions[number] | undefined;
    const publication = async () =>
      (
        (await custom.getNamespacedCustomObject({
          ...GROUP,
          plural: "gittargets",
          namespace: A,
          name: "site",
        })) as {
          status?: { publication?: { state?: string; nextRetryAt?: string; lastError?: string } };
        }
      ).status?.publication;
    const platformPassword = (c: { password: string } | null) => c?.password === CREDS.password;

    // A's branch runs, publishing with A's credentials.
    expect((await write(A, A_TOKEN, "site", "a-before", true)).statusCode).toBe(200);
    // Removed: the branch goes on without them; nothing carries the old password any more.
    await core.deleteNamespacedSecret({ namespace: A, name: "creds" });
    await waitFor("the credentials gone", async () => (await credentials())?.reason === "SecretNotFound");
    git.resetCounts();
    expect((await write(A, A_TOKEN, "site", "a-rotated")).statusCode).toBe(202);
    await waitFor(
      "publication retrying without credentials",
      async () => (await publication())?.state === "Retrying",
    );
    expect(git.credentialsSeen().length).toBeGreaterThan(0);
    expect(git.credentialsSeen().filter(platformPassword)).toEqual([]);

    // Added again, with a wrong password: used at once (the retry does not wait out its backoff).
    await core.createNamespacedSecret({
      namespace: A,
      body: { metadata: { name: "creds" }, stringData: { username: CREDS.username, password: "wrong" } },
    });
    await waitFor("the wrong password tried", () =>
      git.credentialsSeen().some((c) => c?.password === "wrong"),
    );
    await waitFor(
      "publication retrying on the wrong password",
      async () => ((await publication())?.nextRetryAt ?? "") > new Date().toISOString(),
    );
    const retryAt = Date.parse((await publication())?.nextRetryAt ?? "");
    expect(await filesOnMain()).not.toContain("apps/a/core/configmap/team-a/a-rotated.yaml");

    // Rotated to the right one: the pending write is published before its scheduled retry.
    await core.replaceNamespacedSecret({
      namespace: A,
      name: "creds",
      body: {
        metadata: { name: "creds" },
        stringData: { username: CREDS.username, password: CREDS.password },
      },
    });
    await waitFor("the rotated credentials publish the write", async () =>
      (await filesOnMain()).includes("apps/a/core/configmap/team-a/a-rotated.yaml"),
    );
    expect(Date.now()).toBeLessThan(retryAt);
    await waitFor(
      "the GitTarget shows it published",
      async () => (await publication())?.state === "Published",
    );
    expect(git.credentialsSeen().at(-1)).toEqual(CREDS);
  });
});
