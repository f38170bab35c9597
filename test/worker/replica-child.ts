/**
 * A worker replica in its own process, so a test can kill it with SIGKILL mid-publication.
 * Settings come from the environment; prints one JSON line {owned: key} per branch it takes.
 */

import type { BranchSpec } from "../../queue/directory.js";
import { createLogger } from "../../queue/log.js";
import { Replica } from "../../queue/worker/replica.js";

const spec = JSON.parse(process.env.BRANCH_SPEC ?? "{}") as BranchSpec;
const replica = new Replica({
  redisUrl: process.env.REDIS_URL as string,
  prefix: process.env.PREFIX as string,
  cacheDir: process.env.CACHE_DIR as string,
  leaseMs: Number(process.env.LEASE_MS ?? 3000),
  sweepMs: 500,
  replicaId: process.env.REPLICA_ID ?? "child",
  directory: { branch: async (key) => (key === spec.key ? spec : undefined) },
  log: createLogger({ level: process.env.LOG_LEVEL ?? "warn", pretty: false }),
  branch: { pollMs: 50 },
  hooks: (key) => {
    process.stdout.write(`${JSON.stringify({ owned: key })}\n`);
    return {};
  },
});
await replica.start();
process.on("SIGTERM", () => void replica.stop().then(() => process.exit(0)));
