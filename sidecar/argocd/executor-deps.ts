import type { Kube } from "../../queue/kube/index.js";
import type { Logger } from "../../queue/log.js";
import type * as Kind from "../applier-kind.js";
import type { EventRecorder } from "../events.js";
import type { SupersessionSource } from "../supersessions.js";
import type { Ancestry } from "./stale.js";
import type { ApplicationWatch } from "./watch.js";

export interface ArgoCDExecutorOptions {
  /**
   * Between reads of the Application while its namespace's watch is not synced (not listed yet,
   * or failing): then it is polled from the API server (default 1 s).
   */
  pollMs?: number;
  /**
   * While the watch runs, an Application waited on is still read from the API server this often,
   * events or not: the safety net of the watch (default 30 s).
   */
  resyncMs?: number;
  /** How long another operation is waited out before the attempt fails (default 5 minutes). */
  busyWaitMs?: number;
  /** After this long the operation is Unresolved and still followed (default 5 minutes). */
  budgetMs?: number;
  /** The follow interval of an Unresolved operation doubles up to this (default 1 minute). */
  maxPollMs?: number;
  /** Answers ancestry from the branch worker's clone; without it no operation is ever terminated. */
  ancestry?: Ancestry;
}

export interface ArgoCDExecutorDeps {
  kube: Kube;
  log: Logger;
  events: EventRecorder;
  now: () => Date;
  options?: ArgoCDExecutorOptions;
  /**
   * Asked just before the sync update: the tip (a moved tip ends the attempt Stale with nothing
   * started), the claim's standing, and the edit recheck (not fresh: Stale, nothing started).
   */
  checks: Kind.SafetyChecks;
  windows?: Kind.WindowHooks;
  /** The Applications' watch (tests hand one in); default one of this executor's own on `kube`. */
  applications?: ApplicationWatch;
  /** The operations the branch worker found superseded, and the tip it records; none: none is ended. */
  supersessions?: SupersessionSource;
}
