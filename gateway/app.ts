/**
 * Assembles the gateway: receivers, intake, dashboard, metrics and health on one fastify app.
 * `createGateway` builds it without listening (for tests and the playground); `startGateway`
 * listens and returns its URL.
 */
import { once } from "node:events";
import { Queue } from "bullmq";
import Fastify, {
  type FastifyBaseLogger,
  type FastifyError,
  type FastifyInstance,
  type FastifyReply,
  LogController,
} from "fastify";
import metricsModule from "fastify-metrics";
import type { Redis } from "ioredis";
import { APPLIER_KINDS, attemptsQueue, QUEUES } from "../queue/contract.js";
import { errorMessage } from "../queue/errors.js";
import { replicated } from "../queue/intake.js";
import { type Logger, silentLogger } from "../queue/log.js";
import { registerQueueMetrics, stuckDeadlines } from "../queue/queue-metrics.js";
import { connectRedis, connectSubscriber, TurnBatchedRedis } from "../queue/redis.js";
import { redact } from "../queue/redis-url.js";
import { MISS_BODY, MISS_STATUS, sendMiss, withTimeout } from "./answers.js";
import { callbackRoutes } from "./callbacks.js";
import type { Catalog } from "./catalog.js";
import { type DashboardAuth, dashboardRoutes } from "./dashboard.js";
import { intakeRoutes } from "./intake.js";
import { createGatewayMetrics, type GatewayMetrics } from "./metrics.js";
import { PublicationWaiter } from "./publications.js";
import { receiverRoutes } from "./receivers.js";

// fastify-metrics is CommonJS with a `default` export.
const fastifyMetrics = metricsModule.default ?? metricsModule;

/**
 * Largest body by default: 2 MiB. GitHub documents at most 2048 commits in a push payload; its
 * recorded push examples (@octokit/webhooks-examples) hold commit objects of at most 550 bytes
 * around 7 KiB of the rest, so its largest documented push is about 1.1 MiB. 2 MiB leaves room
 * for longer messages and file lists, and holds one intake write of an object at the 1.5 MiB
 * limit etcd takes. A larger body gets 413 before any work.
 */
export const DEFAULT_BODY_LIMIT = 2 * 1024 * 1024;
/** A client has this long to send its headers, and this long for the whole request. */
export const DEFAULT_HEADERS_TIMEOUT_MS = 5_000;
export const DEFAULT_REQUEST_TIMEOUT_MS = 15_000;
/**
 * An idle keep-alive connection is closed after this long (fastify's own default is 72 s, longer
 * than a cloud load balancer's idle timeout; here an idle socket a client holds open costs the
 * gateway a descriptor for 5 s at most, as Node's http server does by default).
 */
export const DEFAULT_KEEP_ALIVE_TIMEOUT_MS = 5_000;

export interface GatewayOptions {
  redisUrl: string;
  prefix: string;
  catalog: Catalog;
  logger?: Logger;
  /** Largest accepted body in bytes; larger ones get 413 before any work. */
  bodyLimit?: number;
  /** Longest a client may take to send its headers (default 5 s); then the connection is cut. */
  headersTimeoutMs?: number;
  /** Longest a client may take to send its whole request (default 15 s); then it is answered the miss and cut. */
  requestTimeoutMs?: number;
  /** Longest a keep-alive connection may stay idle between requests (default 5 s); then it is closed. */
  keepAliveTimeoutMs?: number;
  /** Dashboard at /queues; `false` leaves it out. */
  dashboard?: { auth: DashboardAuth; readOnly: boolean } | false;
  /** Longest a `wait=published` write is held (default 30 s). */
  maxWaitMs?: number;
  /** Longest any Redis call may take before the request answers 503 (default 2 s). */
  redisTimeoutMs?: number;
  /**
   * Acknowledge a write or notice only once this many replicas hold it (Redis WAIT, within
   * redisTimeoutMs; fewer answers 503). Default 0: acknowledged once the primary holds it.
   */
  redisWaitReplicas?: number;
  /**
   * Jobs active longer than this count as stuck (default 5 min); attempt jobs only once their
   * lock ran out (their sidecar is gone), as any job does then.
   */
  stuckAfterMs?: number;
  /** Collect Node process metrics (default true). */
  processMetrics?: boolean;
  /**
   * Serve /metrics on a port of its own (startGateway listens there), not beside the receivers:
   * what is scraped never shares a port with what the Internet may reach. Unset: /metrics on the
   * main app (tests, the playground).
   */
  metricsPort?: number;
  /** Subscribe to QueueEvents for failure and stall counters (default true). */
  queueEvents?: boolean;
  now?: () => Date;
}

/** The miss as raw bytes, for answers written before any request exists. */
const RAW_MISS = `HTTP/1.1 ${MISS_STATUS} Not Found\r\ncontent-type: application/json; charset=utf-8\r\ncontent-length: ${Buffer.byteLength(MISS_BODY)}\r\nconnection: close\r\n\r\n${MISS_BODY}`;

export interface Gateway {
  app: FastifyInstance;
  metrics: GatewayMetrics;
  close(): Promise<void>;
}

/** Every queue the dashboard and the metrics show. */
export function applygateQueueNames(): string[] {
  return [QUEUES.notices, QUEUES.branches, QUEUES.reports, ...APPLIER_KINDS.map(attemptsQueue)];
}

/**
 * Connection for request-path commands: fail at once while disconnected instead of queueing the
 * command, so a request answers 503 rather than hanging. A command sent just before the
 * connection dropped is not sent again once it is back (ioredis resends such commands by
 * default): its request has answered 503 by then, and a 503 means the call was not taken, so
 * the client's retry is the only copy that may land.
 */
function requestConnection(url: string): Redis {
  return connectRedis(
    url,
    { enableOfflineQueue: false, autoResendUnfulfilledCommands: false, maxRetriesPerRequest: 1 },
    // Under load, the commands of every request handled in one turn go to Redis in one write.
    TurnBatchedRedis,
  );
}

export async function createGateway(opts: GatewayOptions): Promise<Gateway> {
  const log = opts.logger ?? silentLogger();
  const now = opts.now ?? (() => new Date());
  const redisTimeoutMs = opts.redisTimeoutMs ?? 2000;
  const redis = requestConnection(opts.redisUrl);
  const queues = new Map(
    applygateQueueNames().map((name) => [name, new Queue(name, { connection: redis, prefix: opts.prefix })]),
  );
  for (const q of queues.values()) q.on("error", (err) => log.debug({ err: err.message }, "queue error"));
  const notices = queues.get(QUEUES.notices)!;
  const branches = queues.get(QUEUES.branches)!;
  const metrics = createGatewayMetrics();
  const publications = new PublicationWaiter(redis, opts.prefix, (channel, onMessage) =>
    connectSubscriber(opts.redisUrl, channel, {
      onMessage,
      onError: (err) => log.warn({ err: errorMessage(err) }, "could not subscribe to publications again"),
      extra: { maxRetriesPerRequest: 1 },
    }),
  );
  const eventConnections: Redis[] = [];
  const queueMetrics = registerQueueMetrics({
    registry: metrics.registry,
    queues: [...queues.values()],
    stuckAfterMs: stuckDeadlines(opts.stuckAfterMs ?? 5 * 60_000),
    ...(opts.queueEvents === false
      ? {}
      : {
          eventsConnection: () => {
            const c = connectRedis(opts.redisUrl);
            eventConnections.push(c);
            return c;
          },
        }),
    onError: (err) => log.debug({ err: errorMessage(err) }, "queue metrics unavailable"),
  });

  // Commands fail at once while disconnected; give the first connection a moment before serving.
  await withTimeout(
    redis.status === "ready" ? Promise.resolve() : once(redis, "ready").then(() => undefined),
    redisTimeoutMs,
    "connect",
  ).catch(() =>
    log.warn({ redis: redact(opts.redisUrl) }, "Redis not answering yet; requests get 503 until it does"),
  );

  const app = Fastify({
    loggerInstance: log as FastifyBaseLogger,
    logController: new LogController({ disableRequestLogging: true }),
    bodyLimit: opts.bodyLimit ?? DEFAULT_BODY_LIMIT,
    // A client that sends headers and then nothing is cut within seconds, not Node's minutes;
    // the deadlines are checked every half second instead of every 30 s.
    requestTimeout: opts.requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS,
    keepAliveTimeout: opts.keepAliveTimeoutMs ?? DEFAULT_KEEP_ALIVE_TIMEOUT_MS,
    http: {
      headersTimeout: opts.headersTimeoutMs ?? DEFAULT_HEADERS_TIMEOUT_MS,
      connectionsCheckingInterval: 500,
    },
    // A malformed URL (bad escapes, an over-long id) is a miss like any other: no echo of the path.
    frameworkErrors: (_err, _req, reply) => sendMiss(reply),
    // A request the HTTP parser refuses (huge headers, bad framing) answers the miss bytes too.
    clientErrorHandler: (err: NodeJS.ErrnoException, socket) => {
      if (err.code === "ECONNRESET" || !socket.writable) return socket.destroy();
      socket.end(RAW_MISS);
    },
    // Flux matches receivers on the full URI; we match on the path segment only, so trailing
    // slashes and queries do not turn one provider into a miss with a different answer.
    routerOptions: { ignoreTrailingSlash: true },
  });

  await app.register(fastifyMetrics, {
    endpoint: null,
    defaultMetrics: { enabled: opts.processMetrics !== false, register: metrics.registry },
    routeMetrics: {
      enabled: { histogram: true, summary: false },
      // Both are created even when one is off; keep them off the global registry.
      overrides: { histogram: { registers: [metrics.registry] }, summary: { registers: [] } },
      routeBlacklist: ["/metrics", "/healthz", "/readyz"],
    },
  });

  app.setNotFoundHandler((_req, reply) => sendMiss(reply));
  app.setErrorHandler((err: FastifyError, req, reply) => {
    if (err.code === "FST_ERR_CTP_BODY_TOO_LARGE" || err.statusCode === 413) {
      return reply.code(413).send({ error: "body too large" });
    }
    if (req.url.startsWith("/hook/")) return sendMiss(reply);
    const status = err.statusCode && err.statusCode >= 400 && err.statusCode < 500 ? err.statusCode : 500;
    if (status === 500) log.error({ err }, "request failed");
    return reply.code(status).send({ error: status === 500 ? "internal error" : err.message });
  });

  const waitReplicas = opts.redisWaitReplicas ?? 0;
  // WAIT runs on the connection that enqueued: it waits for that connection's writes.
  const confirm = waitReplicas > 0 ? () => replicated(redis, waitReplicas, redisTimeoutMs) : undefined;
  const deps = {
    catalog: opts.catalog,
    metrics,
    log,
    redisTimeoutMs,
    now,
    ...(confirm ? { replicated: confirm } : {}),
  };
  await app.register(receiverRoutes({ ...deps, notices }));
  await app.register(
    intakeRoutes({
      ...deps,
      redis,
      prefix: opts.prefix,
      notices,
      branches,
      publications,
      maxWaitMs: opts.maxWaitMs ?? 30_000,
    }),
  );
  // The webhook applier's callback API: tools report the phases of the applies they were asked for.
  await app.register(callbackRoutes({ ...deps, redis, prefix: opts.prefix }));
  if (opts.dashboard) {
    await app.register(dashboardRoutes({ queues: [...queues.values()], ...opts.dashboard }));
  }

  if (opts.metricsPort === undefined)
    app.get("/metrics", { config: { disableMetrics: true } }, serveMetrics(metrics));
  app.get("/healthz", async () => ({ status: "ok" }));
  app.get("/readyz", async (_req, reply) => {
    const loaded = opts.catalog.loaded();
    const redisOk = await withTimeout(redis.ping(), redisTimeoutMs, "ping").then(
      (r) => r === "PONG",
      () => false,
    );
    const body = { redis: redisOk, catalog: loaded };
    return reply.code(redisOk && loaded ? 200 : 503).send(body);
  });

  return {
    app,
    metrics,
    async close() {
      await app.close();
      publications.close();
      await queueMetrics.close();
      await Promise.all([...queues.values()].map((q) => q.close().catch(() => {})));
      for (const c of eventConnections) c.disconnect();
      redis.disconnect();
    },
  };
}

/** The /metrics handler: the registry's text exposition. */
const serveMetrics = (metrics: GatewayMetrics) => async (_req: unknown, reply: FastifyReply) => {
  const text = await metrics.registry.metrics();
  return reply.type(metrics.registry.contentType).send(text);
};

export interface StartedGateway extends Gateway {
  url: string;
  /** Where /metrics is served when it has a port of its own. */
  metricsUrl?: string;
}

export async function startGateway(
  opts: GatewayOptions & { host?: string; port?: number },
): Promise<StartedGateway> {
  const gw = await createGateway(opts);
  const host = opts.host ?? "127.0.0.1";
  if (opts.metricsPort === undefined) {
    const address = await gw.app.listen({ host, port: opts.port ?? 0 });
    return { ...gw, url: address };
  }
  // Only /metrics here; every other path is a plain 404.
  const metricsApp = Fastify({
    logger: false,
    keepAliveTimeout: opts.keepAliveTimeoutMs ?? DEFAULT_KEEP_ALIVE_TIMEOUT_MS,
  });
  metricsApp.get("/metrics", serveMetrics(gw.metrics));
  try {
    const metricsUrl = await metricsApp.listen({ host, port: opts.metricsPort });
    const url = await gw.app.listen({ host, port: opts.port ?? 0 });
    return {
      ...gw,
      url,
      metricsUrl,
      async close() {
        await metricsApp.close();
        await gw.close();
      },
    };
  } catch (err) {
    await metricsApp.close();
    await gw.close();
    throw err;
  }
}

export { MISS_BODY, MISS_STATUS };
