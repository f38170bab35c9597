/**
 * Commit windows, as pure functions: writes to one GitTarget gather until the window is idle for
 * `idleMs`, reaches `maxMs`, or a save arrives; then the window becomes one pending write.
 */
export interface WindowSettings {
  idleMs: number;
  maxMs: number;
}

export const DEFAULT_WINDOW: WindowSettings = { idleMs: 5_000, maxMs: 60_000 };

export interface OpenWindow<W> {
  target: string;
  writes: W[];
  openedAt: number;
  lastAt: number;
  settings: WindowSettings;
  /** A save arrived: close at once. */
  save: boolean;
}

export function addToWindow<W>(
  windows: Map<string, OpenWindow<W>>,
  target: string,
  write: W,
  at: number,
  settings: WindowSettings,
  save: boolean,
): void {
  const open = windows.get(target);
  if (open) {
    open.writes.push(write);
    open.lastAt = at;
    open.save ||= save;
    return;
  }
  windows.set(target, { target, writes: [write], openedAt: at, lastAt: at, settings, save });
}

/** When the window closes by itself. */
export function closesAt(w: OpenWindow<unknown>): number {
  if (w.save) return w.lastAt;
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
