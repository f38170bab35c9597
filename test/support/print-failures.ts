/**
 * Prints each failed test's errors as it fails. The reporter's closing summary holds them too, but
 * a CI log that loses the summary still shows what failed and where.
 */
import { beforeEach } from "vitest";

beforeEach((ctx) => {
  ctx.onTestFailed(({ task }) => {
    for (const e of task.result?.errors ?? []) {
      process.stdout.write(`\nFAILED ${task.file?.name ?? ""} > ${task.name}\n${e.stack ?? e.message}\n`);
    }
  });
});
