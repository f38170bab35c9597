// The real tier: tests against kube-apiserver, etcd, Flux and Argo CD built by `npm run real:build`
// (test/real/*.real.test.ts). One file at a time: each starts its own control plane.
import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/real/**/*.real.test.ts"],
    testTimeout: 120_000,
    hookTimeout: 240_000,
    pool: "forks",
    fileParallelism: false,
    setupFiles: ["test/support/print-failures.ts"],
    reporters: ["default", "./test/support/failure-reporter.ts"],
  },
});
