/** The branch worker's pure decision core. See docs/design/decisions.md. */

export * from "../governance/change-windows.js";
export * from "../governance/judge.js";
export * from "../governance/model.js";
export * from "../governance/tag-approval.js";
export * from "./backoff.js";
export * from "./due.js";
export * from "./explain.js";
export * from "./governance.js";
export * from "./model.js";
export * from "./quiet.js";
export * from "./reasons.js";
export * from "./refusal.js";
export * from "./retry-view.js";
export * from "./snapshots.js";
export * from "./step.js";
export * from "./supersede.js";
export * from "./sync-windows.js";
export * from "./window.js";
