import { Registry } from "prom-client";
import { describe, expect, it } from "vitest";
import { type BranchGaugeSource, createWorkerMetrics } from "./metrics.js";

describe("worker metrics", () => {
  it("reads the intake-paused and retrying gauges per branch at scrape time", async () => {
    const registry = new Registry();
    let t = 100_000;
    const branches: BranchGaugeSource[] = [
      {
        branchKey: "git.example/a@main",
        retainedWrites: 3,
        retainedBytes: 10,
        intakePaused: true,
        retryingSince: 40_000,
      },
      { branchKey: "git.example/b@main", retainedWrites: 0, retainedBytes: 0, intakePaused: false },
    ];
    createWorkerMetrics(
      registry,
      () => branches,
      () => t,
    );
    let text = await registry.metrics();
    expect(text).toMatch(/^applygate_branch_intake_paused\{branch="git.example\/a@main"\} 1$/m);
    expect(text).toMatch(/^applygate_branch_intake_paused\{branch="git.example\/b@main"\} 0$/m);
    expect(text).toMatch(/^applygate_branch_retrying_seconds\{branch="git.example\/a@main"\} 60$/m);
    expect(text).toMatch(/^applygate_branch_retrying_seconds\{branch="git.example\/b@main"\} 0$/m);
    // A branch no longer owned here leaves no stale series behind.
    branches.splice(0, 1);
    t += 1000;
    text = await registry.metrics();
    expect(text).not.toContain('branch="git.example/a@main"');
  });
});
