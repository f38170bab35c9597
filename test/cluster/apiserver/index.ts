/**
 * The simulated Kubernetes API server: plain node:http, in-process, in memory. It speaks the REST
 * protocol the real client and kubectl use (see docs/testing.md for what it does and does not do).
 */
import { randomBytes } from "node:crypto";
import { readFile } from "node:fs/promises";
import { createServer, type Server } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import type { KubeConfig } from "@kubernetes/client-node";
import { parseAllDocuments } from "yaml";
import { makeKubeConfig, writeKubeconfigFile } from "../kubeconfig.js";
import { AuditLog } from "./audit.js";
import { type AuthRule, serviceAccountUser, type UserRules, Users } from "./auth.js";
import { type FailSpec, Faults } from "./faults.js";
import { type Context, handle } from "./handlers.js";
import { Objects } from "./objects.js";
import type { Policy } from "./rbac.js";
import { Registry } from "./registry.js";
import { Store } from "./store.js";

export type { AuditEvent } from "./audit.js";
export { auditTail, readAuditLog } from "./audit.js";
export type { AuthRule, UserRules } from "./auth.js";
export type { FailSpec } from "./faults.js";
export type { KObject } from "./types.js";

export interface ApiServerOptions {
  port?: number;
  host?: string;
  /** Interval between BOOKMARK events on watches that allow them (default 1000 ms). */
  bookmarkIntervalMs?: number;
  /** How many changes watches can resume from before a resourceVersion is too old (default 10000). */
  watchCacheSize?: number;
  /**
   * Requests without a token: "rbac" (default) authenticates them as system:anonymous (group
   * system:unauthenticated) with only what RBAC grants that user or group, as kube-apiserver does
   * with anonymous auth on (the bootstrap policy lets it read /healthz, /livez, /readyz and
   * /version; everything else is 403). "deny" answers 401, as with --anonymous-auth=false.
   */
  anonymous?: "rbac" | "deny";
  /** Clock for timestamps (creationTimestamp, managedFields time, deletionTimestamp). */
  now?: () => number;
  /** Appends every request to this file as an audit.k8s.io/v1 Event, one JSON line each. */
  auditLog?: string;
}

export interface ApiServerFaults {
  /** Delay every request, or those matching method/pathPrefix, by this many milliseconds (0 to stop). */
  latency(ms: number, scope?: { method?: string; pathPrefix?: string }): void;
  /** The next n requests matching method/pathPrefix fail with the status given. */
  failNext(n: number, spec: FailSpec): void;
  /** How many of those scripted failures no request has taken yet (of paths under the prefix). */
  pending(pathPrefix?: string): number;
  /**
   * End every open watch whose path starts with the prefix; returns how many. Clean end by
   * default (clients re-watch from their last resourceVersion); `abrupt` breaks the connection.
   */
  dropWatches(pathPrefix?: string, abrupt?: boolean): number;
  /** Forget the change history: watches from any earlier resourceVersion get 410 Gone. */
  expireHistory(): void;
  reset(): void;
}

export interface ApiServer {
  url: string;
  kubeConfig(user?: string): KubeConfig;
  /** The bearer token of `user` (default the admin), for a test that speaks HTTP to the server itself. */
  token(user?: string): string;
  writeKubeconfig(path: string, user?: string): Promise<void>;
  /** A user with rules of its own, or "all" (a superuser, group system:masters). */
  addUser(name: string, token: string, rules: AuthRule[] | "all" | "rbac"): void;
  /** TCP connections the server has accepted so far (whether clients reuse theirs). */
  connectionsAccepted(): number;
  /** How many requests `user` has made so far (a watch counts once): what a component costs the server. */
  requestsBy(user: string): number;
  /**
   * Writes down every request `user` makes from now on, as `METHOD path` (a watch as
   * `WATCH path`), and returns the list it fills; `stop` forgets it.
   */
  traceRequests(user: string): { requests: string[]; stop(): void };
  /**
   * A ServiceAccount's token: it authenticates as system:serviceaccount:<namespace>:<name> and may
   * do exactly what the stored Roles, ClusterRoles and bindings grant it. Returns the username.
   */
  addServiceAccount(namespace: string, name: string): string;
  auditLog?: string;
  installCrdFile(path: string): Promise<void>;
  /** Applies every document of a YAML text through the API (server-side apply, manager "applygate-sim"). */
  applyYaml(text: string): Promise<void>;
  faults: ApiServerFaults;
  /** Current global resourceVersion. */
  resourceVersion(): number;
  close(): Promise<void>;
}

export async function startApiServer(opts: ApiServerOptions = {}): Promise<ApiServer> {
  const now = opts.now ?? Date.now;
  const store = new Store(opts.watchCacheSize ?? 10_000);
  const registry = new Registry();
  const objects = new Objects(store, registry, now);
  objects.bootstrap();
  objects.rbacPolicy = () => storedPolicy(registry, objects);
  const users = new Users();
  const adminToken = randomBytes(16).toString("hex");
  users.add("admin", adminToken, "all");
  const faults = new Faults();
  const ctx: Context = {
    store,
    registry,
    objects,
    users,
    faults,
    requests: new Map(),
    traces: new Map(),
    anonymous:
      opts.anonymous === "deny"
        ? undefined
        : { name: "system:anonymous", groups: ["system:unauthenticated"], rules: "rbac" },
    bookmarkIntervalMs: opts.bookmarkIntervalMs ?? 1000,
    now,
    gitVersion: "v1.32.0-applygate-sim",
    policy: () => storedPolicy(registry, objects),
    audit: opts.auditLog ? new AuditLog(opts.auditLog, now) : undefined,
  };
  const sockets = new Set<Socket>();
  const server: Server = createServer((req, res) => {
    void handle(ctx, req, res);
  });
  // Like kube-apiserver, never close an idle connection: clients close theirs. With Node's 5 s
  // default, a client reusing a pooled socket just as the server times it out (timers fire late
  // on a loaded machine, or after a synchronous step blocked the event loop) got ECONNRESET on a
  // request it cannot retry.
  server.keepAliveTimeout = 0;
  let accepted = 0;
  server.on("connection", (s) => {
    accepted++;
    sockets.add(s);
    s.on("close", () => sockets.delete(s));
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(opts.port ?? 0, opts.host ?? "127.0.0.1", () => resolve());
  });
  const addr = server.address() as AddressInfo;
  const host = addr.family === "IPv6" ? `[${addr.address}]` : addr.address;
  const url = `http://${host}:${addr.port}`;

  const identity = (user = "admin") => {
    const token = users.tokenOf(user);
    if (!token) throw new Error(`no user named ${user}`);
    return { server: url, user, token };
  };

  const applyYaml = async (text: string) => {
    for (const doc of parseAllDocuments(text)) {
      const o = doc.toJSON() as {
        apiVersion?: string;
        kind?: string;
        metadata?: { name?: string; namespace?: string };
      } | null;
      if (!o?.kind) continue;
      const type = registry
        .all()
        .find((t) => t.kind === o.kind && (t.group ? `${t.group}/${t.version}` : t.version) === o.apiVersion);
      if (!type) throw new Error(`no resource serves ${o.apiVersion} ${o.kind}`);
      const base = type.group ? `/apis/${type.group}/${type.version}` : `/api/${type.version}`;
      const ns = type.namespaced ? `/namespaces/${o.metadata?.namespace ?? "default"}` : "";
      const res = await fetch(
        `${url}${base}${ns}/${type.plural}/${o.metadata?.name}?fieldManager=applygate-sim&force=true`,
        {
          method: "PATCH",
          headers: { "Content-Type": "application/apply-patch+yaml", Authorization: `Bearer ${adminToken}` },
          body: JSON.stringify(o),
        },
      );
      if (!res.ok)
        throw new Error(`applying ${o.kind} ${o.metadata?.name}: ${res.status} ${await res.text()}`);
    }
  };

  return {
    url,
    kubeConfig: (user) => makeKubeConfig(identity(user)),
    token: (user) => identity(user).token,
    writeKubeconfig: (path, user) => writeKubeconfigFile(path, identity(user)),
    addUser: (name, token, rules) => users.add(name, token, rules),
    requestsBy: (user) => ctx.requests.get(user) ?? 0,
    connectionsAccepted: () => accepted,
    traceRequests(user) {
      const requests: string[] = [];
      ctx.traces.set(user, requests);
      return { requests, stop: () => ctx.traces.get(user) === requests && ctx.traces.delete(user) };
    },
    addServiceAccount: (namespace, name) => {
      const sa = serviceAccountUser(namespace, name);
      users.add(sa.name, randomBytes(16).toString("hex"), "rbac" satisfies UserRules, sa.groups);
      return sa.name;
    },
    auditLog: opts.auditLog,
    installCrdFile: async (path) => applyYaml(await readFile(path, "utf8")),
    applyYaml,
    faults: {
      latency: (ms, scope) => faults.latency(ms, scope),
      failNext: (n, spec) => faults.failNext(n, spec),
      pending: (prefix) => faults.pending(prefix),
      dropWatches: (prefix, abrupt) => faults.dropWatches(prefix, abrupt),
      expireHistory: () => store.compact(),
      reset: () => faults.reset(),
    },
    resourceVersion: () => store.currentRv(),
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => {
          ctx.audit?.close();
          resolve();
        });
      }),
  };
}

function storedPolicy(registry: Registry, objects: Objects): Policy {
  const all = (plural: string) => objects.list(registry.find("rbac.authorization.k8s.io", "v1", plural)!);
  return {
    roles: all("roles"),
    clusterRoles: all("clusterroles"),
    roleBindings: all("rolebindings"),
    clusterRoleBindings: all("clusterrolebindings"),
  };
}
