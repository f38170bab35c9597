/**
 * One typed loader for every process's settings. Each setting has a flag, an environment
 * variable, a default and a parser; a bad or missing value stops start-up with one line naming
 * the setting, never a stack trace.
 */
import { parseArgs } from "node:util";
import { errorMessage } from "./errors.js";
import { parseRedisUrl } from "./redis-url.js";

export class ConfigError extends Error {
  override name = "ConfigError";
}

export interface Setting<T> {
  /** Long flag without dashes, e.g. `port`. */
  flag: string;
  /** Environment variable, e.g. `APPLYGATE_PORT`. */
  env?: string;
  help: string;
  /** Parses the raw string; throws a message (not an Error subclass needed) when invalid. */
  parse: (raw: string) => T;
  /** Used when neither flag nor environment sets it; omit to make the setting required. */
  default?: T;
  /** A boolean switch (`--flag` with no value). */
  boolean?: boolean;
  /** Shown in help instead of the default value (for secrets). */
  defaultLabel?: string;
}

export type Settings = Record<string, Setting<unknown>>;
export type Loaded<S extends Settings> = { [K in keyof S]: S[K] extends Setting<infer T> ? T : never };

export const parsers = {
  string: (raw: string) => {
    if (raw === "") throw new Error("must not be empty");
    return raw;
  },
  port: (raw: string) => {
    const n = Number(raw);
    if (!/^\d+$/.test(raw) || n < 0 || n > 65535)
      throw new Error(`expected a port number 0-65535, got "${raw}"`);
    return n;
  },
  positiveInt: (raw: string) => {
    const n = Number(raw);
    if (!/^\d+$/.test(raw) || n <= 0) throw new Error(`expected a positive integer, got "${raw}"`);
    return n;
  },
  bytes: (raw: string) => {
    const m = /^(\d+)\s*(|B|KiB|MiB|GiB)$/i.exec(raw.trim());
    if (!m) throw new Error(`expected a size like 3MiB, 512KiB or 1048576, got "${raw}"`);
    const unit = (m[2] ?? "").toLowerCase();
    const mult = unit === "kib" ? 1024 : unit === "mib" ? 1024 ** 2 : unit === "gib" ? 1024 ** 3 : 1;
    return Number(m[1]) * mult;
  },
  /** Durations like 500ms, 5s, 2m, 1h. Returns milliseconds. */
  duration: (raw: string) => {
    const m = /^(\d+(?:\.\d+)?)(ms|s|m|h)$/.exec(raw.trim());
    if (!m) throw new Error(`expected a duration like 500ms, 5s, 2m or 1h, got "${raw}"`);
    const mult = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 }[m[2] as "ms" | "s" | "m" | "h"];
    return Math.round(Number(m[1]) * mult);
  },
  boolean: (raw: string) => {
    if (["1", "true", "yes", "on", ""].includes(raw.toLowerCase())) return true;
    if (["0", "false", "no", "off"].includes(raw.toLowerCase())) return false;
    throw new Error(`expected true or false, got "${raw}"`);
  },
  oneOf:
    <T extends string>(...values: T[]) =>
    (raw: string): T => {
      if (!(values as string[]).includes(raw))
        throw new Error(`expected one of ${values.join(", ")}, got "${raw}"`);
      return raw as T;
    },
  url: (raw: string) => {
    try {
      new URL(raw);
    } catch {
      throw new Error(`expected a URL, got "${raw}"`);
    }
    return raw;
  },
  /** A Redis server URL or a `redis+sentinel://` one (see redis-url.ts); kept as written. */
  redisUrl: (raw: string) => {
    parseRedisUrl(raw);
    return raw.trim();
  },
};

/** Loads settings from argv and env. Throws ConfigError with one line naming the bad setting. */
export function loadConfig<S extends Settings>(
  settings: S,
  argv: string[],
  env: NodeJS.ProcessEnv = process.env,
): { config: Loaded<S>; positionals: string[] } {
  const options: Record<string, { type: "string" | "boolean" }> = {};
  for (const s of Object.values(settings)) options[s.flag] = { type: s.boolean ? "boolean" : "string" };
  let parsed: ReturnType<typeof parseArgs>;
  try {
    parsed = parseArgs({ args: argv, options, allowPositionals: true, strict: true });
  } catch (err) {
    throw new ConfigError(errorMessage(err).split("\n")[0] ?? "invalid arguments");
  }
  const out: Record<string, unknown> = {};
  for (const [key, s] of Object.entries(settings)) {
    const fromFlag = parsed.values[s.flag];
    const name = s.env ? `--${s.flag} (${s.env})` : `--${s.flag}`;
    let raw: string | undefined;
    if (fromFlag !== undefined) raw = typeof fromFlag === "boolean" ? String(fromFlag) : String(fromFlag);
    else if (s.env && env[s.env] !== undefined) raw = env[s.env];
    if (raw === undefined) {
      if (!("default" in s)) throw new ConfigError(`missing setting ${name}: ${s.help}`);
      out[key] = s.default;
      continue;
    }
    try {
      out[key] = s.parse(raw);
    } catch (err) {
      throw new ConfigError(`invalid setting ${name}: ${errorMessage(err)}`);
    }
  }
  return { config: out as Loaded<S>, positionals: parsed.positionals };
}

export function helpText(command: string, summary: string, settings: Settings): string {
  const lines = [`usage: applygate ${command} [flags]`, "", summary, "", "flags:"];
  for (const s of Object.values(settings)) {
    const def =
      s.defaultLabel ??
      (!("default" in s) ? "required" : s.default === undefined ? "unset" : JSON.stringify(s.default));
    lines.push(`  --${s.flag}${s.boolean ? "" : " <value>"}`);
    lines.push(`      ${s.help} [${s.env ? `env ${s.env}, ` : ""}default ${def}]`);
  }
  return lines.join("\n");
}

/** Settings every process shares. */
export const commonSettings = {
  redisUrl: {
    flag: "redis-url",
    env: "REDIS_URL",
    help: "Redis holding the queues and branch inboxes: redis://[:password@]host:6379[/db] (rediss:// for TLS), or through Sentinel redis+sentinel://[:password@]host1:26379,host2:26379/<masterName>[?db=0&sentinelPassword=...]",
    parse: parsers.redisUrl,
    default: "redis://127.0.0.1:6379",
  } as Setting<string>,
  redisPrefix: {
    flag: "redis-prefix",
    env: "APPLYGATE_REDIS_PREFIX",
    help: "prefix of every Redis key applygate writes",
    parse: parsers.string,
    default: "applygate",
  } as Setting<string>,
  logLevel: {
    flag: "log-level",
    env: "LOG_LEVEL",
    help: "pino log level",
    parse: parsers.oneOf("fatal", "error", "warn", "info", "debug", "trace", "silent"),
    default: "info",
  } as Setting<string>,
};

/**
 * `--kubeconfig`: every process that talks to the API server. Unset, the kubeconfig is found as
 * kubectl finds it (KUBECONFIG, a list of files; ~/.kube/config; the in-cluster ServiceAccount),
 * so KUBECONFIG is read there, not as this setting's variable.
 */
export const kubeconfigSetting: Setting<string> = {
  flag: "kubeconfig",
  help: "kubeconfig file; unset: KUBECONFIG, else ~/.kube/config, else the in-cluster ServiceAccount",
  parse: parsers.string,
  default: "",
  defaultLabel: "KUBECONFIG, ~/.kube/config or in-cluster",
};

/**
 * The worker's and the sidecars' switch for sending a GitProvider's credentials over plain http:
 * off, so a credential never crosses the network in clear (queue/git/credentials.ts); on only for
 * a Git host reached on a trusted network or loopback (local development, tests).
 */
export const allowHttpCredentialsSetting: Setting<boolean> = {
  flag: "allow-http-credentials",
  env: "APPLYGATE_ALLOW_HTTP_CREDENTIALS",
  help: "send GitProvider credentials over plain http too (never by default: a provider with an http:// URL is used without them)",
  parse: parsers.boolean,
  default: false,
};

/**
 * The address the metrics, health and readiness endpoints listen on: every address by default (a
 * pod's own network); a process run outside a pod (a test, a laptop) names loopback.
 */
export function metricsHostSetting(env: string): Setting<string | undefined> {
  return {
    flag: "metrics-host",
    env,
    help: "address serving /metrics, /healthz and /readyz (unset: every address)",
    parse: parsers.string,
    default: undefined,
    defaultLabel: "every address",
  };
}

/** `--help`: every command's switch for printing its flags instead of running. */
export const helpSetting: Setting<boolean> = {
  flag: "help",
  help: "show this help",
  parse: parsers.boolean,
  boolean: true,
  default: false,
};
