/** Claim fixtures for unit tests of what reads a claim's status. */

/** A claim's status saying it holds its applier (InControl=True for `reason`), as the reconciler writes it. */
export const inControlStatus = (reason = "Suspended") => ({
  conditions: [
    { type: "InControl", status: "True", reason, message: "", lastTransitionTime: "2026-01-01T00:00:00Z" },
  ],
});
