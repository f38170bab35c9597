import { mkdtemp } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import * as k8s from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ApiServer, readAuditLog, startApiServer } from "../../test/cluster/apiserver/index.js";
import { waitFor } from "../../test/worker/harness.js";
import { API_VERSION } from "../crds/index.js";
import { ClusterCache } from "./cluster-cache.js";
import { KubeDirectory } from "./kube.js";

const crd = (f: string) => fileURLToPath(new URL(`../../manifests/base/crds/${f}`, import.meta.url));
const BRANCHES = 20;
const keyOf = (i: number) => `git.example.com/org/repo${i}@main`;

describe("the worker's cluster cache", () => {
  let server: ApiServer;
  let auditLog: string;
  let cache: ClusterCache;
  beforeAll(async () => {
    auditLog = join(await mkdtemp(join(tmpdir(), "applygate-cache-")), "audit.jsonl");
    server = await startApiServer({ auditLog, bookmarkIntervalMs: 100 });
    await server.installCrdFile(crd("applygate.dev_gittargets.yaml"));
    await server.installCrdFile(crd("applygate.dev_gitproviders.yaml"));
    await server.installCrdFile(crd("applygate.dev_scopegrants.yaml"));
    await server
      .kubeConfig()
      .makeApiClient(k8s.CoreV1Api)
      .createNamespace({ body: { metadata: { name: "team" } } });
    const docs: string[] = [];
    for (let i = 0; i < BRANCHES; i++)
      docs.push(`apiVersion: ${API_VERSION}
kind: GitProvider
metadata: {name: repo${i}, namespace: team}
spec: {url: "https://git.example.com/org/repo${i}.git", type: github, webhookSecretRef: {name: hook}, credentialsSecretRef: {name: creds${i}}}
---
apiVersion: ${API_VERSION}
kind: GitTarget
metadata: {name: site${i}, namespace: team}
spec: {providerRef: {name: repo${i}}, branch: main, path: clusters/dev}`);
    await server.applyYaml(docs.join("\n---\n"));
    cache = new ClusterCache(server.kubeConfig());
  });
  afterAll(async () => {
    await cache.close();
    await server.close();
  });

  it("answers every branch lookup from its caches: after the first lookups, no list or get, only watches", async () => {
    const directory = new KubeDirectory(cache);
    for (let i = 0; i < BRANCHES; i++) expect((await directory.branch(keyOf(i)))?.key).toBe(keyOf(i));
    const reads = () =>
      readAuditLog(auditLog).filter(
        (e) =>
          (e.verb === "list" || e.verb === "get") &&
          ["gitproviders", "gittargets", "scopegrants", "secrets"].includes(e.objectRef?.resource ?? ""),
      );
    const before = reads().length;
    for (let round = 0; round < 5; round++)
      for (let i = 0; i < BRANCHES; i++) await directory.branch(keyOf(i));
    expect(reads().slice(before)).toEqual([]);
    // Each Secret is watched by name, never a namespace's Secrets.
    const secretWatches = readAuditLog(auditLog).filter(
      (e) => e.objectRef?.resource === "secrets" && (e.verb === "watch" || e.verb === "list"),
    );
    expect(secretWatches.length).toBeGreaterThan(0);
    for (const e of secretWatches) expect(e.requestURI).toMatch(/fieldSelector=metadata\.name%3Dcreds\d+/);
    // A kind the cluster does not serve (no claim CRDs here) holds nothing.
    expect(cache.objects("FluxClaim")?.list("team")).toEqual([]);
  });

  it("tells the branch concerned of a GitTarget created, and of its GitProvider's Secret, and no other", async () => {
    await cache.start();
    const told: Array<Set<string> | "all"> = [];
    const off = cache.onChange((keys) => told.push(keys));
    await server.applyYaml(`apiVersion: ${API_VERSION}
kind: GitTarget
metadata: {name: late, namespace: team}
spec: {providerRef: {name: repo3}, branch: main, path: clusters/late}`);
    await waitFor("the new GitTarget told", () => told.length > 0);
    expect(told).toEqual([new Set([keyOf(3)])]);
    told.length = 0;
    // The Secret is watched from the first lookup of its provider's branch on.
    await new KubeDirectory(cache).branch(keyOf(5));
    await server
      .kubeConfig()
      .makeApiClient(k8s.CoreV1Api)
      .createNamespacedSecret({
        namespace: "team",
        body: { metadata: { name: "creds5" }, stringData: { password: "p" } },
      });
    await waitFor("the Secret told", () => told.length > 0);
    expect(told).toEqual([new Set([keyOf(5)])]);
    expect((await new KubeDirectory(cache).branch(keyOf(5)))?.remote.auth).toEqual({
      username: "git",
      password: "p",
    });
    off();
  });
});
