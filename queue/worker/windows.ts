/**
 * Commit windows, as pure functions: writes to one GitTarget gather until the window is idle for
 * `idleMs` or reaches `maxMs`; a save closes it at once, so the saved state is a commit of its own
 * and a write arriving right after the save (even in the same inbox read) opens the next window.
 */
import type { WindowSettings } from "../directory.js";

export type { WindowSettings };

export const DEFAULT_WINDOW: WindowSettings = { idleMs: 5_000, maxMs: 60_000 };

export interface OpenWindow<W> {
  target: string;
  writes: W[];
  openedAt: number;
  lastAt: number;
  settings: WindowSettings;
}

/**
 * Adds a write to its target's window (opening one if none is open). A save closes the window:
 * it leaves the map and is returned, to become a pending write before anything else is read.
 */
export function addToWindow<W>(
  windows: Map<string, OpenWindow<W>>,
  target: string,
  write: W,
  at: number,
  settings: WindowSettings,
  save: boolean,
): OpenWindow<W> | undefined {
  let w = windows.get(target);
  if (w) {
    w.writes.push(write);
    w.lastAt = at;
  } else {
    w = { target, writes: [write], openedAt: at, lastAt: at, settings };
    windows.set(target, w);
  }
  if (!save) return undefined;
  windows.delete(target);
  return w;
}

/** When the window closes by itself. */
export function closesAt(w: OpenWindow<unknown>): number {
  return Math.min(w.lastAt + w.settings.idleMs, w.openedAt + w.settings.maxMs);
}

/** Windows due at `now` (or all when `all`), in the order they opened. */
export function dueWindows<W>(
  windows: Map<string, OpenWindow<W>>,
  now: number,
  all = false,
): OpenWindow<W>[] {
  return [...windows.values()]
    .filter((w) => all || closesAt(w) <= now)
    .sort((a, b) => a.openedAt - b.openedAt);
}

export function nextWindowDeadline(windows: Map<string, OpenWindow<unknown>>): number | undefined {
  let next: number | undefined;
  for (const w of windows.values()) {
    const at = closesAt(w);
    if (next === undefined || at < next) next = at;
  }
  return next;
}
