/**
 * The cluster-access layer every process shares: the client, the conflict-retry policy, the
 * shared informers, typed readers of our kinds, and the work queue controllers react through.
 * See docs/design/cluster-access.md.
 */
export * from "./client.js";
export * from "./errors.js";
export * from "./events.js";
export * from "./informer.js";
export * from "./readers.js";
export * from "./resources.js";
export * from "./retry.js";
export * from "./status-owners.js";
export * from "./work-queue.js";
