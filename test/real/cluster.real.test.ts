// The real control plane itself (test/real/cluster.ts): what the real tier builds on.
import { existsSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { connect } from "node:net";
import {
  AuthenticationV1Api,
  CoreV1Api,
  KubeConfig,
  type V1ConfigMap,
  VersionApi,
} from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { processAlive } from "../support/machine-lock.js";
import { until } from "../support/wait.js";
import { CONTROL_PLANE, findRealBinaries } from "./binaries.js";
import { type RealCluster, startRealCluster } from "./cluster.js";

const bins = findRealBinaries(CONTROL_PLANE);
if (!bins.built) {
  console.warn(`\n!!! SKIPPED test/real/cluster.real.test.ts: ${bins.message}\n`);
}

const patience = { timeoutMs: 60_000, everyMs: 200 };
const statusOf = (err: unknown): number | undefined => (err as { code?: number }).code;

interface AuditEvent {
  verb: string;
  user: { username: string };
  objectRef?: { resource?: string; namespace?: string; name?: string };
  responseStatus?: { code?: number };
}

describe.skipIf(!bins.built)("a real control plane on 127.0.0.1", () => {
  let cluster: RealCluster;
  let core: CoreV1Api;

  beforeAll(async () => {
    cluster = await startRealCluster();
    core = cluster.kubeConfig().makeApiClient(CoreV1Api);
  }, 240_000);
  afterAll(async () => {
    await cluster?.stop();
  }, 60_000);

  it("answers with the Kubernetes version the build stamped, on loopback", async () => {
    expect(new URL(cluster.server).hostname).toBe("127.0.0.1");
    const version = await cluster.kubeConfig().makeApiClient(VersionApi).getCode();
    expect(version.gitVersion).toMatch(/^v1\.\d+\.\d+$/);
    expect(version.gitVersion).toBe(`v${version.major}.${version.minor}.${version.gitVersion.split(".")[2]}`);
  });

  it("stores a namespace and a ConfigMap for the admin, and its audit log records who did it", async () => {
    await core.createNamespace({ body: { metadata: { name: "real-smoke" } } });
    const body: V1ConfigMap = {
      metadata: { name: "settings", namespace: "real-smoke" },
      data: { color: "blue" },
    };
    await core.createNamespacedConfigMap({ namespace: "real-smoke", body });
    const read = await core.readNamespacedConfigMap({ name: "settings", namespace: "real-smoke" });
    expect(read.data).toEqual({ color: "blue" });

    const created = await until(
      async () => {
        const events = (await readFile(cluster.auditLogPath, "utf8"))
          .split("\n")
          .filter(Boolean)
          .map((line) => JSON.parse(line) as AuditEvent);
        return events.find(
          (e) =>
            e.verb === "create" && e.objectRef?.resource === "configmaps" && e.objectRef.name === "settings",
        );
      },
      "the ConfigMap's create in audit.log",
      patience,
    );
    expect(created.user.username).toBe("admin");
    expect(created.responseStatus?.code).toBe(201);
  });

  it("issues a ServiceAccount a token (TokenRequest) that RBAC holds to what it was granted", async () => {
    await core.createNamespace({ body: { metadata: { name: "real-tokens" } } });
    await core.createNamespacedServiceAccount({
      namespace: "real-tokens",
      body: { metadata: { name: "reader" } },
    });
    const issued = await core.createNamespacedServiceAccountToken({
      name: "reader",
      namespace: "real-tokens",
      body: { spec: { audiences: [], expirationSeconds: 600 } },
    });
    const token = issued.status?.token;
    expect(token).toBeTruthy();

    const asReader = new KubeConfig();
    asReader.loadFromString(await readFile(cluster.kubeconfigPath, "utf8"));
    asReader.users[0] = { name: asReader.users[0]!.name, token: token! };
    const review = await asReader.makeApiClient(AuthenticationV1Api).createSelfSubjectReview({ body: {} });
    expect(review.status?.userInfo?.username).toBe("system:serviceaccount:real-tokens:reader");
    const denied = await asReader
      .makeApiClient(CoreV1Api)
      .listNamespacedConfigMap({ namespace: "real-tokens" })
      .then(
        () => 200,
        (err: unknown) => statusOf(err),
      );
    expect(denied).toBe(403);
  });

  it("deletes dependents in the foreground and a namespace with what it holds (controller-manager)", async () => {
    await core.createNamespace({ body: { metadata: { name: "real-gc" } } });
    const owner = await core.createNamespacedConfigMap({
      namespace: "real-gc",
      body: { metadata: { name: "owner" } },
    });
    await core.createNamespacedConfigMap({
      namespace: "real-gc",
      body: {
        metadata: {
          name: "dependent",
          ownerReferences: [
            {
              apiVersion: "v1",
              kind: "ConfigMap",
              name: "owner",
              uid: owner.metadata!.uid!,
              blockOwnerDeletion: true,
            },
          ],
        },
      },
    });
    // Argo CD prunes this way: without the garbage collector the owner would stay, finalized, for good.
    await core.deleteNamespacedConfigMap({
      name: "owner",
      namespace: "real-gc",
      propagationPolicy: "Foreground",
    });
    const gone = (name: string) => () =>
      core.readNamespacedConfigMap({ name, namespace: "real-gc" }).then(
        () => false,
        (err: unknown) => statusOf(err) === 404,
      );
    await until(gone("dependent"), "the dependent to be collected", patience);
    await until(gone("owner"), "the owner to be deleted after its dependent", patience);

    await core.deleteNamespace({ name: "real-gc" });
    await until(
      () =>
        core.readNamespace({ name: "real-gc" }).then(
          () => false,
          (err: unknown) => statusOf(err) === 404,
        ),
      "the namespace to be finalized and removed",
      patience,
    );
  });

  it("stops cleanly: every process ends, its port closes and the folder is removed", async () => {
    const { dir, server, processes } = cluster;
    expect(processes.map((p) => p.name)).toEqual(["etcd", "kube-apiserver", "kube-controller-manager"]);
    expect(processes.every((p) => processAlive(p.pid))).toBe(true);
    await cluster.stop();
    expect(processes.filter((p) => processAlive(p.pid))).toEqual([]);
    expect(existsSync(dir)).toBe(false);
    const port = Number(new URL(server).port);
    const refused = await new Promise<string>((resolve) => {
      const socket = connect(port, "127.0.0.1");
      socket.once("connect", () => {
        socket.destroy();
        resolve("connected");
      });
      socket.once("error", (err: NodeJS.ErrnoException) => resolve(err.code ?? "error"));
    });
    expect(refused).toBe("ECONNREFUSED");
  });
});
