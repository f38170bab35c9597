import { Registry } from "prom-client";
import { describe, expect, it } from "vitest";
import { APPLIER_KINDS } from "../contract.js";
import { METRIC_NAMES } from "../metric-names.js";
import { ATTEMPTS_LOST_TOTAL, createApplyMetrics } from "./metrics.js";

describe("the decisions' metrics", () => {
  it("export a collision count of 0 per applier kind from the start, so its panel and alert have a series", async () => {
    const registry = new Registry();
    const m = createApplyMetrics(registry);
    let text = await registry.metrics();
    for (const kind of APPLIER_KINDS)
      expect(text).toContain(`${METRIC_NAMES.applyWindowCollisionsTotal}{applier_kind="${kind}"} 0`);
    m.collision("flux");
    text = await registry.metrics();
    expect(text).toContain(`${METRIC_NAMES.applyWindowCollisionsTotal}{applier_kind="flux"} 1`);
  });

  it("count attempts ended AttemptLost per applier kind, from 0", async () => {
    const registry = new Registry();
    const m = createApplyMetrics(registry);
    for (const kind of APPLIER_KINDS)
      expect(await registry.metrics()).toContain(`${ATTEMPTS_LOST_TOTAL}{applier_kind="${kind}"} 0`);
    m.attemptLost("webhook");
    expect(await registry.metrics()).toContain(`${ATTEMPTS_LOST_TOTAL}{applier_kind="webhook"} 1`);
  });
});
