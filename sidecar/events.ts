/**
 * Kubernetes Events (events.k8s.io/v1) about claims. Every Event sets `action` and `reason` (the
 * API refuses one without an action), and a repeat of the same Event about the same object within
 * a few minutes updates its series count instead of creating another object.
 */
import { randomBytes } from "node:crypto";
import { PatchStrategy, setHeaderOptions } from "@kubernetes/client-node";
import { addressOf, apiFailure, isNotFound, type Kube, RESOURCES } from "../queue/kube/index.js";
import type { Logger } from "../queue/log.js";

export const REPORTING_CONTROLLER = "applygate.dev/sidecar";

export interface EventRegarding {
  apiVersion: string;
  kind: string;
  namespace: string;
  name: string;
  uid?: string;
  resourceVersion?: string;
}

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

/** MicroTime as the API server writes it: RFC 3339 with six fractional digits. */
export function microTime(d: Date): string {
  return d.toISOString().replace(/\.(\d{3})Z$/, ".$1000Z");
}

const ref = (r: EventRegarding) => ({
  apiVersion: r.apiVersion,
  kind: r.kind,
  namespace: r.namespace,
  name: r.name,
  ...(r.uid ? { uid: r.uid } : {}),
  ...(r.resourceVersion ? { resourceVersion: r.resourceVersion } : {}),
});

const MERGE = setHeaderOptions("Content-Type", PatchStrategy.MergePatch);
const EVENTS = addressOf(RESOURCES.event);

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
        try {
          await this.kube.custom.patchNamespacedCustomObject(
            {
              ...EVENTS,
              namespace: e.regarding.namespace,
              name: seen.name,
              body: { series: { count: seen.count, lastObservedTime: microTime(at) } },
            },
            MERGE,
          );
          return;
        } catch (err) {
          if (!isNotFound(err)) throw err;
          // the Event expired: start a new one
        }
      }
      const name = `${e.regarding.name}.${randomBytes(8).toString("hex")}`;
      await this.kube.custom.createNamespacedCustomObject({
        ...EVENTS,
        namespace: e.regarding.namespace,
        body: {
          apiVersion: "events.k8s.io/v1",
          kind: "Event",
          metadata: { name, namespace: e.regarding.namespace },
          eventTime: microTime(at),
          type: e.type,
          reason: e.reason,
          action: e.action,
          note: e.note.slice(0, 1024),
          regarding: ref(e.regarding),
          ...(e.related ? { related: ref(e.related) } : {}),
          reportingController: REPORTING_CONTROLLER,
          reportingInstance: this.opts.instance,
        },
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
