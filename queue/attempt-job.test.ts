import { describe, expect, it } from "vitest";
import {
  attemptJobEnd,
  attemptJobName,
  attemptLogLine,
  attemptProgress,
  FAILED_ATTEMPT_PHASES,
} from "./attempt-job.js";
import { REPORT_PHASES } from "./contract.js";

const at = "2026-03-01T10:00:00.000Z";
const commit = "4f1c0a9e2b77".padEnd(40, "0");

describe("an attempt's job as the dashboard shows it", () => {
  it("is named for its branch, applier and commit", () => {
    expect(
      attemptJobName({
        branchKey: "git.example/team/apps@main",
        applier: { kind: "flux", namespace: "flux-system", name: "web" },
        commit,
      }),
    ).toBe("git.example/team/apps@main flux/flux-system/web 4f1c0a9e2b77");
  });

  it("fails for Failed, RequestFailed and Rejected only, naming the phase, reason and message", () => {
    for (const phase of REPORT_PHASES) {
      const end = attemptJobEnd(attemptProgress(phase, at, commit, { reason: "R", message: "m" }), true);
      expect("failed" in end, phase).toBe(FAILED_ATTEMPT_PHASES.includes(phase));
      if ("failed" in end) expect(end.failed).toBe(`${phase}: R: m`);
    }
    expect(FAILED_ATTEMPT_PHASES).toEqual(["Failed", "RequestFailed", "Rejected"]);
  });

  it("an operation that did not end here completes its job saying restart recovery follows it, whatever its last phase", () => {
    const end = attemptJobEnd(attemptProgress("Running", at, commit), false);
    expect(end).toEqual({
      completed: expect.objectContaining({
        phase: "Running",
        message: expect.stringContaining("restart recovery"),
      }),
    });
  });

  it("Unresolved is stuck, in its progress and its log line", () => {
    const p = attemptProgress("Unresolved", at, commit, { reason: "OperationTimeout" });
    expect(p.stuck).toBe(true);
    expect(attemptLogLine(p)).toMatch(
      /^2026-03-01T10:00:00.000Z STUCK Unresolved — OperationTimeout \(past its deadline/,
    );
    expect(attemptProgress("Running", at, commit).stuck).toBeUndefined();
  });
});
