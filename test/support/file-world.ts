/**
 * One world for the tests of a file, or of the describe block it is called in: started before the
 * first, stopped after the last. What it answers stands for the world itself (read it inside
 * tests and hooks, not at the file's top).
 */
import { afterAll, beforeAll } from "vitest";

export function fileWorld<T extends { stop(): Promise<unknown> }>(start: () => Promise<T>): T {
  let world: T | undefined;
  beforeAll(async () => {
    world = await start();
  });
  afterAll(async () => {
    await world?.stop();
  });
  return new Proxy({} as T, {
    get(_, key) {
      if (!world) throw new Error(`the file's world is not started: ${String(key)} was read too early`);
      const v = Reflect.get(world, key, world);
      return typeof v === "function" ? v.bind(world) : v;
    },
  });
}
