/** List then watch one resource path, calling back for every object; re-lists after any end. */
import { type KubeConfig, Watch } from "@kubernetes/client-node";

export interface Watcher {
  stop(): void;
}

export function watchAll(
  kc: KubeConfig,
  path: string,
  onObject: (
    type: string,
    obj: { metadata?: { name?: string; namespace?: string; resourceVersion?: string } },
  ) => void,
  list: () => Promise<{
    resourceVersion?: string;
    items: { metadata?: { name?: string; namespace?: string } }[];
  }>,
  onError: (e: unknown) => void,
): Watcher {
  let stopped = false;
  let abort: AbortController | undefined;
  let retry: NodeJS.Timeout | undefined;
  const start = async (): Promise<void> => {
    if (stopped) return;
    try {
      const l = await list();
      for (const item of l.items) onObject("LIST", item);
      if (stopped) return;
      abort = await new Watch(kc).watch(
        path,
        { allowWatchBookmarks: true, resourceVersion: l.resourceVersion },
        (type, obj) => {
          if (type !== "BOOKMARK" && type !== "ERROR") onObject(type, obj);
        },
        (err) => {
          if (err && !stopped && (err as { name?: string }).name !== "AbortError") onError(err);
          if (!stopped) retry = setTimeout(() => void start(), 20);
        },
      );
      if (stopped) abort.abort();
    } catch (e) {
      if (!stopped) {
        onError(e);
        retry = setTimeout(() => void start(), 50);
      }
    }
  };
  void start();
  return {
    stop() {
      stopped = true;
      if (retry) clearTimeout(retry);
      abort?.abort();
    },
  };
}
