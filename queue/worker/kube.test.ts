import { mkdtemp } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import * as k8s from "@kubernetes/client-node";
import pino from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ApiServer, readAuditLog, startApiServer } from "../../test/cluster/apiserver/index.js";
import { waitFor } from "../../test/worker/harness.js";
import { API_VERSION, GROUP, VERSION } from "../crds/index.js";
import type { DirectoryOptions } from "../directory.js";
import { Kube } from "../kube/index.js";
import { silentLogger } from "../log.js";
import { ClusterCache } from "./cluster-cache.js";
import { type CredentialsReporter, KubeDirectory, KubeStatusSink, patchChangesNothing } from "./kube.js";
import type { PublicationReport } from "./status.js";

const crd = (f: string) => fileURLToPath(new URL(`../../manifests/base/crds/${f}`, import.meta.url));
const ref = { group: GROUP, version: VERSION, plural: "gittargets", namespace: "team", name: "site" };

describe("GitTarget status and branch specs through the Kubernetes API", () => {
  let server: ApiServer;
  let custom: k8s.CustomObjectsApi;
  let auditLog: string;
  beforeAll(async () => {
    auditLog = join(await mkdtemp(join(tmpdir(), "applygate-status-")), "audit.jsonl");
    server = await startApiServer({ auditLog });
    await server.installCrdFile(crd("applygate.dev_gittargets.yaml"));
    await server.installCrdFile(crd("applygate.dev_gitproviders.yaml"));
    const kc = server.kubeConfig();
    custom = kc.makeApiClient(k8s.CustomObjectsApi);
    await kc.makeApiClient(k8s.CoreV1Api).createNamespace({ body: { metadata: { name: "team" } } });
    await server.applyYaml(`
apiVersion: ${API_VERSION}
kind: GitProvider
metadata: {name: repo, namespace: team}
spec: {url: "https://git.example.com/org/site.git", type: github, webhookSecretRef: {name: hook}}
---
apiVersion: ${API_VERSION}
kind: GitTarget
metadata: {name: site, namespace: team}
spec: {providerRef: {name: repo}, branch: main, path: clusters/dev, commitWindow: {idleSeconds: 2, maxSeconds: 30}}
`);
  });
  const caches: ClusterCache[] = [];
  /** A directory on caches of its own, as one worker process holds them. */
  const directoryOf = (kc: k8s.KubeConfig, reporter?: CredentialsReporter, options?: DirectoryOptions) => {
    const cache = new ClusterCache(kc);
    caches.push(cache);
    return new KubeDirectory(cache, reporter, options);
  };
  afterAll(async () => {
    await Promise.all(caches.map((c) => c.close()));
    await server.close();
  });

  const retrying: PublicationReport = {
    branchKey: "team/repo:git.example.com/org/site@main",
    state: "Retrying",
    retryingSince: Date.parse("2026-03-01T00:00:00Z"),
    lastError: "answered 503",
    nextRetryAt: Date.parse("2026-03-01T00:00:40Z"),
    intakePaused: true,
    retainedWrites: 12,
    retainedBytes: 20_000,
  };

  it("writes publication and conditions on the status subresource, retrying a lost race", async () => {
    const sink = new KubeStatusSink(new Kube(server.kubeConfig()), silentLogger());
    // Every status PATCH conflicts twice before it can land.
    server.faults.failNext(2, {
      method: "PATCH",
      pathPrefix: "/apis/applygate.dev/v1alpha1/namespaces/team/gittargets/site/status",
      status: 409,
    });
    await sink.report([{ namespace: "team", name: "site" }], retrying);
    const got = (await custom.getNamespacedCustomObject(ref)) as { status: Record<string, any> };
    expect(got.status.publication).toMatchObject({
      state: "Retrying",
      intakePaused: true,
      retainedWrites: 12,
      lastError: "answered 503",
    });
    const byType = Object.fromEntries(got.status.conditions.map((c: any) => [c.type, c]));
    expect(byType.Ready).toMatchObject({ status: "False", reason: "PublicationRetrying" });
    expect(byType.Reconciling).toMatchObject({ status: "True" });
    expect(byType.Stalled).toMatchObject({ status: "True", reason: "IntakePaused" });

    await sink.report([{ namespace: "team", name: "site" }], {
      branchKey: retrying.branchKey,
      state: "Published",
      commit: "a".repeat(40),
      intakePaused: false,
      retainedWrites: 0,
      retainedBytes: 0,
    });
    const after = (await custom.getNamespacedCustomObject(ref)) as { status: Record<string, any> };
    expect(after.status.publication).toMatchObject({
      state: "Published",
      commit: "a".repeat(40),
      intakePaused: false,
    });
    expect(after.status.publication.lastError).toBeUndefined();
    const ready = after.status.conditions.find((c: any) => c.type === "Ready");
    expect(ready).toMatchObject({ status: "True", reason: "Published" });
  });

  it("patches no status that already shows the report, also from a replica that just took the branch", async () => {
    const published: PublicationReport = {
      branchKey: retrying.branchKey,
      state: "Published",
      commit: "b".repeat(40),
      intakePaused: false,
      retainedWrites: 0,
      retainedBytes: 0,
    };
    const target = [{ namespace: "team", name: "site" }];
    const patches = () =>
      readAuditLog(auditLog).filter((e) => e.verb === "patch" && e.objectRef?.subresource === "status")
        .length;
    const kc = server.kubeConfig();
    const first = new ClusterCache(kc);
    caches.push(first);
    await first.start();
    const sink = new KubeStatusSink(first.kube, silentLogger(), Date.now, 8, first);
    await sink.report(target, published);
    const once = patches();
    // Once the cache holds our write, the same report costs nothing.
    await waitFor("the cache to hold the write", () =>
      patchChangesNothing(first.targets.get("site", "team")?.status, {
        publication: { commit: "b".repeat(40) },
      }),
    );
    await sink.report(target, published);
    expect(patches()).toBe(once);
    // A replica that takes the branch over reports what the GitTarget shows already: no patch.
    const second = new ClusterCache(kc);
    caches.push(second);
    await second.start();
    await new KubeStatusSink(second.kube, silentLogger(), Date.now, 8, second).report(target, published);
    expect(patches()).toBe(once);
    // A change is written.
    await new KubeStatusSink(second.kube, silentLogger(), Date.now, 8, second).report(target, {
      ...published,
      commit: "c".repeat(40),
    });
    expect(patches()).toBe(once + 1);
    const got = (await custom.getNamespacedCustomObject(ref)) as { status: Record<string, any> };
    expect(got.status.publication.commit).toBe("c".repeat(40));
  });

  it("a status patch changes nothing only when every field it names holds that value already", () => {
    const current = { publication: { state: "Published", commit: "a" }, conditions: [{ type: "Ready" }] };
    expect(
      patchChangesNothing(current, { publication: { state: "Published", commit: "a", lastError: null } }),
    ).toBe(true);
    expect(patchChangesNothing(current, { publication: { commit: "b" } })).toBe(false);
    expect(patchChangesNothing(current, { publication: { lastError: "x" } })).toBe(false);
    expect(patchChangesNothing(current, { publication: { commit: null } })).toBe(false);
    expect(patchChangesNothing(current, { conditions: [{ type: "Ready" }] })).toBe(true);
    expect(patchChangesNothing(current, { conditions: [{ type: "Ready" }, { type: "Stalled" }] })).toBe(
      false,
    );
    expect(patchChangesNothing(current, { observedGeneration: 2 })).toBe(false);
    expect(patchChangesNothing({}, { publication: { state: "Published" } })).toBe(false);
  });

  it("records a refused write as condition WriteRefused and an Event with an action, kept by later reports", async () => {
    const sink = new KubeStatusSink(new Kube(server.kubeConfig()), silentLogger());
    const target = { namespace: "team", name: "site" };
    await sink.refused(target, {
      writeId: "w-1",
      reason: "Unstorable",
      message: "changes.0.object.metadata.name: bad",
      object: "ClusterRole .git:x",
      at: Date.parse("2026-03-01T00:00:00Z"),
    });
    await sink.report([target], {
      ...retrying,
      state: "Published",
      commit: "b".repeat(40),
      intakePaused: false,
    });
    const after = (await custom.getNamespacedCustomObject(ref)) as any;
    const refused = after.status.conditions.find((c: any) => c.type === "WriteRefused");
    expect(refused).toMatchObject({ status: "True", reason: "Unstorable" });
    expect(refused.message).toMatch(/write w-1 refused/);
    expect(after.status.conditions.find((c: any) => c.type === "Ready")).toMatchObject({ status: "True" });
    const events = (await custom.listNamespacedCustomObject({
      group: "events.k8s.io",
      version: "v1",
      namespace: "team",
      plural: "events",
    })) as any;
    const event = events.items.find((e: any) => e.reason === "WriteRefused");
    expect(event).toMatchObject({
      action: "Refuse",
      type: "Warning",
      regarding: { kind: "GitTarget", name: "site" },
    });
    expect(event.note).toContain("ClusterRole .git:x");
    await sink.refused(target, undefined);
    const cleared = (await custom.getNamespacedCustomObject(ref)) as any;
    expect(cleared.status.conditions.find((c: any) => c.type === "WriteRefused")).toMatchObject({
      status: "False",
      reason: "Published",
    });
  });

  it("resolves a branch key to its repository, branch and targets", async () => {
    const spec = await directoryOf(server.kubeConfig()).branch("team/repo:git.example.com/org/site@main");
    expect(spec).toMatchObject({
      branch: "main",
      remote: { url: "https://git.example.com/org/site.git" },
      targets: [
        { namespace: "team", name: "site", path: "clusters/dev", window: { idleMs: 2000, maxMs: 30_000 } },
      ],
    });
    // No ScopeGrant kind installed: nobody holds a grant, the target keeps its own namespace.
    expect(spec?.targets[0]?.scope).toMatchObject({
      namespace: "team",
      namespaces: [],
      kinds: [],
      grants: [],
    });
  });

  it("reads the ScopeGrants naming a target into its scope", async () => {
    await server.installCrdFile(crd("applygate.dev_scopegrants.yaml"));
    await server.applyYaml(`
apiVersion: ${API_VERSION}
kind: ScopeGrant
metadata: {name: team-web}
spec:
  targets: [{namespace: team}]
  namespaces: [web]
  kinds: [{group: rbac.authorization.k8s.io, kind: ClusterRole}]
---
apiVersion: ${API_VERSION}
kind: ScopeGrant
metadata: {name: others}
spec: {targets: [{namespace: other}], namespaces: ["*"]}
`);
    const spec = await directoryOf(server.kubeConfig()).branch("team/repo:git.example.com/org/site@main");
    expect(spec?.targets[0]?.scope).toMatchObject({
      namespaces: ["web"],
      kinds: [{ group: "rbac.authorization.k8s.io", kind: "ClusterRole" }],
      grants: ["team-web"],
    });
  });

  it("says when a GitProvider's credentials Secret cannot be read: a log line and CredentialsAvailable on its GitTargets", async () => {
    await server.applyYaml(`
apiVersion: ${API_VERSION}
kind: GitProvider
metadata: {name: locked, namespace: team}
spec: {url: "https://git.example.com/org/locked.git", type: github, webhookSecretRef: {name: hook}, credentialsSecretRef: {name: creds}}
---
apiVersion: ${API_VERSION}
kind: GitTarget
metadata: {name: locked-site, namespace: team}
spec: {providerRef: {name: locked}, branch: main, path: clusters/dev}
`);
    const key = "team/locked:git.example.com/org/locked@main";
    const lines: Array<{ msg: string; reason?: string }> = [];
    const log = pino({ level: "info" }, { write: (l: string) => void lines.push(JSON.parse(l)) });
    const condition = async () =>
      (
        (await custom.getNamespacedCustomObject({ ...ref, name: "locked-site" })) as {
          status?: { conditions?: Array<{ type: string; status: string; reason: string }> };
        }
      ).status?.conditions?.find((c) => c.type === "CredentialsAvailable");

    // A worker whose RBAC lacks the Secret: 403, told once however often the branch is read.
    server.addUser("no-secrets", "no-secrets-token", [
      { verbs: ["get", "list", "watch"], groups: ["applygate.dev"], resources: ["*"] },
      { verbs: ["get", "patch"], groups: ["applygate.dev"], resources: ["gittargets/status"] },
    ]);
    const restricted = server.kubeConfig("no-secrets");
    const forbidden = directoryOf(restricted, { log, status: new KubeStatusSink(new Kube(restricted), log) });
    await forbidden.branch(key);
    await forbidden.branch(key);
    expect(await condition()).toMatchObject({ status: "False", reason: "SecretForbidden" });
    expect(lines.filter((l) => l.reason === "SecretForbidden")).toHaveLength(1);

    // Missing, then created: the condition follows.
    const admin = server.kubeConfig();
    const directory = directoryOf(admin, { log, status: new KubeStatusSink(new Kube(admin), log) });
    await directory.branch(key);
    expect(await condition()).toMatchObject({ status: "False", reason: "SecretNotFound" });
    await admin.makeApiClient(k8s.CoreV1Api).createNamespacedSecret({
      namespace: "team",
      body: { metadata: { name: "creds" }, stringData: { username: "u", password: "p" } },
    });
    // The Secret's watch tells the cache; the next lookup reads it.
    await waitFor("the Secret seen", async () => {
      await directory.branch(key);
      return (await condition())?.reason === "SecretRead";
    });
    expect(await condition()).toMatchObject({ status: "True", reason: "SecretRead" });
  });

  it("does not send a GitProvider's credentials over plain http unless the operator allows it: CredentialsAvailable=False InsecureTransport", async () => {
    await server.applyYaml(`
apiVersion: ${API_VERSION}
kind: GitProvider
metadata: {name: clear, namespace: team}
spec: {url: "http://git.example.com/org/clear.git", type: github, webhookSecretRef: {name: hook}, credentialsSecretRef: {name: clear-creds}}
---
apiVersion: ${API_VERSION}
kind: GitTarget
metadata: {name: clear-site, namespace: team}
spec: {providerRef: {name: clear}, branch: main, path: clusters/dev}
---
apiVersion: v1
kind: Secret
metadata: {name: clear-creds, namespace: team}
stringData: {username: u, password: p}
`);
    const key = "team/clear:git.example.com/org/clear@main";
    const log = pino({ level: "silent" });
    const admin = server.kubeConfig();
    const condition = async () =>
      (
        (await custom.getNamespacedCustomObject({ ...ref, name: "clear-site" })) as {
          status?: { conditions?: Array<{ type: string; status: string; reason: string; message: string }> };
        }
      ).status?.conditions?.find((c) => c.type === "CredentialsAvailable");
    const refused = directoryOf(admin, { log, status: new KubeStatusSink(new Kube(admin), log) });
    expect((await refused.branch(key))?.remote).toEqual({ url: "http://git.example.com/org/clear.git" });
    expect(await condition()).toMatchObject({
      status: "False",
      reason: "InsecureTransport",
      message: expect.stringContaining("--allow-http-credentials"),
    });
    const allowed = directoryOf(
      admin,
      { log, status: new KubeStatusSink(new Kube(admin), log) },
      { allowHttpCredentials: true },
    );
    expect((await allowed.branch(key))?.remote).toEqual({
      url: "http://git.example.com/org/clear.git",
      auth: { username: "u", password: "p" },
      allowHttpCredentials: true,
    });
  });
});
