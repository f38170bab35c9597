/**
 * Every branch a GitTarget writes is known to the worker replicas from the moment the GitTarget
 * (and its GitProvider) exists: its branch worker starts, takes its baseline and converges the
 * appliers its claims hold (CatchUp), before any write or push names the branch. Without it a new
 * GitTarget's branch waited for its first write or push, and nothing applied the tip its claim held.
 */
import type { Redis } from "ioredis";
import { errorMessage } from "../errors.js";
import { knownBranchesKey } from "../keys.js";
import type { Logger } from "../log.js";

export interface BranchSource {
  branchKeys(): string[];
  onChange(listener: (keys: Set<string> | "all") => void): () => void;
}

/** Adds the branches GitTargets write to the known set, now and on every change; returns the stop. */
export function discoverBranches(o: { source: BranchSource; redis: Redis; prefix: string; log: Logger }): {
  stop(): void;
  settled(): Promise<void>;
} {
  let running: Promise<void> = Promise.resolve();
  // Changes come in bursts (a first listing tells every object, claims move at every apply): one
  // add queued at a time reads the keys when it runs, and a list already recorded is not sent again.
  let queued = false;
  let recorded: string[] | undefined;
  const add = () => {
    if (queued) return;
    queued = true;
    running = running.then(async () => {
      queued = false;
      const keys = o.source.branchKeys();
      if (keys.length === 0 || keys === recorded) return;
      try {
        const added = await o.redis.sadd(knownBranchesKey(o.prefix), ...keys);
        recorded = keys;
        if (added > 0) o.log.info({ added }, "branches of new GitTargets known");
      } catch (err) {
        o.log.warn({ err: errorMessage(err) }, "could not record the GitTargets' branches");
      }
    });
  };
  const stop = o.source.onChange(add);
  add();
  return { stop, settled: () => running };
}
