// applygate as deployed on the real control plane: installed with `kubectl apply --server-side -k`,
// each component run as its manifests run it under its ServiceAccount's real token (test/real/
// applygate.ts), a tenant's objects made by a namespace editor. After each test the API server's
// own audit.log is read: no 403 and no 422 for any product component, and its requests printed.
import { randomBytes } from "node:crypto";
import { chmod, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { KubeConfig } from "@kubernetes/client-node";
import { Queue } from "bullmq";
import pino from "pino";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import { branchKey, QUEUES } from "../../queue/contract.js";
import { objectPath } from "../../queue/git/layout.js";
import { acceptWrite } from "../../queue/intake.js";
import { writePublishedKey } from "../../queue/keys.js";
import { connectRedis } from "../../queue/redis.js";
import { gitOk } from "../git/cli.js";
import { type Deployer, startDeployer } from "../playground/deployer.js";
import { unstorableWrite } from "../support/unstorable-write.js";
import { untilWith } from "../support/wait.js";
import { identityKubeconfig, installFluxCrds, kubectl, listeningAddresses, readAudit } from "./applygate.js";
import { CONTROL_PLANE, findRealBinaries } from "./binaries.js";
import { deployedSuite } from "./deployed.js";
import {
  applierGrantYaml,
  gitProviderYaml,
  gitTargetYaml,
  secretYaml,
  teamTokens,
  webhookTeamYaml,
} from "./tenant.js";

const bins = findRealBinaries(CONTROL_PLANE);
if (!bins.built) console.warn(`\n!!! SKIPPED test/real/applygate.real.test.ts: ${bins.message}\n`);

const until = untilWith({ timeoutMs: 60_000, everyMs: 100, retryErrors: true });
const BASE_NAMESPACES = new Set([
  "default",
  "kube-system",
  "kube-public",
  "kube-node-lease",
  "applygate-system",
  "flux-system",
]);
const api = "applygate.dev/v1alpha1";

type Obj = {
  metadata: { name: string; finalizers?: string[] };
  spec?: Record<string, unknown>;
  status?: { conditions?: { type: string; status: string; reason: string; message?: string }[] } & Record<
    string,
    unknown
  >;
};

describe.skipIf(!bins.built)("applygate as deployed on a real control plane", () => {
  const d = deployedSuite({
    components: ["gateway", "worker", "mirror"],
    sidecars: ["webhook", "flux"],
    // Flux's own CRDs (no Flux runs here): the ApplierGrant test holds a Kustomization.
    prepare: installFluxCrds,
    // Namespaces reset before the audit check (what the components did during the test).
    reset: async () => {
      const namespaces = await d.core.listNamespace();
      const made = (namespaces.items ?? [])
        .map((n) => n.metadata!.name!)
        .filter((n) => !BASE_NAMESPACES.has(n));
      if (made.length) {
        // As docs/install.md uninstalls: the claims first, each released by its sidecar.
        for (const ns of made)
          await kubectlOk([
            "-n",
            ns,
            "delete",
            "fluxclaims,argocdclaims,webhookclaims",
            "--all",
            "--wait=true",
            "--timeout=60s",
          ]);
        const r = await kubectl(d.cluster, ["delete", "namespace", ...made, "--wait=true", "--timeout=90s"]);
        expect(r.code, r.err).toBe(0);
      }
    },
    setupTimeoutMs: 300_000,
  });
  const { running, cleanups } = d;
  const kubectlOk = d.kubectlOk;

  // -------------------------------------------------------------------------------------------

  /** A tenant namespace, a person with `edit` there (a ServiceAccount's token), and the opt-ins. */
  async function tenant(): Promise<{ ns: string; kubeconfig: string; kc: KubeConfig; username: string }> {
    const ns = `team-${randomBytes(3).toString("hex")}`;
    const admin = (args: string[]) => kubectlOk(args);
    await admin(["create", "namespace", ns]);
    await admin(["-n", ns, "create", "serviceaccount", "alice"]);
    await admin([
      "-n",
      ns,
      "create",
      "rolebinding",
      "alice-edit",
      "--clusterrole=edit",
      `--serviceaccount=${ns}:alice`,
    ]);
    // docs/install.md step 4 and docs/webhook-applier.md: the namespace opts in to Secret reads.
    await admin([
      "-n",
      ns,
      "create",
      "rolebinding",
      "applygate-secret-reader",
      "--clusterrole=applygate-secret-reader",
      "--serviceaccount=applygate-system:applygate-gateway",
    ]);
    await admin([
      "-n",
      ns,
      "create",
      "rolebinding",
      "applygate-secret-watcher",
      "--clusterrole=applygate-secret-watcher",
      "--serviceaccount=applygate-system:applygate-worker",
    ]);
    await admin([
      "-n",
      ns,
      "create",
      "rolebinding",
      "applygate-webhook-secret-watcher",
      "--clusterrole=applygate-secret-watcher",
      "--serviceaccount=applygate-system:applygate-webhook",
    ]);
    const kubeconfig = join(d.installed.dir, `${ns}-alice.kubeconfig`);
    const username = await identityKubeconfig(d.cluster, ns, "alice", kubeconfig);
    const kc = new KubeConfig();
    kc.loadFromFile(kubeconfig);
    return { ns, kubeconfig, kc, username };
  }

  const condition = (o: Obj, type: string) => o.status?.conditions?.find((c) => c.type === type);

  interface Team {
    ns: string;
    kubeconfig: string;
    repo: string;
    repoUrl: string;
    folder: string;
    intakeToken: string;
    deployer: Deployer;
    key: string;
  }

  /**
   * A team's repository wired up by its namespace editor: GitProvider, GitTarget (commit window of
   * one second), a WebhookClaim calling a deployer that applies the folder with its own identity,
   * and the Git host's push webhook to the gateway's receiver path.
   */
  async function team(): Promise<Team> {
    const t = await tenant();
    const repo = `repo-${t.ns}`;
    const folder = "apps/web";
    const repoUrl = await d.git.createRepo(repo, { "README.md": "# team\n" });
    const tokens = teamTokens();
    // The deployer: its own ServiceAccount, allowed to apply ConfigMaps in the team's namespace.
    await kubectlOk(["-n", t.ns, "create", "serviceaccount", "deployer"]);
    await kubectlOk([
      "-n",
      t.ns,
      "create",
      "role",
      "deployer",
      "--verb=get,create,patch",
      "--resource=configmaps",
    ]);
    await kubectlOk([
      "-n",
      t.ns,
      "create",
      "rolebinding",
      "deployer",
      "--role=deployer",
      `--serviceaccount=${t.ns}:deployer`,
    ]);
    const deployerKc = new KubeConfig();
    const deployerPath = join(d.installed.dir, `${t.ns}-deployer.kubeconfig`);
    await identityKubeconfig(d.cluster, t.ns, "deployer", deployerPath);
    deployerKc.loadFromFile(deployerPath);
    const deployer = await startDeployer({
      key: tokens.hmacKey,
      folder,
      repoUrl,
      gatewayUrl: () => running.gateway!.url("http"),
      kubeConfig: deployerKc,
      log: pino({ level: "silent" }),
    });
    cleanups.push(() => deployer.close());

    // Everything below by the namespace editor, with kubectl.
    await kubectlOk(["apply", "-f", "-"], {
      kubeconfig: t.kubeconfig,
      input: webhookTeamYaml(t.ns, { repoUrl, folder, deployerUrl: deployer.url, ...tokens }),
    });
    const provider = await until(async () => {
      const p = (await d.custom.getNamespacedCustomObject({
        group: "applygate.dev",
        version: "v1alpha1",
        plural: "gitproviders",
        namespace: t.ns,
        name: "repo",
      })) as Obj;
      return typeof p.status?.webhookPath === "string" && (p.status.webhookPath as string);
    }, "the gateway to write the GitProvider's webhook path");
    const removeHook = d.git.addWebhook({
      url: `${running.gateway!.url("http")}${provider}`,
      secret: tokens.hookToken,
    });
    cleanups.push(async () => removeHook());
    return {
      ns: t.ns,
      kubeconfig: t.kubeconfig,
      repo,
      repoUrl,
      folder,
      intakeToken: tokens.intakeToken,
      deployer,
      key: tokens.hmacKey,
    };
  }

  const gitDir = (repo: string) => join(d.git.root, `${repo}.git`);
  const commits = async (repo: string) =>
    (await gitOk(["--git-dir", gitDir(repo), "log", "--format=%H %s", "main"])).split("\n").filter(Boolean);
  const fileAt = async (repo: string, path: string) =>
    gitOk(["--git-dir", gitDir(repo), "show", `main:${path}`]).catch(() => undefined);

  const configMap = (ns: string, name: string, data: Record<string, string>) => ({
    apiVersion: "v1",
    kind: "ConfigMap",
    metadata: { name, namespace: ns },
    data,
  });
  const cmPath = (t: Team, name: string) =>
    objectPath(t.folder, { apiVersion: "v1", kind: "ConfigMap", namespace: t.ns, name });

  async function postWrite(t: Team, body: Record<string, unknown>) {
    const res = await fetch(
      `${running.gateway!.url("http")}/v1/targets/${t.ns}/web/writes?wait=published&timeout=30`,
      {
        method: "POST",
        headers: { authorization: `Bearer ${t.intakeToken}`, "content-type": "application/json" },
        body: JSON.stringify(body),
      },
    );
    return { status: res.status, body: (await res.json().catch(() => ({}))) as Record<string, unknown> };
  }

  const clusterData = async (ns: string, name: string) =>
    (await d.core.readNamespacedConfigMap({ name, namespace: ns }).catch(() => undefined))?.data;

  // -------------------------------------------------------------------------------------------

  it("installs cleanly: every object of the overlays accepted, the CRDs established", async () => {
    for (const [overlay, out] of Object.entries(d.installed.applied)) {
      const lines = out.trim().split("\n");
      expect(
        lines.filter((l) => !/ serverside-applied$/.test(l)),
        `kubectl apply --server-side -k ${overlay}`,
      ).toEqual([]);
    }
    const crds = await kubectlOk(["get", "crd", "-l", "app.kubernetes.io/part-of=applygate", "-o", "name"]);
    expect(crds.trim().split("\n")).toHaveLength(9);
    const vap = await kubectlOk([
      "get",
      "validatingadmissionpolicy",
      "applygate-approver-identity",
      "-o",
      "name",
    ]);
    expect(vap.trim()).toBe(
      "validatingadmissionpolicy.admissionregistration.k8s.io/applygate-approver-identity",
    );
    // The built-in roles gained our kinds: edit may write claims (ClusterRole aggregation).
    const edit = JSON.parse(await kubectlOk(["get", "clusterrole", "edit", "-o", "json"])) as {
      rules: { apiGroups?: string[]; resources?: string[]; verbs: string[] }[];
    };
    expect(
      edit.rules.some(
        (r) =>
          r.apiGroups?.includes("applygate.dev") &&
          r.resources?.includes("webhookclaims") &&
          r.verbs.includes("create"),
      ),
    ).toBe(true);
  });

  it("starts every component as deployed; each is ready and listens on loopback only", async () => {
    for (const [name, r] of Object.entries(running)) {
      expect(r!.username, name).toBe(d.identities[name]);
      const readyz = await fetch(`${r!.readyUrl}/readyz`).then((res) => res.status);
      expect(readyz, `${name} /readyz`).toBe(200);
      for (const port of Object.values(r!.ports))
        expect(listeningAddresses(port), `${name} port ${port}`).toEqual(["127.0.0.1"]);
    }
    // Each one is its ServiceAccount on the API server, never an admin.
    const events = readAudit(d.cluster.auditLogPath).events;
    for (const [name, username] of Object.entries(d.identities)) {
      const own = events.filter((e) => e.user.username === username);
      expect(own.length, `${name} made requests as ${username}`).toBeGreaterThan(0);
      expect(own.every((e) => !(e.user.groups ?? []).includes("system:masters"))).toBe(true);
    }
  });

  it("takes a namespace editor's GitTarget and claim through intake to a commit, applied by its deployer", async () => {
    const t = await team();
    const before = await commits(t.repo);
    const answer = await postWrite(t, {
      changes: [{ op: "upsert", object: configMap(t.ns, "settings", { color: "blue" }) }],
      author: { name: "Ada", email: "ada@example.com" },
      message: "settings: blue",
      save: true,
    });
    expect(answer).toMatchObject({ status: 200, body: { published: true } });
    const after = await commits(t.repo);
    expect(after.length).toBe(before.length + 1);
    expect(parse((await fileAt(t.repo, cmPath(t, "settings")))!)).toMatchObject({ data: { color: "blue" } });
    // The worker sends the apply for that commit; the deployer applies it with its own identity.
    await until(async () => (await clusterData(t.ns, "settings"))?.color === "blue", "the deployer's apply");
    expect(t.deployer.applies.at(-1)).toBe(after[0]!.split(" ")[0]);
    const claim = (await d.custom.getNamespacedCustomObject({
      group: "applygate.dev",
      version: "v1alpha1",
      plural: "webhookclaims",
      namespace: t.ns,
      name: "deployer",
    })) as Obj;
    expect(condition(claim, "Ready")?.status).toBe("True");
  });

  it("mirrors a `kubectl edit` of a watched ConfigMap into Git as one commit, and not the apply after it", async () => {
    const t = await team();
    await kubectlOk(["apply", "-f", "-"], {
      kubeconfig: t.kubeconfig,
      input: `
apiVersion: ${api}
kind: WatchRule
metadata: {name: web, namespace: ${t.ns}}
spec:
  targetRef: {name: web}
  kinds: [{group: "", version: v1, kind: ConfigMap}]
  selector: {matchLabels: {app: web}}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: web, namespace: ${t.ns}, labels: {app: web}}
data: {greeting: hello}
`,
    });
    // The rule is Ready and the ConfigMap's initial state is in Git.
    await until(async () => {
      const rule = (await d.custom.getNamespacedCustomObject({
        group: "applygate.dev",
        version: "v1alpha1",
        plural: "watchrules",
        namespace: t.ns,
        name: "web",
      })) as Obj;
      return condition(rule, "Ready")?.status === "True";
    }, "the WatchRule Ready");
    await until(
      async () => (await fileAt(t.repo, cmPath(t, "web")))?.includes("greeting: hello"),
      "the snapshot in Git",
    );
    await until(async () => t.deployer.applies.length > 0, "the apply of the snapshot");
    const before = await commits(t.repo);

    const editor = join(d.installed.dir, `${t.ns}-editor.sh`);
    await writeFile(editor, "#!/bin/sh\nsed -i 's/greeting: hello/greeting: edited/' \"$1\"\n");
    await chmod(editor, 0o755);
    await kubectlOk(["-n", t.ns, "edit", "configmap", "web"], {
      kubeconfig: t.kubeconfig,
      env: { KUBE_EDITOR: editor, EDITOR: editor },
    });
    expect((await clusterData(t.ns, "web"))?.greeting).toBe("edited");
    await until(
      async () => (await fileAt(t.repo, cmPath(t, "web")))?.includes("greeting: edited"),
      "the edit in Git",
    );
    const after = await commits(t.repo);
    expect(after.length, after.join("\n")).toBe(before.length + 1);
    expect(await gitOk(["--git-dir", gitDir(t.repo), "log", "-1", "--format=%an", "main"])).toBe(
      "kubectl-edit\n",
    );

    // A push by somebody else that the deployer applies: its write is the applier's own, kept out
    // of Git (Git holds its content already).
    const work = join(d.installed.dir, `${t.ns}-clone`);
    await gitOk(["clone", "-q", t.repoUrl, work]);
    const file = join(work, cmPath(t, "web"));
    await writeFile(file, (await readFile(file, "utf8")).replace("greeting: edited", "greeting: pushed"));
    await gitOk(["-c", "user.name=Bob", "-c", "user.email=bob@example.com", "commit", "-qam", "pushed"], {
      cwd: work,
    });
    await gitOk(["push", "-q", "origin", "HEAD:main"], { cwd: work });
    const pushed = (await gitOk(["rev-parse", "HEAD"], { cwd: work })).trim();
    await until(
      async () => (await clusterData(t.ns, "web"))?.greeting === "pushed",
      "the deployer to apply the push",
    );
    expect(t.deployer.applies.at(-1)).toBe(pushed);
    await new Promise((r) => setTimeout(r, 3_000));
    expect((await commits(t.repo)).map((c) => c.split(" ")[0])).toEqual([
      pushed,
      ...after.map((c) => c.split(" ")[0]),
    ]);
  });

  it("settles a poison write past the door as refused, and a later write still lands", async () => {
    const t = await team();
    const author = { name: "Ada", email: "ada@example.com" };
    expect(
      await postWrite(t, {
        changes: [{ op: "upsert", object: configMap(t.ns, "before", { n: "1" }) }],
        author,
        save: true,
      }),
    ).toMatchObject({ status: 200 });
    const client = connectRedis(d.redis.url);
    const branches = new Queue(QUEUES.branches, { connection: client, prefix: d.installed.prefix });
    const poison = unstorableWrite({
      target: { namespace: t.ns, name: "web" },
      branchKey: branchKey({ namespace: t.ns, name: "repo" }, t.repoUrl, "main"),
      path: t.folder,
      author,
    });
    try {
      expect((await acceptWrite(client, d.installed.prefix, poison, branches)).accepted).toBe(true);
      const later = await postWrite(t, {
        changes: [{ op: "upsert", object: configMap(t.ns, "after", { n: "2" }) }],
        author,
        save: true,
      });
      expect(later).toMatchObject({ status: 200, body: { published: true } });
      expect(await client.get(writePublishedKey(d.installed.prefix, poison.id))).toMatch(
        /^refused: Unstorable: /,
      );
    } finally {
      await branches.close();
      client.disconnect();
    }
    expect(await fileAt(t.repo, cmPath(t, "after"))).toContain('n: "2"');
    await until(async () => (await clusterData(t.ns, "after"))?.n === "2", "the later write applied");
    // The refusal is an Event on the GitTarget (the worker may create events.k8s.io Events).
    const events = JSON.parse(await kubectlOk(["-n", t.ns, "get", "events.events.k8s.io", "-o", "json"])) as {
      items: { reason?: string; action?: string; regarding?: { name?: string } }[];
    };
    expect(
      events.items.some((e) => e.reason === "WriteRefused" && e.action && e.regarding?.name === "web"),
    ).toBe(true);
  });

  it("refuses a claim naming another namespace's Kustomization until an ApplierGrant there allows it", async () => {
    const t = await tenant();
    const repoUrl = await d.git.createRepo(`platform-${t.ns}`, { "README.md": "# platform\n" });
    await kubectlOk(["apply", "--server-side", "-f", "-"], {
      input: `
apiVersion: source.toolkit.fluxcd.io/v1
kind: GitRepository
metadata: {name: platform, namespace: flux-system}
spec: {interval: 1h, url: "${repoUrl}", ref: {branch: main}}
---
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {name: infra, namespace: flux-system}
spec:
  interval: 1h
  prune: true
  path: ./apps/team
  sourceRef: {kind: GitRepository, name: platform}
`,
    });
    cleanups.push(async () => {
      await kubectl(d.cluster, [
        "-n",
        "flux-system",
        "delete",
        "kustomization",
        "infra",
        "--ignore-not-found",
      ]);
      await kubectl(d.cluster, [
        "-n",
        "flux-system",
        "delete",
        "gitrepository",
        "platform",
        "--ignore-not-found",
      ]);
      await kubectl(d.cluster, ["-n", "flux-system", "delete", "appliergrant", t.ns, "--ignore-not-found"]);
    });
    await kubectlOk(["apply", "-f", "-"], {
      kubeconfig: t.kubeconfig,
      input: [
        secretYaml(t.ns, "hook", { token: randomBytes(8).toString("hex") }),
        gitProviderYaml(t.ns, repoUrl),
        `apiVersion: ${api}
kind: FluxClaim
metadata: {name: infra, namespace: ${t.ns}}
spec: {kustomizationRef: {name: infra, namespace: flux-system}}
`,
        gitTargetYaml(t.ns, {
          name: "infra",
          folder: "apps/team",
          claim: { kind: "FluxClaim", name: "infra" },
        }),
      ].join("---\n"),
    });
    const claim = async () =>
      (await d.custom.getNamespacedCustomObject({
        group: "applygate.dev",
        version: "v1alpha1",
        plural: "fluxclaims",
        namespace: t.ns,
        name: "infra",
      })) as Obj;
    const ks = async () =>
      (await d.custom.getNamespacedCustomObject({
        group: "kustomize.toolkit.fluxcd.io",
        version: "v1",
        plural: "kustomizations",
        namespace: "flux-system",
        name: "infra",
      })) as Obj;
    const refused = await until(async () => {
      const c = condition(await claim(), "Ready");
      return c?.reason === "ApplierNamespaceNotAllowed" && c;
    }, "the claim refused");
    expect(refused.status).toBe("False");
    expect((await claim()).metadata.finalizers ?? []).toEqual([]);
    expect((await ks()).spec?.suspend).toBeUndefined();

    // The namespace editor may not grant herself flux-system's applier.
    const grant = applierGrantYaml("flux-system", { from: t.ns, kind: "FluxClaim", name: "infra" });
    const denied = await kubectl(d.cluster, ["apply", "-f", "-"], { kubeconfig: t.kubeconfig, input: grant });
    expect(denied.code).not.toBe(0);
    expect(denied.err).toMatch(/forbidden/i);

    await kubectlOk(["apply", "-f", "-"], { input: grant });
    // The claim now takes the Kustomization: the sidecar suspends it. (It is held, InControl, once
    // kustomize-controller has handled the suspend's token: with no Flux running here the claim
    // stays Suspending; the §4 scenarios on real Flux go on from there.)
    await until(async () => (await ks()).spec?.suspend === true, "the sidecar to suspend the Kustomization");
    const taken = await until(async () => {
      const c = condition(await claim(), "Ready");
      return c && c.reason !== "ApplierNamespaceNotAllowed" && c;
    }, "the claim no longer refused");
    expect(taken.reason).toBe("Suspending");
    expect((await claim()).metadata.finalizers?.length).toBeGreaterThan(0);
  });
});
