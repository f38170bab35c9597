/** The gateway's own metrics, on a registry of its own (so several gateways can share a process). */
import { Counter, Histogram, Registry } from "prom-client";

export const GATEWAY_METRIC_NAMES = {
  /** Counter {provider_type, outcome}: push webhook deliveries; outcome accepted | ignored | miss. */
  deliveries: "applygate_gateway_deliveries_total",
  /** Counter {kind, outcome}: intake calls; accepted | paused | invalid | unauthorized | unavailable | forbidden | unstorable. */
  intake: "applygate_gateway_intake_total",
  /** Counter {target, reason}: writes refused at the door, never queued; reason a scope or validation rule. */
  refusedWrites: "applygate_gateway_refused_writes_total",
  /** Histogram {kind}: seconds to hand a notice or write to Redis. */
  enqueueSeconds: "applygate_gateway_enqueue_seconds",
} as const;

export type DeliveryOutcome = "accepted" | "ignored" | "miss";
export type IntakeOutcome =
  | "accepted"
  | "paused"
  | "invalid"
  | "unauthorized"
  | "unavailable"
  | "forbidden"
  | "unstorable";

export interface GatewayMetrics {
  registry: Registry;
  deliveries: Counter<"provider_type" | "outcome">;
  intake: Counter<"kind" | "outcome">;
  refusedWrites: Counter<"target" | "reason">;
  enqueueSeconds: Histogram<"kind">;
}

export function createGatewayMetrics(): GatewayMetrics {
  const registry = new Registry();
  return {
    registry,
    deliveries: new Counter({
      name: GATEWAY_METRIC_NAMES.deliveries,
      help: "Push webhook deliveries by provider type and outcome (accepted, ignored, miss).",
      labelNames: ["provider_type", "outcome"],
      registers: [registry],
    }),
    intake: new Counter({
      name: GATEWAY_METRIC_NAMES.intake,
      help: "Intake API calls (writes, refusals) by outcome.",
      labelNames: ["kind", "outcome"],
      registers: [registry],
    }),
    refusedWrites: new Counter({
      name: GATEWAY_METRIC_NAMES.refusedWrites,
      help: "Writes refused at the door by GitTarget (namespace/name) and the rule that refused them.",
      labelNames: ["target", "reason"],
      registers: [registry],
    }),
    enqueueSeconds: new Histogram({
      name: GATEWAY_METRIC_NAMES.enqueueSeconds,
      help: "Seconds from a verified request to Redis holding its job.",
      labelNames: ["kind"],
      buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1],
      registers: [registry],
    }),
  };
}
