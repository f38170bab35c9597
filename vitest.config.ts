import { configDefaults, defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["gateway/**/*.test.ts", "queue/**/*.test.ts", "sidecar/**/*.test.ts", "test/**/*.test.ts"],
    // The real tier has its own run (npm run test:real, test/real/vitest.config.ts).
    exclude: [...configDefaults.exclude, "test/real/**/*.real.test.ts"],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: "forks",
    globalSetup: ["test/redis/global-setup.ts"],
    setupFiles: ["test/support/print-failures.ts"],
    reporters: ["default", "./test/support/failure-reporter.ts"],
  },
});
