import * as k8s from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ApiServer, startApiServer } from "../../test/cluster/apiserver/index.js";
import { agentKey, shareAgents } from "./agent.js";
import { Kube, RESOURCES } from "./index.js";
import { REQUESTS_IN_FLIGHT } from "./request-turns.js";

let server: ApiServer;
beforeAll(async () => {
  server = await startApiServer();
});
afterAll(async () => server?.close());

/** Connections the server accepted while `work` ran. */
async function connectionsFor(work: () => Promise<unknown>): Promise<number> {
  const before = server.connectionsAccepted();
  await work();
  return server.connectionsAccepted() - before;
}

describe("shared agents", () => {
  it("client-node alone opens a connection per request; through Kube requests reuse one", async () => {
    const plain = server.kubeConfig().makeApiClient(k8s.CoreV1Api);
    const sequential = async (read: () => Promise<unknown>) => {
      for (let i = 0; i < 10; i++) await read();
    };
    // What the library does by itself: the reason for agent.ts (if this ever fails, upstream
    // fixed it and the sharing can go).
    expect(await connectionsFor(() => sequential(() => plain.listNamespace()))).toBe(10);

    const kube = new Kube(server.kubeConfig());
    expect(
      await connectionsFor(() => sequential(() => kube.get(RESOURCES.gitProvider, "default", "none"))),
    ).toBe(1);
    // A burst opens what it needs at once, and the next burst reuses those.
    const burst = () =>
      Promise.all(Array.from({ length: 20 }, () => kube.get(RESOURCES.gitProvider, "default", "none")));
    const first = await connectionsFor(burst);
    expect(first).toBeGreaterThan(0);
    expect(first).toBeLessThanOrEqual(20);
    expect(await connectionsFor(burst)).toBe(0);
  });

  it("sharing twice changes nothing; every API client of the config shares the pool", async () => {
    const kc = shareAgents(shareAgents(server.kubeConfig()));
    const core = kc.makeApiClient(k8s.CoreV1Api);
    const events = kc.makeApiClient(k8s.EventsV1Api);
    await core.listNamespace(); // one connection in the pool from now on
    expect(
      await connectionsFor(async () => {
        await core.listNamespace();
        await events.listEventForAllNamespaces();
        await core.listNamespace();
      }),
    ).toBe(0);
  });
});

describe("requests in flight", () => {
  it("a burst wider than the bound waits its turn on the pooled connections instead of opening one per request", async () => {
    const kube = new Kube(server.kubeConfig());
    const wide = REQUESTS_IN_FLIGHT * 5;
    let most = 0;
    const opened = await connectionsFor(() =>
      Promise.all(
        Array.from({ length: wide }, async () => {
          const read = kube.get(RESOURCES.gitProvider, "default", "none");
          most = Math.max(most, kube.requests.held);
          return read;
        }),
      ),
    );
    expect(most).toBe(REQUESTS_IN_FLIGHT);
    expect(kube.requests).toEqual({ held: 0, waiting: 0 });
    expect(opened).toBeGreaterThan(0);
    expect(opened).toBeLessThanOrEqual(REQUESTS_IN_FLIGHT);
    // A request that fails gives its turn back.
    await expect(kube.request(() => Promise.reject(new Error("refused")))).rejects.toThrow("refused");
    expect(kube.requests).toEqual({ held: 0, waiting: 0 });
  });
});

describe("agentKey", () => {
  const cluster = { name: "c", server: "https://127.0.0.1:6443", skipTLSVerify: false };
  it("is the same for the same settings in any order, and differs with any of them", () => {
    const ca = Buffer.from("ca-1");
    const base = agentKey(cluster, { ca, rejectUnauthorized: true });
    expect(agentKey({ ...cluster }, { rejectUnauthorized: true, ca: Buffer.from("ca-1") })).toBe(base);
    expect(agentKey(cluster, { ca: Buffer.from("ca-2"), rejectUnauthorized: true })).not.toBe(base);
    expect(agentKey(cluster, { ca, rejectUnauthorized: true, cert: Buffer.from("cert") })).not.toBe(base);
    expect(
      agentKey({ ...cluster, server: "https://127.0.0.1:6444" }, { ca, rejectUnauthorized: true }),
    ).not.toBe(base);
    expect(agentKey({ ...cluster, tlsServerName: "kubernetes" }, { ca, rejectUnauthorized: true })).not.toBe(
      base,
    );
    // A value is never confused with an absent one or with its neighbour.
    expect(agentKey(cluster, { a: "x", b: undefined })).not.toBe(agentKey(cluster, { a: undefined, b: "x" }));
  });
});
