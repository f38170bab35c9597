// The Helm chart installed with the real `helm` into the real control plane (test/real/cluster.ts),
// as docs/install.md's Helm section says: the API server accepts every object (CRDs, RBAC, the
// ValidatingAdmissionPolicy, NetworkPolicies, Secrets), the pods the controllers make from it pass
// the `restricted` Pod Security Standard the namespace enforces, the RBAC grants what each identity
// needs and no more, the policy refuses an Approval in another's name, and the gateway, worker,
// mirror and webhook applier start from what was installed: each with its Deployment's args and
// env, under its ServiceAccount's token, until its readiness probe answers; the gateway then makes
// a GitProvider Ready, and they play the playground's scenario with the webhook applier (a push
// applied once, an API write one commit), which `applygate status` then shows a namespace viewer.
// No kubelet runs here, so the processes run on this machine (listening on loopback, on free
// ports, with a private Redis, the webhook applier allowed to call loopback: the only settings
// changed from the Deployment's).
import { type ChildProcess, execFile, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { get } from "node:http";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { promisify } from "node:util";
import {
  AppsV1Api,
  CoreV1Api,
  CustomObjectsApi,
  KubeConfig,
  PatchStrategy,
  setHeaderOptions,
} from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseAllDocuments } from "yaml";
import { errorMessage } from "../../queue/errors.js";
import { objectPath, objectYaml } from "../../queue/git/layout.js";
import { silentLogger } from "../../queue/log.js";
import { freePort } from "../../queue/redis.js";
import { gitOk } from "../git/cli.js";
import { type GitServer, startGitServer } from "../git/server.js";
import { CHART_DIR } from "../manifests/helm.js";
import type { K8sObject } from "../manifests/kustomize.js";
import { type ContainerSpec, containerEnv, httpProbes } from "../manifests/pod-env.js";
import { DEPLOYER_FIELD_MANAGER, type Deployer, startDeployer } from "../playground/deployer.js";
import { type RestartableRedis, restartableRedis } from "../redis/restartable.js";
import { until } from "../support/wait.js";
import { WAIT_CRDS_ESTABLISHED } from "./applygate.js";
import { CONTROL_PLANE, findRealBinaries } from "./binaries.js";
import { kubeconfigYaml, type RealCluster, startRealCluster } from "./cluster.js";
import { teamTokens, webhookTeamYaml } from "./tenant.js";

const run = promisify(execFile);
const bins = findRealBinaries([...CONTROL_PLANE, "helm", "kubectl"]);
if (!bins.built) console.warn(`\n!!! SKIPPED test/real/helm.real.test.ts: ${bins.message}\n`);

const NS = "applygate-system";
const CLI = resolve(import.meta.dirname, "../../queue/cli/applygate.mjs");
const patience = { timeoutMs: 60_000, everyMs: 250 };

describe.skipIf(!bins.built)("the Helm chart installed into a real API server", () => {
  let cluster: RealCluster;
  let dir: string;
  let env: NodeJS.ProcessEnv;
  let redis: RestartableRedis | undefined;
  let git: GitServer | undefined;
  let deployer: Deployer | undefined;
  /** The gateway's HTTP address, and each started component's last output, once they run. */
  let gatewayUrl = "";
  const output: Record<string, () => string> = {};
  const children: ChildProcess[] = [];
  const tool = async (name: "helm" | "kubectl", args: string[]) => {
    if (!bins.built) throw new Error("not built");
    return (await run(bins.path(name), args, { env, maxBuffer: 32 * 1024 * 1024 })).stdout;
  };
  const kubectl = (...args: string[]) => tool("kubectl", args);
  const helm = (...args: string[]) => tool("helm", args);

  beforeAll(async () => {
    // The workload controllers make the pods (which no kubelet runs): Pod Security admits them or not.
    cluster = await startRealCluster({
      extraControllers: ["deployment-controller", "replicaset-controller", "statefulset-controller"],
    });
    dir = await mkdtemp(join(tmpdir(), "applygate-helm-real-"));
    env = {
      ...process.env,
      KUBECONFIG: cluster.kubeconfigPath,
      HELM_CACHE_HOME: join(dir, "helm-cache"),
      HELM_CONFIG_HOME: join(dir, "helm-config"),
      HELM_DATA_HOME: join(dir, "helm-data"),
    };
    // docs/install.md, "With Helm": the namespace labelled restricted, then the chart.
    await kubectl("create", "namespace", NS);
    await kubectl(
      "label",
      "namespace",
      NS,
      "pod-security.kubernetes.io/enforce=restricted",
      "pod-security.kubernetes.io/enforce-version=latest",
    );
    for (const ns of ["flux-system", "argocd", "team-a"]) await kubectl("create", "namespace", ns);
    await helm(
      "install",
      "applygate",
      CHART_DIR,
      "--namespace",
      NS,
      "--set",
      "sidecars.flux.enabled=true",
      "--set",
      "sidecars.argocd.enabled=true",
      "--set",
      "webhook.enabled=true",
      "--set",
      "monitoring.grafanaDashboard.enabled=true",
      "--set",
      "dashboard.user=admin",
      "--set",
      "dashboard.password=s3cret",
    );
  }, 240_000);

  afterAll(async () => {
    for (const c of children) c.kill("SIGKILL");
    await deployer?.close();
    await git?.close();
    await redis?.remove();
    await cluster?.stop();
    if (dir) await rm(dir, { recursive: true, force: true });
  }, 60_000);

  const installed = async (): Promise<K8sObject[]> =>
    parseAllDocuments(await helm("get", "manifest", "applygate", "--namespace", NS))
      .map((d) => d.toJS() as K8sObject | null)
      .filter((o): o is K8sObject => o !== null);

  it("stores every object the release holds, and the CRDs are established", async () => {
    expect(await helm("status", "applygate", "--namespace", NS)).toMatch(/STATUS: deployed/);
    const objects = await installed();
    const kinds = new Set(objects.map((o) => o.kind));
    for (const kind of [
      "ClusterRole",
      "ClusterRoleBinding",
      "ValidatingAdmissionPolicy",
      "ValidatingAdmissionPolicyBinding",
      "NetworkPolicy",
      "Secret",
      "PodDisruptionBudget",
      "StatefulSet",
      "Deployment",
      "ConfigMap",
    ])
      expect(kinds, kind).toContain(kind);
    // Each is read back from the API server (kubectl get -f names each one).
    const file = join(dir, "manifest.yaml");
    await writeFile(file, await helm("get", "manifest", "applygate", "--namespace", NS));
    const names = (await kubectl("get", "-f", file, "-o", "name")).trim().split("\n");
    expect(names).toHaveLength(objects.length);
    const crds = await kubectl(...WAIT_CRDS_ESTABLISHED);
    expect(crds.trim().split("\n")).toHaveLength(9);
  });

  it("makes pods that the restricted Pod Security Standard admits, which refuses a pod that is not", async () => {
    const core = cluster.kubeConfig().makeApiClient(CoreV1Api);
    const want = { gateway: 2, worker: 2, mirror: 1, webhook: 1, redis: 1 };
    await until(
      async () => {
        const pods = (await core.listNamespacedPod({ namespace: NS })).items;
        const count = (c: string) =>
          pods.filter((p) => p.metadata?.labels?.["app.kubernetes.io/component"] === c).length;
        return Object.entries(want).every(([c, n]) => count(c) === n);
      },
      "every component's pods created by the controllers",
      patience,
    );
    // Not vacuous: the namespace does enforce it.
    const refused = await kubectl(
      "run",
      "root-shell",
      "--namespace",
      NS,
      "--image=busybox",
      "--restart=Never",
      "--dry-run=server",
      "-o",
      "name",
    ).catch((e: { stderr?: string }) => e.stderr ?? String(e));
    expect(refused).toMatch(/violates PodSecurity "restricted:latest"/);
  });

  it("grants each identity what it needs and no more", async () => {
    const can = async (who: string, ...args: string[]) =>
      (
        await kubectl("auth", "can-i", `--as=${who}`, ...args).catch(
          (e: { stdout?: string }) => e.stdout ?? "",
        )
      )
        .trim()
        .split("\n")
        .pop();
    const sa = (ns: string, name: string) => `system:serviceaccount:${ns}:${name}`;
    expect(
      await can(
        sa(NS, "applygate-worker"),
        "patch",
        "gittargets.applygate.dev",
        "--subresource=status",
        "-A",
      ),
    ).toBe("yes");
    expect(await can(sa(NS, "applygate-worker"), "list", "secrets", "-n", "team-a")).toBe("no");
    expect(
      await can(
        sa(NS, "applygate-gateway"),
        "patch",
        "gitproviders.applygate.dev",
        "--subresource=status",
        "-A",
      ),
    ).toBe("yes");
    expect(await can(sa(NS, "applygate-gateway"), "get", "secrets", "-n", "team-a")).toBe("no");
    expect(await can(sa(NS, "applygate-mirror"), "watch", "configmaps", "-A")).toBe("yes");
    expect(await can(sa(NS, "applygate-mirror"), "watch", "secrets", "-A")).toBe("no");
    expect(
      await can(sa(NS, "applygate-webhook"), "patch", "webhookclaims.applygate.dev", "-n", "team-a"),
    ).toBe("yes");
    expect(
      await can(
        sa("flux-system", "kustomize-controller"),
        "patch",
        "fluxclaims.applygate.dev",
        "-n",
        "team-a",
      ),
    ).toBe("yes");
    expect(
      await can(
        sa("argocd", "argocd-application-controller"),
        "patch",
        "argocdclaims.applygate.dev",
        "-n",
        "team-a",
      ),
    ).toBe("yes");
    // Editing a namespace does not approve its releases.
    await kubectl(
      "create",
      "rolebinding",
      "alice-edit",
      "--clusterrole=edit",
      "--user=alice",
      "-n",
      "team-a",
    );
    expect(await can("alice", "get", "gittargets.applygate.dev", "-n", "team-a")).toBe("yes");
    expect(await can("alice", "create", "approvals.applygate.dev", "-n", "team-a")).toBe("no");
  });

  it("refuses an Approval in another's name through the chart's ValidatingAdmissionPolicy", async () => {
    await kubectl(
      "create",
      "rolebinding",
      "bob-approver",
      "--clusterrole=applygate-approver",
      "--user=bob",
      "-n",
      "team-a",
    );
    const approval = (name: string, approver: string) =>
      JSON.stringify({
        apiVersion: "applygate.dev/v1alpha1",
        kind: "Approval",
        metadata: { name, namespace: "team-a" },
        spec: { claimRef: { kind: "FluxClaim", name: "apps" }, approver, commit: "a".repeat(40) },
      });
    const create = async (name: string, approver: string) => {
      const file = join(dir, `${name}.json`);
      await writeFile(file, approval(name, approver));
      return kubectl("create", "--as=bob", "-f", file).then(
        (out) => ({ ok: true, out }),
        (e: { stderr?: string }) => ({ ok: false, out: e.stderr ?? "" }),
      );
    };
    // The policy takes effect once the API server has compiled it: wait for the first refusal.
    const refused = await until(
      async () => {
        const r = await create(`in-alices-name-${randomBytes(3).toString("hex")}`, "alice");
        return r.ok ? undefined : r;
      },
      "the approval policy to refuse",
      patience,
    );
    expect(refused.out).toMatch(/spec.approver must be your own username: bob/);
    const own = await create("bobs-own", "bob");
    expect(own).toMatchObject({ ok: true });
  });

  it("runs gateway, worker, mirror and webhook applier from the installed Deployments under their ServiceAccounts, and the gateway makes a GitProvider Ready", async () => {
    const apps = cluster.kubeConfig().makeApiClient(AppsV1Api);
    const core = cluster.kubeConfig().makeApiClient(CoreV1Api);
    // A private Redis stands in for the chart's (the chart's URL names its in-cluster Service).
    redis = await restartableRedis({ persist: false });
    const secretData = async (name: string) => {
      const s = await core.readNamespacedSecret({ name, namespace: NS });
      return Object.fromEntries(
        Object.entries(s.data ?? {}).map(([k, v]) => [k, Buffer.from(v, "base64").toString("utf8")]),
      );
    };
    const secrets = {
      [`${NS}/applygate-redis`]: await secretData("applygate-redis"),
      [`${NS}/applygate-dashboard`]: await secretData("applygate-dashboard"),
    };
    expect(secrets[`${NS}/applygate-redis`]!.url).toMatch(
      /^redis:\/\/:[A-Za-z0-9]{40}@applygate-redis\.applygate-system\.svc:6379$/,
    );

    const started: { name: string; ready: string }[] = [];
    for (const name of ["applygate-gateway", "applygate-worker", "applygate-mirror", "applygate-webhook"]) {
      const deployment = await apps.readNamespacedDeployment({ name, namespace: NS });
      const pod = deployment.spec!.template.spec!;
      const c = pod.containers[0] as unknown as ContainerSpec;
      const account = pod.serviceAccountName!;
      const token = (
        await core.createNamespacedServiceAccountToken({
          name: account,
          namespace: NS,
          body: { spec: { audiences: [], expirationSeconds: 3600 } },
        })
      ).status!.token;
      const kubeconfig = join(dir, `${account}.kubeconfig`);
      await writeFile(kubeconfig, kubeconfigYaml(cluster.server, cluster.caPem, account, token, NS), {
        mode: 0o600,
      });
      const podEnv = containerEnv(c, { podName: `${name}-0`, namespace: NS, secrets });
      expect(podEnv.REDIS_URL).toBe(secrets[`${NS}/applygate-redis`]!.url);
      if (name === "applygate-gateway") expect(podEnv.APPLYGATE_DASHBOARD_PASSWORD).toBe("s3cret");
      // Ports: the Deployment's, each moved to a free one on loopback.
      const ports = new Map<number, number>();
      for (const p of c.ports ?? []) ports.set(p.containerPort, await freePort());
      const [command, ...args] = c.args!;
      const moved =
        command === "gateway"
          ? [
              "--host",
              "127.0.0.1",
              "--port",
              String(ports.get(8080)),
              "--metrics-port",
              String(ports.get(9090)),
            ]
          : ["--metrics-host", "127.0.0.1", "--metrics-port", String([...ports.values()][0])];
      const extra =
        command === "worker" || command === "sidecar" ? ["--cache-dir", join(dir, `${name}-cache`)] : [];
      const child = spawn(process.execPath, [CLI, command!, ...args, ...moved, ...extra], {
        env: {
          PATH: process.env.PATH,
          HOME: dir,
          ...podEnv,
          REDIS_URL: redis.url,
          KUBECONFIG: kubeconfig,
          // The deployer the next test's WebhookClaim names listens on loopback (in a cluster: a
          // Service address); the applier's guard refuses loopback unless allowed.
          ...(name === "applygate-webhook" ? { APPLYGATE_WEBHOOK_ALLOW_INTERNAL: "true" } : {}),
        },
        stdio: ["ignore", "pipe", "pipe"],
      });
      children.push(child);
      let logs = "";
      const keep = (d: Buffer) => {
        logs = (logs + String(d)).slice(-6000);
      };
      child.stdout!.on("data", keep);
      child.stderr!.on("data", keep);
      output[name] = () => logs;
      if (command === "gateway") gatewayUrl = `http://127.0.0.1:${ports.get(8080)}`;
      const readiness = httpProbes(c).find((p) => p.kind === "readinessProbe")!;
      const url = `http://127.0.0.1:${ports.get(readiness.port)}${readiness.path}`;
      let answer = { code: 0, body: "" };
      await until(
        async () => {
          if (child.exitCode !== null) throw new Error(`${name} exited ${child.exitCode}: ${logs}`);
          answer = await probe(url);
          return answer.code === 200;
        },
        `${name} ready (${url})`,
        { timeoutMs: 60_000, everyMs: 500 },
      ).catch((err: unknown) => {
        throw new Error(
          `${errorMessage(err)}: ${answer.code} ${answer.body}\n${name}'s last output:\n${logs}`,
        );
      });
      started.push({ name, ready: url });
    }
    expect(started.map((s) => s.name)).toEqual([
      "applygate-gateway",
      "applygate-worker",
      "applygate-mirror",
      "applygate-webhook",
    ]);

    // The gateway reads the webhook Secret through the RoleBinding docs/install.md has users make,
    // and writes the GitProvider's status: Ready with its webhook path.
    await core.createNamespacedSecret({
      namespace: "team-a",
      body: { metadata: { name: "hook" }, stringData: { token: randomBytes(16).toString("hex") } },
    });
    await kubectl(
      "-n",
      "team-a",
      "create",
      "rolebinding",
      "applygate-secret-reader",
      "--clusterrole=applygate-secret-reader",
      `--serviceaccount=${NS}:applygate-gateway`,
    );
    const custom = cluster.kubeConfig().makeApiClient(CustomObjectsApi);
    await custom.createNamespacedCustomObject({
      group: "applygate.dev",
      version: "v1alpha1",
      namespace: "team-a",
      plural: "gitproviders",
      body: {
        apiVersion: "applygate.dev/v1alpha1",
        kind: "GitProvider",
        metadata: { name: "platform", namespace: "team-a" },
        spec: {
          url: "https://git.example.com/platform/config.git",
          type: "github",
          webhookSecretRef: { name: "hook" },
        },
      },
    });
    const ready = await until(
      async () => {
        const p = (await custom.getNamespacedCustomObject({
          group: "applygate.dev",
          version: "v1alpha1",
          namespace: "team-a",
          plural: "gitproviders",
          name: "platform",
        })) as { status?: { webhookPath?: string; conditions?: { type: string; status: string }[] } };
        return p.status?.conditions?.find((c) => c.type === "Ready" && c.status === "True")
          ? p.status
          : undefined;
      },
      "GitProvider team-a/platform Ready",
      patience,
    );
    expect(ready.webhookPath).toMatch(/^\/hook\//);
  });

  it("plays the playground's scenario on what it installed: a push applied once by a WebhookClaim's deployer, an API write one commit, and `applygate status` as a namespace viewer", async () => {
    const core = cluster.kubeConfig().makeApiClient(CoreV1Api);
    const custom = cluster.kubeConfig().makeApiClient(CustomObjectsApi);
    const ns = "shop";
    const folder = "apps/web";
    const file = objectPath(folder, { apiVersion: "v1", kind: "ConfigMap", namespace: ns, name: "web" });
    const web = (greeting: string) => ({
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name: "web", namespace: ns },
      data: { greeting },
    });
    git = await startGitServer();
    const repoUrl = await git.createRepo("shop", { [file]: objectYaml(web("hello")) });
    const tokens = teamTokens();
    /** A kubeconfig holding a token of ServiceAccount `ns/name`. */
    const identity = async (name: string) => {
      const token = (
        await core.createNamespacedServiceAccountToken({
          name,
          namespace: ns,
          body: { spec: { audiences: [], expirationSeconds: 3600 } },
        })
      ).status!.token;
      const path = join(dir, `${ns}-${name}.kubeconfig`);
      await writeFile(path, kubeconfigYaml(cluster.server, cluster.caPem, name, token, ns), { mode: 0o600 });
      return path;
    };

    await kubectl("create", "namespace", ns);
    // docs/install.md and docs/webhook-applier.md: the bindings a namespace's owner makes.
    for (const [binding, role, sa] of [
      ["applygate-secret-reader", "applygate-secret-reader", "applygate-gateway"],
      ["applygate-secret-watcher", "applygate-secret-watcher", "applygate-worker"],
      ["applygate-webhook-secret-watcher", "applygate-secret-watcher", "applygate-webhook"],
    ] as const)
      await kubectl(
        "-n",
        ns,
        "create",
        "rolebinding",
        binding,
        `--clusterrole=${role}`,
        `--serviceaccount=${NS}:${sa}`,
      );
    // The deployer's own identity, as the playground gives it: it may apply ConfigMaps here only.
    await kubectl("-n", ns, "create", "serviceaccount", "deployer");
    await kubectl("-n", ns, "create", "role", "deployer", "--verb=get,create,patch", "--resource=configmaps");
    await kubectl(
      "-n",
      ns,
      "create",
      "rolebinding",
      "deployer",
      "--role=deployer",
      `--serviceaccount=${ns}:deployer`,
    );
    const deployerKc = new KubeConfig();
    deployerKc.loadFromFile(await identity("deployer"));
    const gateway = gatewayUrl;
    deployer = await startDeployer({
      key: tokens.hmacKey,
      folder,
      repoUrl,
      gatewayUrl: () => gateway,
      kubeConfig: deployerKc,
      log: silentLogger(),
    });
    const resources = join(dir, `${ns}.yaml`);
    await writeFile(
      resources,
      webhookTeamYaml(ns, { repoUrl, folder, deployerUrl: deployer.url, ...tokens }),
    );
    await kubectl("apply", "-f", resources);
    type Claim = {
      status?: {
        conditions?: { type: string; status: string }[];
        history?: { token: string; commit: string; phase: string }[];
      };
    };
    const claim = async () =>
      (await custom.getNamespacedCustomObject({
        group: "applygate.dev",
        version: "v1alpha1",
        namespace: ns,
        plural: "webhookclaims",
        name: "deployer",
      })) as Claim;
    const webhookPath = await until(
      async () => {
        const p = (await custom.getNamespacedCustomObject({
          group: "applygate.dev",
          version: "v1alpha1",
          namespace: ns,
          plural: "gitproviders",
          name: "repo",
        })) as { status?: { webhookPath?: string } };
        return p.status?.webhookPath;
      },
      "GitProvider shop/repo's webhook path",
      patience,
    );
    git.addWebhook({ url: `${gatewayUrl}${webhookPath}`, secret: tokens.hookToken });
    const greeting = async () =>
      (await core.readNamespacedConfigMap({ name: "web", namespace: ns }).catch(() => undefined))?.data
        ?.greeting;
    const logs = () =>
      Object.entries(output)
        .map(([n, l]) => `--- ${n}:\n${l()}`)
        .join("\n");
    const start = (await git.tip("shop"))!;
    // The converge at start (CatchUp): the deployer applies the tip, and the claim holds.
    await until(
      async () => (await greeting()) === "hello",
      `the first apply of the tip\n${logs()}`,
      patience,
    );
    await until(
      async () =>
        (await claim()).status?.conditions?.find((c) => c.type === "InControl")?.status === "True" &&
        (await claim()).status?.history?.some((h) => h.commit === start && h.phase === "Succeeded"),
      "the claim holding, its first operation Succeeded",
      patience,
    );

    // A push by somebody else: the Git host's webhook to the gateway, the worker's apply request to
    // the deployer, its report back to the gateway, the operation Succeeded on the claim.
    const clone = join(dir, "shop-clone");
    await gitOk(["clone", "-q", repoUrl, clone]);
    await writeFile(join(clone, file), objectYaml(web("pushed")));
    await gitOk(
      ["-c", "user.name=Bob", "-c", "user.email=bob@example.com", "commit", "-qam", "greeting pushed"],
      {
        cwd: clone,
      },
    );
    await gitOk(["push", "-q", "origin", "HEAD:main"], { cwd: clone });
    const pushed = (await gitOk(["rev-parse", "HEAD"], { cwd: clone })).trim();
    await until(
      async () => (await greeting()) === "pushed",
      `the deployer to apply the push\n${logs()}`,
      patience,
    );
    const succeeded = await until(
      async () =>
        (await claim()).status?.history?.find((h) => h.commit === pushed && h.phase === "Succeeded"),
      "the push's operation Succeeded on the claim's history",
      patience,
    );

    // An API edit reported through the intake API as a save: one commit on the branch. It is made
    // in a later second than the deployer's write: managedFields times are whole seconds, so an
    // edit in the applier's second cannot be told from one it overwrote and the worker applies
    // again to be safe (a redundant Repair, docs/design/decisions.md). A person edits seconds later.
    const applied = (
      await core.readNamespacedConfigMap({ name: "web", namespace: ns })
    ).metadata?.managedFields?.find((m) => m.manager === DEPLOYER_FIELD_MANAGER)?.time;
    expect(applied).toBeDefined();
    const nextSecond = new Date(applied!).getTime() + 1000;
    await until(async () => Date.now() >= nextSecond, "the second after the deployer's write", patience);
    const USER = "user";
    const written = await core.patchNamespacedConfigMap(
      { name: "web", namespace: ns, body: web("edited"), fieldManager: USER, force: true },
      setHeaderOptions("Content-Type", PatchStrategy.ServerSideApply),
    );
    const editedAt = written.metadata?.managedFields?.find((m) => m.manager === USER)?.time;
    const res = await fetch(`${gatewayUrl}/v1/targets/${ns}/web/writes?wait=published&timeout=30`, {
      method: "POST",
      headers: { authorization: `Bearer ${tokens.intakeToken}`, "content-type": "application/json" },
      body: JSON.stringify({
        changes: [{ op: "upsert", object: web("edited") }],
        author: { name: USER, email: `${USER}@example.com` },
        message: "web: greeting edited",
        save: true,
        editedAt: new Date(editedAt ?? Date.now()).toISOString(),
      }),
    });
    const answer = (await res.json()) as { commit?: string; published?: boolean };
    expect({ status: res.status, published: answer.published }).toEqual({ status: 200, published: true });
    const commits = (
      await gitOk(["--git-dir", join(git.root, "shop.git"), "log", "--format=%H", `${pushed}..main`])
    )
      .split("\n")
      .filter(Boolean);
    expect(commits).toEqual([answer.commit]);
    expect(await gitOk(["--git-dir", join(git.root, "shop.git"), "show", `main:${file}`])).toMatch(
      /greeting: edited/,
    );
    expect(await greeting()).toBe("edited");

    // `applygate status` as the namespace's viewer (the built-in view role, which aggregates
    // applygate-view), with the worker's Redis: the GitTarget, its claim and the last operation.
    await kubectl("-n", ns, "create", "serviceaccount", "viewer");
    await kubectl(
      "-n",
      ns,
      "create",
      "rolebinding",
      "viewer",
      "--clusterrole=view",
      `--serviceaccount=${ns}:viewer`,
    );
    const viewer = await identity("viewer");
    const status = (...args: string[]) =>
      run(process.execPath, [CLI, "status", "-n", ns, ...args], {
        env: { PATH: process.env.PATH, HOME: dir, KUBECONFIG: viewer, REDIS_URL: redis!.url },
      }).catch((e: { code?: number; stdout?: string; stderr?: string }) => {
        throw new Error(`applygate status ${args.join(" ")} exited ${e.code}: ${e.stdout}${e.stderr}`);
      });
    expect((await status()).stdout).toMatch(
      /^NAME\s+BRANCH\s+PATH\s+CLAIM\s+WRITES\s+PENDING\s+STATE\s+WHY\nweb\s+main\s+apps\/web\s+WebhookClaim\/deployer\s+0\s+-\s+idle\s+nothing to apply\n$/,
    );
    const table = (await status("-o", "wide")).stdout.split("\n");
    expect(table[0]).toMatch(/^NAME\s+BRANCH\s+PATH\s+CLAIM\s+WRITES\s+PENDING\s+STATE\s+LAST OPERATION/);
    expect(table[1]).toMatch(
      new RegExp(
        `^web\\s+main\\s+apps/web\\s+WebhookClaim/deployer\\s+0\\s+-\\s+idle\\s+${succeeded.token} Succeeded\\s+0\\s+nothing to apply$`,
      ),
    );
    const json = JSON.parse((await status("-o", "json")).stdout) as {
      targets: {
        name: string;
        decisions: string;
        claim: { kind: string; name: string; error?: string; conditions: { type: string; status: string }[] };
        operations: { token: string; commit: string; phase: string }[];
      }[];
    };
    expect(json.targets.map((t) => t.name)).toEqual(["web"]);
    const t = json.targets[0]!;
    expect(t.decisions).toBe("read");
    expect(t.claim).toMatchObject({ kind: "WebhookClaim", name: "deployer" });
    expect(t.claim.error).toBeUndefined();
    expect(t.claim.conditions.find((c) => c.type === "InControl")?.status).toBe("True");
    expect(t.operations.map((o) => ({ token: o.token, commit: o.commit, phase: o.phase }))).toEqual([
      { token: succeeded.token, commit: pushed, phase: "Succeeded" },
      { token: expect.any(String), commit: start, phase: "Succeeded" },
    ]);

    // The viewer's identity is the one asked: a namespace it may not list is refused, in one line.
    const refused = await status("-o", "json", "-n", "team-a").then(
      () => "listed",
      (e: Error) => e.message,
    );
    expect(refused).toMatch(/exited 1: applygate status: .*forbidden.*\n$/);

    // Sent exactly once for the pushed commit: the deployer was called for it once, and nothing failed.
    // The edit is already on the cluster: its commit is not applied.
    expect(deployer.applies).toEqual([start, pushed]);
    expect(deployer.stats).toEqual({ accepted: 2, applied: 2, failed: 0 });
    expect((await claim()).status!.history!.map((h) => [h.commit, h.phase])).toEqual([
      [pushed, "Succeeded"],
      [start, "Succeeded"],
    ]);
  });

  it("upgrades keeping the generated Redis password, and uninstalls leaving the CRDs", async () => {
    const password = async () =>
      Buffer.from(
        (
          await kubectl("-n", NS, "get", "secret", "applygate-redis", "-o", "jsonpath={.data.password}")
        ).trim(),
        "base64",
      ).toString();
    const before = await password();
    // docs/install.md, "Upgrading, With Helm": the CRDs first (Helm never changes them), taking them
    // over from Helm's field manager: without --force-conflicts the API server refuses.
    const crdFile = join(dir, "crds.yaml");
    await writeFile(crdFile, await helm("show", "crds", CHART_DIR));
    const plain = await kubectl("apply", "--server-side", "-f", crdFile).then(
      () => "applied",
      (e: { stderr?: string }) => e.stderr ?? "",
    );
    expect(plain).toMatch(/conflict with "helm"/);
    expect(await kubectl("apply", "--server-side", "--force-conflicts", "-f", crdFile)).toMatch(
      /customresourcedefinition.apiextensions.k8s.io\/gittargets.applygate.dev serverside-applied/,
    );
    await helm(
      "upgrade",
      "applygate",
      CHART_DIR,
      "--namespace",
      NS,
      "--reuse-values",
      "--set",
      "gateway.replicas=3",
    );
    expect(await password()).toBe(before);
    expect(
      (
        await kubectl("-n", NS, "get", "deploy", "applygate-gateway", "-o", "jsonpath={.spec.replicas}")
      ).trim(),
    ).toBe("3");
    await helm("uninstall", "applygate", "--namespace", NS);
    expect(
      (
        await kubectl("get", "clusterroles", "-l", "app.kubernetes.io/part-of=applygate", "-o", "name")
      ).trim(),
    ).toBe("");
    const gone = await kubectl(
      "-n",
      "flux-system",
      "get",
      "secret",
      "applygate-redis",
      "--ignore-not-found",
      "-o",
      "name",
    );
    expect(gone.trim()).toBe("");
    const crds = (
      await kubectl("get", "crd", "-l", "app.kubernetes.io/part-of=applygate", "-o", "name")
    ).trim();
    expect(crds.split("\n")).toHaveLength(9);
  });

  it("then takes the kustomize base by server-side apply, and again (an upgrade) without a conflict", async () => {
    const base = resolve(CHART_DIR, "../base");
    // The CRDs Helm left are taken over once, as from Helm's upgrade path.
    await kubectl("apply", "--server-side", "--force-conflicts", "-k", base);
    // The aggregated ClusterRole names no rules: naming them conflicted with the aggregation
    // controller on every apply after the first.
    expect(await kubectl("apply", "--server-side", "-k", base)).toMatch(
      /clusterrole.rbac.authorization.k8s.io\/applygate-mirror-watched serverside-applied/,
    );
  });
});

function probe(url: string): Promise<{ code: number; body: string }> {
  return new Promise((resolve) => {
    const req = get(url, (res) => {
      let body = "";
      res.on("data", (d) => {
        body += String(d);
      });
      res.on("end", () => resolve({ code: res.statusCode ?? 0, body }));
    });
    req.setTimeout(2000, () => req.destroy());
    req.on("error", (err) => resolve({ code: 0, body: err.message }));
  });
}
