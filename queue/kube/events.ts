/** Kubernetes Events (events.k8s.io/v1) as the processes write them: typed, one body shape. */

/** The object an Event is about (or related to). */
export interface EventReference {
  apiVersion: string;
  kind: string;
  namespace: string;
  name: string;
  uid?: string;
  resourceVersion?: string;
}

/** An Event to create. The API refuses one without `action` and `reason`. */
export interface NewEvent {
  /** Unique in the namespace of `regarding`, where the Event is made. */
  name: string;
  eventTime: Date;
  type: "Normal" | "Warning";
  /** Why (CamelCase): Adopted, WriteRefused, … */
  reason: string;
  /** What was done (CamelCase): Hold, Refuse, … */
  action: string;
  /** Cut to the 1024 characters the API takes. */
  note: string;
  regarding: EventReference;
  related?: EventReference;
  reportingController: string;
  reportingInstance: string;
}

/** MicroTime as the API server writes it: RFC 3339 with six fractional digits. */
export function microTime(d: Date): string {
  return d.toISOString().replace(/\.(\d{3})Z$/, ".$1000Z");
}

const reference = (r: EventReference) => ({
  apiVersion: r.apiVersion,
  kind: r.kind,
  namespace: r.namespace,
  name: r.name,
  ...(r.uid ? { uid: r.uid } : {}),
  ...(r.resourceVersion ? { resourceVersion: r.resourceVersion } : {}),
});

/** The body of the Event's create request. Pure. */
export function eventBody(
  e: NewEvent,
): Record<string, unknown> & { metadata: { name: string; namespace: string } } {
  return {
    apiVersion: "events.k8s.io/v1",
    kind: "Event",
    metadata: { name: e.name, namespace: e.regarding.namespace },
    eventTime: microTime(e.eventTime),
    type: e.type,
    reason: e.reason,
    action: e.action,
    note: e.note.slice(0, 1024),
    regarding: reference(e.regarding),
    ...(e.related ? { related: reference(e.related) } : {}),
    reportingController: e.reportingController,
    reportingInstance: e.reportingInstance,
  };
}
