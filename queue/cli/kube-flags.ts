/**
 * The flags the commands a person types share with kubectl (`-n`, `-A`, `--kubeconfig`,
 * `--context`) and the Redis ones, read with node's parseArgs so short flags work as kubectl
 * users type them. Environment: KUBECONFIG (through the kubeconfig loader), REDIS_URL,
 * APPLYGATE_REDIS_PREFIX.
 */
import { type ParseArgsConfig, parseArgs } from "node:util";
import * as k8s from "@kubernetes/client-node";
import { ConfigError } from "../config.js";
import { DEFAULT_REDIS_PREFIX } from "../contract.js";
import { errorMessage } from "../errors.js";
import { parseRedisUrl } from "../redis-url.js";

export const KUBE_OPTIONS = {
  namespace: { type: "string", short: "n" },
  "all-namespaces": { type: "boolean", short: "A" },
  kubeconfig: { type: "string" },
  context: { type: "string" },
  "redis-url": { type: "string" },
  "redis-prefix": { type: "string" },
  help: { type: "boolean", short: "h" },
} as const satisfies ParseArgsConfig["options"];

export const KUBE_HELP = [
  "  -n, --namespace <ns>     the namespace (default: the kubeconfig context's, else default)",
  "  -A, --all-namespaces     every namespace the identity may list",
  "      --kubeconfig <file>  kubeconfig file (default: KUBECONFIG, else ~/.kube/config, else in-cluster)",
  "      --context <name>     kubeconfig context to use",
  "      --redis-url <url>    Redis holding the branch workers' decisions [env REDIS_URL]; without it only",
  "                           what the cluster shows is printed",
  `      --redis-prefix <p>   prefix of applygate's Redis keys [env APPLYGATE_REDIS_PREFIX, default ${DEFAULT_REDIS_PREFIX}]`,
  "  -h, --help               show this help",
];

/** Parses argv against `options`; a bad flag is a ConfigError naming it, in one line. */
export function parseFlags<O extends ParseArgsConfig["options"]>(argv: string[], options: O) {
  try {
    return parseArgs({ args: argv, options, allowPositionals: true, strict: true });
  } catch (err) {
    throw new ConfigError(errorMessage(err).split("\n")[0] ?? "invalid arguments");
  }
}

export interface KubeTarget {
  kc: k8s.KubeConfig;
  /** The namespaces asked for; "all" with `-A`. */
  scope: string[] | "all";
  namespace: string;
}

/** The kubeconfig and namespace the flags name, as kubectl reads them. */
export function kubeTarget(values: {
  namespace?: string | undefined;
  "all-namespaces"?: boolean | undefined;
  kubeconfig?: string | undefined;
  context?: string | undefined;
}): KubeTarget {
  const kc = new k8s.KubeConfig();
  try {
    if (values.kubeconfig) kc.loadFromFile(values.kubeconfig);
    else kc.loadFromDefault();
    if (values.context) {
      if (!kc.getContextObject(values.context)) throw new Error(`context "${values.context}" not found`);
      kc.setCurrentContext(values.context);
    }
  } catch (err) {
    throw new ConfigError(`invalid setting --kubeconfig (KUBECONFIG): ${errorMessage(err)}`);
  }
  if (!kc.getCurrentCluster())
    throw new ConfigError("the kubeconfig names no cluster (set KUBECONFIG or --kubeconfig)");
  const namespace = values.namespace ?? kc.getContextObject(kc.getCurrentContext())?.namespace ?? "default";
  return { kc, namespace, scope: values["all-namespaces"] ? "all" : [namespace] };
}

/** The Redis URL and prefix from the flags or the environment; no URL: Redis is not read. */
export function redisTarget(
  values: { "redis-url"?: string | undefined; "redis-prefix"?: string | undefined },
  env: NodeJS.ProcessEnv,
): { url?: string; prefix: string } {
  const url = values["redis-url"] ?? env.REDIS_URL;
  if (url !== undefined) {
    try {
      parseRedisUrl(url);
    } catch (err) {
      throw new ConfigError(`invalid setting --redis-url (REDIS_URL): ${errorMessage(err)}`);
    }
  }
  const prefix = values["redis-prefix"] ?? env.APPLYGATE_REDIS_PREFIX ?? DEFAULT_REDIS_PREFIX;
  return { ...(url ? { url } : {}), prefix };
}
