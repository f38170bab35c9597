import { spawnSync } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { machineLock } from "./machine-lock.js";

const name = () => `test-${process.pid}-${Math.random().toString(16).slice(2)}`;

describe("machineLock", () => {
  it("lets a second holder in only once the first let go", async () => {
    const lock = name();
    const first = await machineLock(lock);
    let second: (() => void) | undefined;
    const waiting = machineLock(lock).then((r) => {
      second = r;
    });
    // An absence while the first holds it: the second's poll (200 ms) would take it within this.
    await new Promise((r) => setTimeout(r, 500));
    expect(second).toBeUndefined();
    first();
    await waiting;
    expect(second).toBeDefined();
    second?.();
  });

  it("takes over the lock of a holder that died", async () => {
    const lock = name();
    // A process that has exited: its pid is free.
    const dead = spawnSync(process.execPath, ["-e", "0"]).pid as number;
    const dir = join(tmpdir(), `applygate-lock-${lock}`);
    mkdirSync(dir);
    writeFileSync(join(dir, "pid"), String(dead));
    const release = await machineLock(lock, 5_000);
    release();
  });

  it("gives up after its bound while a live holder keeps it", async () => {
    const lock = name();
    const held = await machineLock(lock);
    await expect(machineLock(lock, 300)).rejects.toThrow(/still held by pid/);
    held();
  });
});
