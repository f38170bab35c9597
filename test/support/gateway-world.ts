/**
 * The gateway as its tests run it: on the fixture catalog of ./gateway.ts, without process metrics
 * or QueueEvents (nothing to watch in a test), on a Redis namespace of its own.
 */
import type { Gateway, GatewayOptions } from "../../gateway/app.js";
import { StaticCatalog } from "../../gateway/catalog.js";
import { type IsolatedRedis, isolatedRedis } from "../redis/isolated.js";
import { fixtureObjects } from "./gateway.js";

/** A test gateway's options at `redis`; `extra` adds to them or overrides them (a catalog of its own). */
export function fixtureGatewayOptions(
  redis: { url: string; prefix: string },
  extra: Partial<GatewayOptions> = {},
): GatewayOptions {
  return {
    redisUrl: redis.url,
    prefix: redis.prefix,
    catalog: new StaticCatalog(fixtureObjects()),
    processMetrics: false,
    queueEvents: false,
    ...extra,
  };
}

export interface GatewayWorld<G extends Gateway> {
  redis: IsolatedRedis;
  gw: G;
  stop(): Promise<void>;
}

/**
 * A gateway opened by `open` (createGateway, or startGateway to listen on a port) on a fresh
 * isolated Redis namespace named after `label`; stop closes it and removes its keys. For fileWorld.
 */
export async function gatewayWorld<G extends Gateway>(
  label: string,
  open: (options: GatewayOptions) => Promise<G>,
  extra: Partial<GatewayOptions> = {},
): Promise<GatewayWorld<G>> {
  const redis = await isolatedRedis(label);
  const gw = await open(fixtureGatewayOptions(redis, extra)).catch(async (err: unknown) => {
    await redis.cleanup();
    throw err;
  });
  return {
    redis,
    gw,
    async stop() {
      await gw.close();
      await redis.cleanup();
    },
  };
}
