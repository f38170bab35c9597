/** What the Flux executor is given, and its timings. */
import type { Logger } from "../../queue/log.js";
import type { SafetyChecks, WindowHooks } from "../applier-kind.js";
import type { EventRecorder } from "../events.js";
import type { FluxClient } from "./client.js";

export interface FluxTimings {
  /** An operation not completed this long after its resume is Unresolved (default 5 minutes). */
  unresolvedAfterMs: number;
  /** Longest re-read interval while following an Unresolved operation (default 1 minute). */
  unresolvedMaxIntervalMs: number;
  /** How long step 1 waits for the GitRepository to handle its token (default 2 minutes). */
  sourceTimeoutMs: number;
}

export const DEFAULT_TIMINGS: FluxTimings = {
  unresolvedAfterMs: 5 * 60_000,
  unresolvedMaxIntervalMs: 60_000,
  sourceTimeoutMs: 2 * 60_000,
};

export interface FluxExecutorDeps {
  client: FluxClient;
  log: Logger;
  events: EventRecorder;
  now: () => Date;
  timings?: Partial<FluxTimings>;
  /** Asked before the resume: the tip (after the record), the claim's standing, the edit recheck. */
  checks: SafetyChecks;
  window?: WindowHooks;
}
