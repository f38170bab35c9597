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
