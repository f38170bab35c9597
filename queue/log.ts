import pino, { type Logger, type LoggerOptions } from "pino";

export type { Logger } from "pino";

/**
 * One logger for every process: JSON lines, pretty only when stdout is a terminal. Children carry
 * the fields that identify the work (branch, applier, token, commit) so every line has them.
 */
export function createLogger(opts: { level?: string; name?: string; pretty?: boolean } = {}): Logger {
  const pretty =
    opts.pretty ?? (process.stdout.isTTY === true && process.env.APPLYGATE_LOG_FORMAT !== "json");
  const options: LoggerOptions = {
    level: opts.level ?? process.env.LOG_LEVEL ?? "info",
    base: opts.name ? { component: opts.name } : {},
    timestamp: pino.stdTimeFunctions.isoTime,
  };
  if (pretty) {
    return pino({
      ...options,
      transport: { target: "pino-pretty", options: { colorize: true, singleLine: true } },
    });
  }
  return pino(options);
}

/** A logger that drops everything, for tests that do not read logs. */
export function silentLogger(): Logger {
  return pino({ level: "silent" });
}

/**
 * `claim` and `applier` have one shape in every process's lines, `<kind>/<namespace>/<name>`, so
 * one query finds a claim's or an applier's lines across the gateway, the worker and the sidecar:
 * `claim` as `FluxClaim/team/web`, `applier` as `flux/team/web` (the applier kind, then the
 * Kustomization's or Application's namespace and name).
 */
export function claimField(c: { kind: string; namespace: string; name: string }): string {
  return `${c.kind}/${c.namespace}/${c.name}`;
}

export function applierField(a: { kind: string; namespace: string; name: string }): string {
  return `${a.kind}/${a.namespace}/${a.name}`;
}
