/**
 * The scenario suite's harness: the playground's assembly with compressed timers on the test
 * Redis (a prefix of its own), the progress observer reading the queues, and the state every
 * scenario starts from (both claims hold their appliers at the tip). Stopping a scene fails when
 * the API server's audit log shows a component refused (403) or an admin request by anyone but
 * the simulators and the setup.
 */
import { randomBytes } from "node:crypto";
import pino from "pino";
import { createLogger, type Logger } from "../../queue/log.js";
import { settled } from "../playground/actors.js";
import { type Assembly, type AssemblyTimers, FAST_TIMERS, startAssembly } from "../playground/assembly.js";
import { auditProblems } from "../playground/audit-check.js";
import type { Component } from "../playground/identities.js";
import { observeProgress, type ProgressObserver } from "../playground/progress.js";
import { testRedisUrl } from "../redis/isolated.js";
import { failureContext } from "../support/print-failures.js";

export interface Scene {
  a: Assembly;
  progress: ProgressObserver;
  /** The tip both appliers applied at the start. */
  start: string;
  /** Attempts seen before the scenario began (the converges at the start). */
  before: number;
  stop(): Promise<void>;
}

export async function startScene(
  o: { timers?: Partial<AssemblyTimers>; redisUrl?: string; log?: Logger; withMirror?: boolean } = {},
): Promise<Scene> {
  const redisUrl = o.redisUrl ?? testRedisUrl();
  const a = await startAssembly({
    redisUrl,
    // A fresh prefix; the assembly removes its keys on stop. SCENARIO_LOG=debug prints its logs;
    // without it they are kept in memory and printed only when a test fails.
    log:
      o.log ?? (process.env.SCENARIO_LOG ? createLogger({ level: process.env.SCENARIO_LOG }) : keptLogger()),
    timers: { ...FAST_TIMERS, ...o.timers, flux: { ...FAST_TIMERS.flux, ...o.timers?.flux } },
    ...(o.withMirror ? { withMirror: true } : {}),
  });
  let progress: ProgressObserver | undefined;
  try {
    progress = await observeProgress({ redisUrl, prefix: a.prefix });
    const start = await settled(a);
    const p = progress;
    return {
      a,
      progress: p,
      start,
      before: p.attempts().length,
      async stop() {
        await p.stop();
        // Every component ran under its own ServiceAccount: none may have been refused or be admin.
        const components: Component[] = [
          "gateway",
          "worker",
          "flux",
          "argocd",
          "webhook",
          ...(o.withMirror ? ["mirror" as const] : []),
        ];
        const problems = auditProblems(await a.stop(), components);
        if (problems.length) throw new Error(`the audit log shows:\n${[...new Set(problems)].join("\n")}`);
      },
    };
  } catch (err) {
    await progress?.stop();
    await a.stop();
    throw err;
  }
}

/** Attempts sent to an applier kind after the start, with their phases as reported. */
export function operationsOf(s: Scene, kind: "flux" | "argocd") {
  return s.progress
    .attempts()
    .slice(s.before)
    .filter((at) => at.applier.kind === kind)
    .map((at) => ({
      attempt: at,
      phases: s.progress
        .phases()
        .filter((p) => p.token === at.token)
        .map((p) => p.phase),
    }));
}

export const unique = () => randomBytes(3).toString("hex");

/** The scenario's debug logs, kept in memory (the last 3,000 lines) for a failure to print. */
export function keptLogger(): Logger {
  const lines: string[] = [];
  failureContext.set("the scenario's last log lines", () => lines.join(""));
  return pino(
    { level: "debug", timestamp: pino.stdTimeFunctions.isoTime },
    {
      write(line: string) {
        lines.push(line);
        if (lines.length > 3_000) lines.splice(0, lines.length - 3_000);
      },
    },
  );
}
