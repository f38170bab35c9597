import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["gateway/**/*.test.ts", "queue/**/*.test.ts", "sidecar/**/*.test.ts", "test/**/*.test.ts"],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: "forks",
    globalSetup: ["test/redis/global-setup.ts"],
    setupFiles: ["test/support/print-failures.ts"],
  },
});
