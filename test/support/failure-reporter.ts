/**
 * Prints the errors of a file or suite that failed outside any test (a beforeAll that threw, an
 * import that failed) as the file ends. print-failures.ts prints failed tests; a failed hook only
 * skips its tests, and a CI log without the closing summary showed "3 failed" with no reason.
 */
import type { Reporter, TestModule } from "vitest/node";

export default class FailureReporter implements Reporter {
  onTestModuleEnd(module: TestModule): void {
    const where = [
      { name: "", errors: module.errors() },
      ...[...module.children.allSuites()].map((s) => ({ name: s.fullName, errors: s.errors() })),
    ];
    for (const { name, errors } of where)
      for (const e of errors)
        process.stdout.write(
          `\nFAILED ${module.moduleId}${name ? ` > ${name}` : ""} (outside a test)\n${e.stack ?? e.message}\n`,
        );
  }
}
