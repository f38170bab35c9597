/**
 * The intake budget of one branch: what its retained writes may cost. The gateway's intake gate
 * (queue/intake.ts) charges each write as it accepts it and refuses one that would pass the
 * budget; the worker gives the charge back when the write is published or settled as refused.
 * Only a branch whose publication waits for a retry latches the pause, and only a landed push
 * releases it (room under the budget again is not enough while the remote still fails).
 */
export { WRITE_OVERHEAD_BYTES, writeCharge } from "../intake.js";

export const DEFAULT_INTAKE_BUDGET_BYTES = 64 * 1024 * 1024;
