/**
 * Prints each failed test's errors as it fails. The reporter's closing summary holds them too, but
 * a CI log that loses the summary still shows what failed and where.
 */
import { beforeEach } from "vitest";

/** More to print when a test of this file fails (a scenario's kept logs), by title. */
export const failureContext = new Map<string, () => string>();

beforeEach((ctx) => {
  ctx.onTestFailed(({ task }) => {
    for (const [title, text] of failureContext) process.stdout.write(`\n--- ${title}\n${text()}---\n`);
    for (const e of task.result?.errors ?? []) {
      process.stdout.write(`\nFAILED ${task.file?.name ?? ""} > ${task.name}\n${e.stack ?? e.message}\n`);
    }
  });
});
