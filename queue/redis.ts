import { type ChildProcess, spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { createServer, Socket } from "node:net";
import type { ConnectionOptions } from "bullmq";
import { type ChainableCommander, Redis, type RedisOptions } from "ioredis";
import { parseRedisUrl, redisTargetOptions } from "./redis-url.js";

/**
 * How long a lost connection waits before its next attempt: 100 ms more each time, at most 2 s.
 * BullMQ's own default grows past 1 s after seven tries, to 20 s: after a failover or a Redis
 * restart that took a few seconds, the worker's and the sidecars' consumers came back up to 20 s
 * after the gateway (on ioredis's default, at most 2 s) already accepted again.
 */
export const reconnectDelay = (attempt: number): number => Math.min(attempt * 100, 2000);

/** Options BullMQ needs on every connection it blocks on, and our reconnect pace. */
export const bullConnectionOptions: RedisOptions = {
  maxRetriesPerRequest: null,
  enableReadyCheck: true,
  retryStrategy: reconnectDelay,
  // For diagnosis (docs/operations.md): each command error carries the stack of the call that sent
  // the command, not only ioredis's own. Costs an Error per command, so off by default.
  showFriendlyErrorStack: process.env.APPLYGATE_REDIS_CALL_STACKS === "1",
};

/**
 * What BullMQ's `connection` takes for the Redis setting (a plain `redis://` URL or a
 * `redis+sentinel://` one, see redis-url.ts): BullMQ opens its own connections from it.
 */
export function bullConnection(url: string): ConnectionOptions {
  // BullMQ types its own subset of ioredis options; it hands them to ioredis unchanged.
  return { ...redisTargetOptions(parseRedisUrl(url)), ...bullConnectionOptions } as ConnectionOptions;
}

/**
 * A connection whose commands sent in one turn of the event loop leave in one write: the first
 * command of a turn corks the socket and the turn's check phase uncorks it. A server handling many
 * requests per turn then sends their commands with one system call, and Redis reads them with
 * one, instead of one each; a command waits at most for the rest of the turn it was sent in.
 */
export class TurnBatchedRedis extends Redis {
  override sendCommand(...args: Parameters<Redis["sendCommand"]>): unknown {
    const socket = this.stream;
    if (this.status === "ready" && socket?.writable && socket.writableCorked === 0) {
      socket.cork();
      setImmediate(() => socket.uncork());
    }
    return super.sendCommand(...args);
  }
}

/** A connection to the Redis setting's server, or to the primary its sentinels name. */
export function connectRedis(url: string, extra: RedisOptions = {}, Client: typeof Redis = Redis): Redis {
  const { url: plain, ...target } = redisTargetOptions(parseRedisUrl(url));
  const options = { ...bullConnectionOptions, lazyConnect: false, ...target, ...extra };
  const redis = plain === undefined ? new Client(options) : new Client(plain, options);
  // Connection loss is reported to every command that needs the connection (and retried by
  // ioredis); without a listener the same loss is also printed as an "Unhandled error event".
  redis.on("error", () => {});
  return redis;
}

/**
 * A connection subscribed to `channel`, again after every reconnect, every SUBSCRIBE's rejection
 * handled: `subscribed` is the first; a later one (a reconnect) goes to `onError`. ioredis's own
 * resubscribe after a reconnect leaves its rejection unhandled (redis/ioredis#2187, fixed in 6.1),
 * so a connection closed while it is in flight — a stop during a Redis restart — ended the process.
 */
export function connectSubscriber(
  url: string,
  channel: string,
  o: { onMessage(message: string): void; onError?(err: unknown): void; extra?: RedisOptions },
): { connection: Redis; subscribed: Promise<unknown> } {
  const sub = connectRedis(url, { ...o.extra, autoResubscribe: false });
  sub.on("message", (from: string, message: string) => {
    if (from === channel) o.onMessage(message);
  });
  const subscribed = sub.subscribe(channel);
  // The first SUBSCRIBE is sent on the first connection; every later one is ours to send.
  let firstFailed = false;
  subscribed.catch(() => {
    firstFailed = true;
  });
  let readies = 0;
  sub.on("ready", () => {
    if (readies++ === 0 && !firstFailed) return;
    sub.subscribe(channel).catch((err: unknown) => o.onError?.(err));
  });
  return { connection: sub, subscribed };
}

/**
 * Whether Redis replies to PING within the deadline, asked on a connection the caller owns (e.g. the
 * sidecar's tip-check connection): while Redis is away the PING waits in its queue and the
 * deadline answers false.
 */
export async function redisAnswersPing(client: Redis, timeoutMs = 1000): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<boolean>((resolve) => {
    timer = setTimeout(() => resolve(false), timeoutMs);
  });
  const ping = client.ping().then(
    (reply) => reply === "PONG",
    () => false,
  );
  try {
    return await Promise.race([ping, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** Answers true when something speaking RESP replies +PONG on host:port within the deadline. */
export function redisAnswers(host: string, port: number, timeoutMs = 500): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = new Socket();
    let reply = "";
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(timeoutMs, () => done(false));
    socket.once("error", () => done(false));
    socket.connect(port, host, () => socket.write("PING\r\n"));
    socket.on("data", (chunk) => {
      reply += chunk.toString();
      if (reply.includes("\r\n")) done(reply.startsWith("+PONG"));
    });
  });
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const addr = srv.address();
      const port = typeof addr === "object" && addr ? addr.port : 0;
      srv.close(() => resolve(port));
    });
  });
}

export interface EmbeddedRedis {
  url: string;
  /** Where the URL came from, for the start-up screen. */
  origin: "REDIS_URL" | "local" | "private";
  stop(): Promise<void>;
}

export class RedisUnavailableError extends Error {}

/**
 * The embedded-default rule: REDIS_URL if set; else 127.0.0.1:6379 if it answers; else a private
 * redis-server from PATH on a free port without persistence, stopped with the returned handle.
 */
export async function resolveEmbeddedRedis(
  env: NodeJS.ProcessEnv = process.env,
  opts: {
    localPort?: number;
    redisServer?: string;
    /** Called before a private server is started: makes sure the command can run, or throws why not. */
    ensureServer?: (command: string) => Promise<void>;
  } = {},
): Promise<EmbeddedRedis> {
  const fromEnv = env.REDIS_URL?.trim();
  if (fromEnv) return { url: fromEnv, origin: "REDIS_URL", stop: async () => {} };
  const localPort = opts.localPort ?? 6379;
  if (await redisAnswers("127.0.0.1", localPort)) {
    return { url: `redis://127.0.0.1:${localPort}`, origin: "local", stop: async () => {} };
  }
  const command = opts.redisServer ?? "redis-server";
  await opts.ensureServer?.(command);
  const port = await freePort();
  const child = await startRedisServer(port, command);
  return {
    url: `redis://127.0.0.1:${port}`,
    origin: "private",
    stop: () => stopChild(child),
  };
}

async function startRedisServer(port: number, command: string): Promise<ChildProcess> {
  const child = spawn(
    command,
    ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--daemonize", "no"],
    { stdio: "ignore" },
  );
  const spawned = await new Promise<boolean>((resolve) => {
    child.once("error", () => resolve(false));
    child.once("spawn", () => resolve(true));
  });
  if (!spawned) {
    throw new RedisUnavailableError(
      "no Redis: set REDIS_URL, run one on 127.0.0.1:6379, or install redis-server (apt-get install -y redis-server)",
    );
  }
  // A private server must not outlive us, even when we are killed without a chance to stop it.
  process.once("exit", () => child.kill("SIGKILL"));
  for (let i = 0; i < 100; i++) {
    if (await redisAnswers("127.0.0.1", port, 200)) return child;
    await new Promise((r) => setTimeout(r, 50));
  }
  child.kill("SIGKILL");
  throw new RedisUnavailableError(`redis-server did not answer on port ${port} within 5 s`);
}

function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    child.once("exit", () => resolve());
    child.kill("SIGTERM");
    setTimeout(() => child.kill("SIGKILL"), 3000).unref();
  });
}

/**
 * The name of a command running `lua` on this client by its SHA (EVALSHA, loading the script
 * once when Redis does not know it: after a restart, a failover): the script's text is not sent
 * with every call. Called with the number of keys first, then the keys and arguments; available
 * on the client and on its pipelines.
 */
export function scriptCommand(redis: Redis, lua: string): string {
  const name = `applygate_${createHash("sha1").update(lua).digest("hex").slice(0, 16)}`;
  let defined = definedScripts.get(redis);
  if (!defined) {
    defined = new Set();
    definedScripts.set(redis, defined);
  }
  if (!defined.has(name)) {
    redis.defineCommand(name, { lua });
    defined.add(name);
  }
  return name;
}

const definedScripts = new WeakMap<Redis, Set<string>>();

/**
 * A new pipeline of `redis`, and a function queueing a call of `lua` by its SHA on it (see
 * scriptCommand; the script is defined before the pipeline is made, so the pipeline has it).
 */
export function scriptPipeline(
  redis: Redis,
  lua: string,
): { pipe: ChainableCommander; script: (numKeys: number, ...args: string[]) => void } {
  const name = scriptCommand(redis, lua);
  const pipe = redis.pipeline();
  const call = (pipe as unknown as Record<string, (...a: unknown[]) => unknown>)[name] as (
    ...a: unknown[]
  ) => unknown;
  return { pipe, script: (numKeys, ...args) => void call.call(pipe, numKeys, ...args) };
}

/** Runs `lua` by its SHA (see scriptCommand). */
export function evalScript(redis: Redis, lua: string, numKeys: number, ...args: string[]): Promise<unknown> {
  const name = scriptCommand(redis, lua);
  return (redis as unknown as Record<string, (...a: unknown[]) => Promise<unknown>>)[name]?.(
    numKeys,
    ...args,
  ) as Promise<unknown>;
}

/** How long a stop waits for a BullMQ consumer's graceful close (its jobs are short). */
export const CONSUMER_CLOSE_MS = 5_000;

/** True when `p` settled within `ms`, false when the wait gave up first. */
export async function within(p: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    p.then(() => true),
    new Promise<false>((r) => {
      timer = setTimeout(() => r(false), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

/**
 * Waits at most `ms` for a BullMQ consumer's graceful close (`closing`, already asked for); past
 * it the consumer's connections are dropped without waiting. BullMQ's close never resolves while
 * its blocking connection is still reconnecting (a stop right after Redis came back), and a second
 * close hands back that same promise. Answers whether it closed in time.
 */
export async function closedWithin(
  consumer: { disconnect(): Promise<void> },
  closing: Promise<unknown>,
  ms = CONSUMER_CLOSE_MS,
): Promise<boolean> {
  if (await within(closing, ms)) return true;
  void consumer.disconnect().catch(() => {});
  return false;
}
