/**
 * Kubernetes Events (events.k8s.io/v1) about claims. Every Event sets `action` and `reason` (the
 * API refuses one without an action), and a repeat of the same Event about the same object within
 * a few minutes updates its series count instead of creating another object.
 */
import { randomBytes } from "node:crypto";
import { apiFailure, type EventReference, type Kube, microTime } from "../queue/kube/index.js";
import type { Logger } from "../queue/log.js";

export const REPORTING_CONTROLLER = "applygate.dev/sidecar";

export type EventRegarding = EventReference;

export interface EventSpec {
  type: "Normal" | "Warning";
  /** Why (CamelCase): Adopted, ClaimedResourceReconciled, OperationUnfollowed, ReleaseFailed, … */
  reason: string;
  /** What was done (CamelCase): Suspend, Release, Complete, … */
  action: string;
  note: string;
  regarding: EventRegarding;
  related?: EventRegarding;
}

export interface EventRecorder {
  /** Records the Event; never throws (a failure is logged). */
  emit(event: EventSpec): Promise<void>;
}

export interface KubeEventRecorderOptions {
  /** reportingInstance: this process (pod name). */
  instance: string;
  log?: Logger;
  now?: () => Date;
  /** A repeat within this time joins the series (default 6 minutes, as client-go). */
  seriesWindowMs?: number;
}

export class KubeEventRecorder implements EventRecorder {
  private readonly series = new Map<string, { name: string; count: number; last: number }>();
  private readonly now: () => Date;

  constructor(
    private readonly kube: Kube,
    private readonly opts: KubeEventRecorderOptions,
  ) {
    this.now = opts.now ?? (() => new Date());
  }

  async emit(e: EventSpec): Promise<void> {
    const at = this.now();
    const key = JSON.stringify([
      e.regarding.namespace,
      e.regarding.name,
      e.regarding.uid,
      e.type,
      e.reason,
      e.action,
      e.note,
    ]);
    const window = this.opts.seriesWindowMs ?? 6 * 60_000;
    const seen = this.series.get(key);
    try {
      if (seen && at.getTime() - seen.last <= window) {
        seen.count++;
        seen.last = at.getTime();
        const series = { count: seen.count, lastObservedTime: microTime(at) };
        if (await this.kube.patchEvent(e.regarding.namespace, seen.name, { series })) return;
        // the Event expired: start a new one
      }
      const name = `${e.regarding.name}.${randomBytes(8).toString("hex")}`;
      await this.kube.createEvent({
        ...e,
        name,
        eventTime: at,
        reportingController: REPORTING_CONTROLLER,
        reportingInstance: this.opts.instance,
      });
      this.series.set(key, { name, count: 1, last: at.getTime() });
      this.prune(at.getTime(), window);
    } catch (err) {
      this.opts.log?.warn(
        {
          err: apiFailure(err).message,
          reason: e.reason,
          regarding: `${e.regarding.namespace}/${e.regarding.name}`,
        },
        "could not record an Event",
      );
    }
  }

  private prune(now: number, window: number) {
    if (this.series.size < 1000) return;
    for (const [k, v] of this.series) if (now - v.last > window) this.series.delete(k);
  }
}

/** Keeps Events in memory, for tests; refuses one the API server would refuse (no action or reason). */
export function memoryEvents(): EventRecorder & { events: EventSpec[] } {
  const events: EventSpec[] = [];
  return {
    events,
    emit: async (e) => {
      if (!e.action || !e.reason) throw new Error(`an Event needs action and reason: ${JSON.stringify(e)}`);
      events.push(e);
    },
  };
}
