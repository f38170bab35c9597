/**
 * What a process needs before it starts (the API server, Redis), asked once each at start, until
 * `--startup-wait` runs out. A process that cannot reach one says so in one line naming the
 * address and the answer, and exits non-zero: run outside a cluster with a wrong kubeconfig or no
 * Redis, a person reads why at once; in a cluster, Kubernetes restarts it with back-off and
 * `kubectl logs --previous` shows the same line. Once started, a lost connection is retried as
 * before (a process is not restarted for an outage).
 */
import { existsSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import * as k8s from "@kubernetes/client-node";
import { Redis } from "ioredis";
import { backoffMs } from "./backoff.js";
import { ConfigError, parsers, type Setting } from "./config.js";
import { errorMessage } from "./errors.js";
import { parseRedisUrl, redact, redisTargetOptions } from "./redis-url.js";

/** Something a process needs did not answer at start: the one line says what, where, and its answer. */
export class Unreachable extends Error {
  override name = "Unreachable";
}

export const startupWaitSetting: Setting<number> = {
  flag: "startup-wait",
  env: "APPLYGATE_STARTUP_WAIT",
  help: "how long the API server and Redis are asked for at start before the process gives up, says which did not answer, and exits 1",
  parse: parsers.duration,
  default: 30_000,
  defaultLabel: "30s",
};

/**
 * A short human answer for a failed request: the system's error code and what it means, an HTTP
 * status, or the message's first line. Pure.
 */
export function describeAnswer(err: unknown): string {
  const e = err as { code?: unknown; cause?: unknown; message?: unknown; statusCode?: unknown };
  const codes: Record<string, string> = {
    ECONNREFUSED: "connection refused",
    ECONNRESET: "connection reset",
    ENOTFOUND: "no such host",
    EAI_AGAIN: "name lookup failed",
    EHOSTUNREACH: "host unreachable",
    ENETUNREACH: "network unreachable",
    ETIMEDOUT: "timed out",
    CERT_HAS_EXPIRED: "its certificate has expired",
    DEPTH_ZERO_SELF_SIGNED_CERT: "its certificate is self-signed and not trusted",
    UNABLE_TO_VERIFY_LEAF_SIGNATURE: "its certificate is not trusted",
    SELF_SIGNED_CERT_IN_CHAIN: "its certificate is not trusted",
    ERR_TLS_CERT_ALTNAME_INVALID: "its certificate does not name this address",
  };
  for (let c: typeof e | undefined = e, depth = 0; c && depth < 5; c = c.cause as typeof e, depth++) {
    if (typeof c.code === "string" && codes[c.code]) return `${codes[c.code]} (${c.code})`;
    if (Array.isArray((c as { errors?: unknown }).errors)) {
      const first = (c as { errors: unknown[] }).errors[0];
      if (first) return describeAnswer(first);
    }
  }
  if (typeof e?.code === "number") return `HTTP ${e.code}${httpWord(e.code)}`;
  const message = typeof e?.message === "string" ? e.message : String(err);
  const http = /HTTP-Code: (\d{3})/.exec(message);
  if (http) return `HTTP ${http[1]}${httpWord(Number(http[1]))}`;
  return message.split("\n")[0]?.trim() || "no answer";
}

const HTTP_WORDS: Record<number, string> = {
  401: "Unauthorized",
  403: "Forbidden",
  404: "Not Found",
  500: "Internal Server Error",
  503: "Service Unavailable",
};
const httpWord = (code: number) => (HTTP_WORDS[code] ? ` ${HTTP_WORDS[code]}` : "");

/**
 * Asks `probe` until it succeeds or `waitMs` ran out; then throws its last failure as one line. The
 * pauses back off, the last one cut to end at the deadline, so the process gives up neither before
 * the wait ran out nor a whole pause after it; a probe gets at least a second, so one started just
 * before the deadline may end up to a second after it. Time is read on the monotonic clock: a step
 * of the wall clock (a VM restored from a snapshot, NTP) neither ends the wait early nor stretches it.
 */
export async function untilAnswered(
  what: (answer: string) => string,
  probe: (timeoutMs: number) => Promise<void>,
  waitMs: number,
  clock: { now(): number; sleep(ms: number): Promise<void> } = monotonicClock,
): Promise<void> {
  const deadline = clock.now() + waitMs;
  for (let attempt = 0; ; attempt++) {
    try {
      await probe(Math.max(1_000, Math.min(5_000, deadline - clock.now())));
      return;
    } catch (err) {
      const left = deadline - clock.now();
      if (left <= 0) throw new Unreachable(what(describeAnswer(err)));
      await clock.sleep(Math.min(left, backoffMs({ initialMs: 250, maxMs: 2_000 }, attempt + 1)));
    }
  }
}

const monotonicClock = {
  now: () => performance.now(),
  sleep: (ms: number) => new Promise<void>((r) => setTimeout(r, ms)),
};

/**
 * The kubeconfig a process uses, as kubectl finds it: `--kubeconfig`, else KUBECONFIG (a list of
 * files, merged), else ~/.kube/config, else the in-cluster ServiceAccount. Neither: a ConfigError.
 */
export function findKubeConfig(file: string, env: NodeJS.ProcessEnv = process.env): k8s.KubeConfig {
  const kc = new k8s.KubeConfig();
  const home = join(homedir(), ".kube", "config");
  const inCluster = Boolean(env.KUBERNETES_SERVICE_HOST);
  if (!file && !env.KUBECONFIG && !existsSync(home) && !inCluster)
    throw new ConfigError(
      "no kubeconfig: set --kubeconfig or KUBECONFIG (or ~/.kube/config), or run in a cluster",
    );
  try {
    if (file) kc.loadFromFile(file);
    else kc.loadFromDefault();
  } catch (err) {
    throw new ConfigError(`invalid setting --kubeconfig (KUBECONFIG): ${errorMessage(err)}`);
  }
  if (!kc.getCurrentCluster())
    throw new ConfigError("invalid setting --kubeconfig (KUBECONFIG): its current context names no cluster");
  return kc;
}

/** Throws Unreachable unless the kubeconfig's API server answers its discovery (`GET /api`) with its credentials. */
export async function apiServerAnswers(kc: k8s.KubeConfig, waitMs: number): Promise<void> {
  const server = kc.getCurrentCluster()?.server ?? "(none)";
  const core = kc.makeApiClient(k8s.CoreApi);
  await untilAnswered(
    (answer) => `cannot reach the Kubernetes API server at ${server} (--kubeconfig, KUBECONFIG): ${answer}`,
    async (timeoutMs) => {
      await withTimeout(core.getAPIVersions(), timeoutMs);
    },
    waitMs,
  );
}

/** Throws Unreachable unless Redis answers PING (with the URL's password) within the wait. */
export async function redisAnswersAt(url: string, waitMs: number): Promise<void> {
  const target = parseRedisUrl(url);
  const where =
    target.kind === "sentinel"
      ? `sentinels ${target.sentinels.map((s) => `${s.host}:${s.port}`).join(",")} (primary ${target.masterName})`
      : redact(url);
  await untilAnswered(
    (answer) => `cannot reach Redis at ${where} (--redis-url, REDIS_URL): ${answer}`,
    async (timeoutMs) => {
      const { url: plain, ...options } = redisTargetOptions(target);
      const settings = {
        ...options,
        lazyConnect: true,
        connectTimeout: timeoutMs,
        maxRetriesPerRequest: 0,
        retryStrategy: () => null,
        sentinelRetryStrategy: () => null,
      };
      const client = plain === undefined ? new Redis(settings) : new Redis(plain, settings);
      let last: unknown;
      client.on("error", (err) => {
        last = err;
      });
      try {
        await withTimeout(client.connect(), timeoutMs);
        const reply = await withTimeout(client.ping(), timeoutMs);
        if (reply !== "PONG") throw new Error(`answered ${reply} to PING`);
      } catch (err) {
        throw last && errorMessage(err).includes("Connection is closed") ? last : err;
      } finally {
        client.disconnect();
      }
    },
    waitMs,
  );
}

function withTimeout<T>(p: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${Math.round(ms / 100) / 10}s`)), ms);
  });
  return Promise.race([p, timeout]).finally(() => clearTimeout(timer));
}
