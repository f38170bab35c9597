/**
 * The intake budget of one branch: what its retained writes cost, and whether intake pauses. Only
 * a branch whose publication waits for a retry can pause; the pause is a latch that only a landed
 * push releases (room under the budget again is not enough while the remote still fails).
 */
export const DEFAULT_INTAKE_BUDGET_BYTES = 64 * 1024 * 1024;
/** Charged per write beyond its payload, so the budget also bounds the number of writes. */
export const WRITE_OVERHEAD_BYTES = 1024;

export function writeCharge(payloadBytes: number): number {
  return payloadBytes + WRITE_OVERHEAD_BYTES;
}

export function shouldPause(input: {
  paused: boolean;
  retryPending: boolean;
  retainedBytes: number;
  budgetBytes: number;
}): boolean {
  if (input.paused) return true;
  return input.retryPending && input.retainedBytes > input.budgetBytes;
}
