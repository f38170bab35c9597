/**
 * The seeds `npm test` plays (test/scenarios/soak.test.ts): 6 actions each, whose plans together
 * draw every fault action (checked by plan.test.ts). See docs/testing.md.
 */
export const SEED_SET = [1902, 1963, 2428] as const;
export const SEED_ACTIONS = 6;
