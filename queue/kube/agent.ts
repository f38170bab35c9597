/**
 * One keep-alive connection pool per cluster for every request of a process. client-node 1.4
 * builds a new HTTP agent for each request and each watch it starts (fixed upstream only in 2.x,
 * which needs Node 22: kubernetes-client/javascript#2893), so every API request opened a
 * connection of its own — on a real cluster a TLS handshake per request, on both sides — and a
 * burst of writes (a thousand branches' first statuses) left thousands of sockets to close.
 *
 * The agent is keyed by everything client-node builds one from (server, proxy, TLS settings and
 * the client certificate), so a changed certificate on disk gets a new pool.
 */
import { createHash } from "node:crypto";
import type { Agent } from "node:http";
import type * as k8s from "@kubernetes/client-node";

/**
 * An idle pooled connection is closed after this long: well before the idle limits of API
 * servers and the load balancers in front of them, so a request never reuses a socket the other
 * end is closing.
 */
export const IDLE_SOCKET_MS = 30_000;

/** Pools kept per process; one more (a rotated certificate) retires the oldest. */
const MAX_POOLS = 8;

type Cluster = NonNullable<ReturnType<k8s.KubeConfig["getCurrentCluster"]>>;
type AgentOptions = Record<string, unknown>;
/** The private KubeConfig method every request and watch builds its agent with. */
type CreateAgent = (cluster: Cluster | null, options: AgentOptions) => Agent;

const shared = Symbol("applygate.sharedAgents");

/** The key of an agent: the cluster's address and TLS settings, with secrets hashed. */
export function agentKey(cluster: Cluster | null, options: AgentOptions): string {
  const hash = createHash("sha256");
  const add = (v: unknown) => {
    if (v === undefined || v === null) hash.update("\0-");
    else if (Buffer.isBuffer(v)) hash.update(Buffer.concat([Buffer.from("\0b"), v]));
    else if (Array.isArray(v)) for (const x of v) add(x);
    else hash.update(`\0s${String(v)}`);
  };
  for (const v of [cluster?.server, cluster?.proxyUrl, cluster?.skipTLSVerify, cluster?.tlsServerName])
    add(v);
  for (const k of Object.keys(options).sort()) {
    hash.update(`\0k${k}`);
    add(options[k]);
  }
  return hash.digest("hex");
}

/**
 * Makes every request and watch of `kc` share keep-alive agents (one per key above). Returns the
 * same KubeConfig; sharing twice changes nothing.
 */
export function shareAgents(kc: k8s.KubeConfig): k8s.KubeConfig {
  const target = kc as unknown as { createAgent: CreateAgent; [shared]?: true };
  if (target[shared]) return kc;
  const build = target.createAgent.bind(kc);
  const pools = new Map<string, Agent>();
  target.createAgent = (cluster, options) => {
    const key = agentKey(cluster, options);
    const known = pools.get(key);
    if (known) return known;
    const agent = build(cluster, { ...options, keepAlive: true, timeout: IDLE_SOCKET_MS });
    pools.set(key, agent);
    if (pools.size > MAX_POOLS) {
      const [oldest, old] = pools.entries().next().value as [string, Agent];
      pools.delete(oldest);
      // Its requests in flight finish; only the idle sockets go now.
      for (const sockets of Object.values(old.freeSockets)) for (const s of sockets ?? []) s.destroy();
    }
    return agent;
  };
  target[shared] = true;
  return kc;
}
