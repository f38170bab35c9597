/**
 * The one Redis setting every process reads (`--redis-url`, `REDIS_URL`), in two forms:
 *
 * - a plain server: `redis://[[user]:password@]host[:port][/db]` (or `rediss://` for TLS), read by
 *   ioredis itself;
 * - a primary found through Sentinel:
 *   `redis+sentinel://[[user]:password@]host1[:26379],host2[:26379],.../<masterName>[?db=0&sentinelPassword=...]`
 *   (`rediss+sentinel://` for TLS to the sentinels and the data nodes). The credentials before `@`
 *   are the data nodes'; the sentinels' come from `sentinelUsername`/`sentinelPassword`.
 *
 * Pure: the URL in, what ioredis needs out, or an Error whose message says what is wrong.
 */
import type { RedisOptions } from "ioredis";

export const DEFAULT_SENTINEL_PORT = 26379;

export type RedisTarget =
  | { kind: "server"; url: string }
  | {
      kind: "sentinel";
      sentinels: { host: string; port: number }[];
      masterName: string;
      db: number;
      username?: string;
      password?: string;
      sentinelUsername?: string;
      sentinelPassword?: string;
      tls: boolean;
    };

const SENTINEL_PARAMS = new Set(["db", "sentinelUsername", "sentinelPassword"]);

function decode(part: string, what: string): string {
  try {
    return decodeURIComponent(part);
  } catch {
    throw new Error(`${what} is not valid percent-encoding`);
  }
}

function parseHost(raw: string): { host: string; port: number } {
  const m = /^(?:\[([0-9a-fA-F:.]+)\]|([^\s:[\]/?#@]+))(?::(\d+))?$/.exec(raw);
  if (!m) throw new Error(`expected host[:port] for each sentinel, got "${raw}"`);
  const port = m[3] === undefined ? DEFAULT_SENTINEL_PORT : Number(m[3]);
  if (port < 1 || port > 65535) throw new Error(`sentinel port must be 1-65535, got "${m[3]}"`);
  return { host: (m[1] ?? m[2]) as string, port };
}

function parseSentinel(raw: string, rest: string, tls: boolean): RedisTarget {
  const hashless = rest.split("#")[0] as string;
  const q = hashless.indexOf("?");
  const beforeQuery = q < 0 ? hashless : hashless.slice(0, q);
  const query = new URLSearchParams(q < 0 ? "" : hashless.slice(q + 1));
  const slash = beforeQuery.indexOf("/");
  const authority = slash < 0 ? beforeQuery : beforeQuery.slice(0, slash);
  const path = slash < 0 ? "" : beforeQuery.slice(slash + 1);
  const at = authority.lastIndexOf("@");
  const userinfo = at < 0 ? undefined : authority.slice(0, at);
  const hosts = at < 0 ? authority : authority.slice(at + 1);
  if (hosts === "") throw new Error(`expected at least one sentinel host in "${redact(raw)}"`);
  const sentinels = hosts.split(",").map(parseHost);

  const [name, dbInPath, ...extra] = path.split("/");
  if (!name)
    throw new Error(`expected the master name as the path, e.g. redis+sentinel://host:26379/mymaster`);
  if (extra.length > 0) throw new Error(`expected /<masterName>[/<db>] as the path, got "/${path}"`);
  for (const key of query.keys())
    if (!SENTINEL_PARAMS.has(key))
      throw new Error(`unknown parameter "${key}" (known: ${[...SENTINEL_PARAMS].join(", ")})`);
  const dbRaw = query.get("db") ?? dbInPath ?? "0";
  if (dbInPath !== undefined && query.has("db") && query.get("db") !== dbInPath)
    throw new Error(`the database is given twice, as /${dbInPath} and ?db=${query.get("db")}`);
  if (!/^\d+$/.test(dbRaw)) throw new Error(`db must be a database number, got "${dbRaw}"`);

  const target: RedisTarget = {
    kind: "sentinel",
    sentinels,
    masterName: decode(name, "the master name"),
    db: Number(dbRaw),
    tls,
  };
  if (userinfo !== undefined) {
    const colon = userinfo.indexOf(":");
    const user = colon < 0 ? userinfo : userinfo.slice(0, colon);
    const password = colon < 0 ? undefined : userinfo.slice(colon + 1);
    if (user) target.username = decode(user, "the username");
    if (password) target.password = decode(password, "the password");
  }
  const su = query.get("sentinelUsername");
  const sp = query.get("sentinelPassword");
  if (su) target.sentinelUsername = su;
  if (sp) target.sentinelPassword = sp;
  return target;
}

/** Parses the Redis setting; throws an Error saying what is wrong (never echoing a password). */
export function parseRedisUrl(raw: string): RedisTarget {
  const trimmed = raw.trim();
  const scheme = /^([a-z][a-z0-9+.-]*):\/\//i.exec(trimmed)?.[1]?.toLowerCase();
  if (scheme === "redis+sentinel" || scheme === "rediss+sentinel")
    return parseSentinel(trimmed, trimmed.slice(scheme.length + 3), scheme === "rediss+sentinel");
  if (scheme === "redis" || scheme === "rediss") {
    try {
      new URL(trimmed);
    } catch {
      throw new Error(`expected a URL like redis://host:6379, got "${redact(trimmed)}"`);
    }
    return { kind: "server", url: trimmed };
  }
  throw new Error(
    `expected redis://, rediss:// or redis+sentinel://host:26379,.../<masterName>, got "${redact(trimmed)}"`,
  );
}

/** The URL with any password replaced by `***`, for logs and error messages. */
export function redact(raw: string): string {
  return raw.replace(/^([a-z+]+:\/\/)([^@/]*:)([^@/]*)@/i, (_m, scheme, user, password) =>
    password ? `${scheme}${user}***@` : `${scheme}${user}@`,
  );
}

/** A reply saying the node we write to became a replica: reconnect (through the sentinels) and resend. */
export const demotedPrimary = (err: Error): 2 | false => (err.message.startsWith("READONLY") ? 2 : false);

/**
 * ioredis options for the target. A plain server passes its URL on (`url`, which BullMQ and
 * `connectRedis` hand to ioredis); a Sentinel target names the sentinels and the master. A lost
 * connection asks the sentinels again, and one to a primary demoted under it is dropped on its
 * first READONLY reply. ioredis's optional failover detector stays off: a `+switch-master`
 * arriving while a connection already reconnects ends that connection for good
 * (redis-sentinel-switch.test.ts).
 */
export function redisTargetOptions(target: RedisTarget): RedisOptions & { url?: string } {
  if (target.kind === "server") return { url: target.url };
  return {
    sentinels: target.sentinels,
    name: target.masterName,
    db: target.db,
    reconnectOnError: demotedPrimary,
    ...(target.username ? { username: target.username } : {}),
    ...(target.password ? { password: target.password } : {}),
    ...(target.sentinelUsername ? { sentinelUsername: target.sentinelUsername } : {}),
    ...(target.sentinelPassword ? { sentinelPassword: target.sentinelPassword } : {}),
    ...(target.tls ? { tls: {}, sentinelTLS: {}, enableTLSForSentinelMode: true } : {}),
  };
}
