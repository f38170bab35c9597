import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ApiServer, startApiServer } from "../../test/cluster/apiserver/index.js";
import { type IsolatedRedis, isolatedRedis } from "../../test/redis/isolated.js";
import { untilWith } from "../../test/support/wait.js";
import { branchKey } from "../contract.js";
import { crdFiles } from "../crds/files.js";
import { knownBranchesKey } from "../keys.js";
import { silentLogger } from "../log.js";
import { discoverBranches } from "./branch-discovery.js";
import { ClusterCache } from "./cluster-cache.js";

const until = untilWith({ timeoutMs: 10_000, everyMs: 20 });

describe("branch discovery", () => {
  let server: ApiServer;
  let redis: IsolatedRedis;
  beforeAll(async () => {
    server = await startApiServer();
    for (const f of crdFiles()) await server.installCrdFile(f);
    redis = await isolatedRedis("discovery");
  });
  afterAll(async () => {
    await redis?.cleanup();
    await server?.close();
  });

  it("knows a GitTarget's branch as soon as it and its GitProvider exist, before any write or push", async () => {
    const cache = new ClusterCache(server.kubeConfig(), silentLogger());
    await cache.start();
    const discovery = discoverBranches({
      source: cache,
      redis: redis.client,
      prefix: redis.prefix,
      log: silentLogger(),
    });
    try {
      const known = () => redis.client.smembers(knownBranchesKey(redis.prefix));
      await discovery.settled();
      expect(await known()).toEqual([]);
      await server.applyYaml(`
apiVersion: v1
kind: Namespace
metadata: {name: team-a}
---
apiVersion: applygate.dev/v1alpha1
kind: GitProvider
metadata: {name: repo, namespace: team-a}
spec: {url: "https://git.example/org/repo.git", type: gitea, webhookSecretRef: {name: hook}}
---
apiVersion: applygate.dev/v1alpha1
kind: GitTarget
metadata: {name: web, namespace: team-a}
spec:
  providerRef: {name: repo}
  branch: main
  path: apps/web
  claimRef: {kind: FluxClaim, name: web}
`);
      const key = branchKey(
        { namespace: "team-a", name: "repo" },
        "https://git.example/org/repo.git",
        "main",
      );
      await until(async () => (await known()).includes(key), "the branch to be known");
      expect(await known()).toEqual([key]);
    } finally {
      discovery.stop();
      await cache.close();
    }
  });

  it("reads the branches once for a burst of changes, and sends a list already recorded no more", async () => {
    const listeners = new Set<(keys: Set<string> | "all") => void>();
    let keys = ["a", "b"];
    let reads = 0;
    const source = {
      branchKeys: () => {
        reads++;
        return keys;
      },
      onChange: (l: (keys: Set<string> | "all") => void) => {
        listeners.add(l);
        return () => listeners.delete(l);
      },
    };
    const prefix = `${redis.prefix}burst:`;
    const discovery = discoverBranches({ source, redis: redis.client, prefix, log: silentLogger() });
    const tell = () => {
      for (const l of listeners) l("all");
    };
    try {
      await discovery.settled();
      expect(reads).toBe(1);
      const sent = await redis.client.info("commandstats");
      const sadds = (info: string) => Number(/cmdstat_sadd:calls=(\d+)/.exec(info)?.[1] ?? 0);
      // A first listing tells every object: a thousand changes, one read of the keys.
      for (let i = 0; i < 1000; i++) tell();
      await discovery.settled();
      expect(reads).toBe(2);
      // The same list (the source builds it once per version) was recorded already: no SADD.
      expect(sadds(await redis.client.info("commandstats"))).toBe(sadds(sent));
      keys = ["a", "b", "c"];
      tell();
      await discovery.settled();
      expect((await redis.client.smembers(knownBranchesKey(prefix))).sort()).toEqual(["a", "b", "c"]);
    } finally {
      discovery.stop();
    }
  });
});
