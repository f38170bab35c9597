/**
 * Watch streams: newline-delimited JSON events over a chunked response, resumable from a
 * resourceVersion, 410 Gone (as an ERROR event) when that version is older than the history kept,
 * optional bookmarks, selector transitions shown as ADDED/DELETED like the real server.
 */
import type { ServerResponse } from "node:http";
import type { Faults } from "./faults.js";
import { servedShape } from "./registry.js";
import type { Matcher } from "./selectors.js";
import type { Change, Store } from "./store.js";
import { apiVersionOf, type KObject, type ResourceType } from "./types.js";

export interface WatchRequest {
  type: ResourceType;
  /** Where the type's objects are stored (another resource's, for a view such as events.k8s.io). */
  typeKey: string;
  namespace?: string;
  matches: Matcher;
  resourceVersion?: string;
  bookmarks: boolean;
  bookmarkIntervalMs: number;
  timeoutSeconds?: number;
  path: string;
  /** turns an object into what the client asked for (the object itself, or a one-row Table) */
  render: (o: KObject) => unknown;
}

export function serveWatch(res: ServerResponse, store: Store, faults: Faults, w: WatchRequest): void {
  res.writeHead(200, {
    "Content-Type": "application/json",
    "Cache-Control": "no-cache, private",
    "Transfer-Encoding": "chunked",
  });
  // Send headers now: the client's fetch waits for them before it hands over the stream.
  res.flushHeaders();
  const send = (type: string, object: unknown) => {
    if (!res.writableEnded) res.write(JSON.stringify({ type, object }) + "\n");
  };
  // Stored objects are matched and shown in the shape the watched type serves.
  const view = (o: KObject) => servedShape(w.type, { ...o });
  const show = (o: KObject) => w.render(o);
  const inScope = (o: KObject) => w.namespace === undefined || o.metadata.namespace === w.namespace;

  const deliver = (c: Change) => {
    if (c.typeKey !== w.typeKey) return;
    const object = view(c.object);
    const now = inScope(object) && w.matches(object);
    const before = c.previous !== undefined && inScope(c.previous) && w.matches(view(c.previous));
    if (c.type === "DELETED") {
      if (now || before) send("DELETED", show(object));
    } else if (c.type === "ADDED") {
      if (now) send("ADDED", show(object));
    } else if (now && before) send("MODIFIED", show(object));
    else if (now) send("ADDED", show(object));
    else if (before) send("DELETED", show(object));
  };

  const rv = w.resourceVersion;
  if (!rv || rv === "0") {
    for (const stored of store.list(w.typeKey, w.namespace)) {
      const o = view(stored);
      if (w.matches(o)) send("ADDED", show(o));
    }
  } else {
    const from = Number(rv);
    const missed = Number.isFinite(from) ? store.changesSince(from) : undefined;
    if (!missed) {
      send("ERROR", {
        kind: "Status",
        apiVersion: "v1",
        metadata: {},
        status: "Failure",
        message: `too old resource version: ${rv} (${store.currentRv()})`,
        reason: "Expired",
        code: 410,
      });
      res.end();
      return;
    }
    for (const c of missed) deliver(c);
  }

  const unsubscribe = store.subscribe(deliver);
  const timers: NodeJS.Timeout[] = [];
  if (w.bookmarks) {
    // kube-apiserver's watch cache sends a bookmark only once the resourceVersion has moved past
    // the one the watch started from, and sends it periodically and once 2 s before the watch's
    // timeout (so that a client resumes from as late as possible).
    const startRv = rv && rv !== "0" ? Number(rv) : store.currentRv();
    const bookmark = () => {
      const now = store.currentRv();
      if (now <= startRv) return;
      send("BOOKMARK", {
        kind: w.type.kind,
        apiVersion: apiVersionOf(w.type),
        metadata: { resourceVersion: String(now) },
      });
    };
    timers.push(setInterval(bookmark, w.bookmarkIntervalMs));
    if (w.timeoutSeconds && w.timeoutSeconds > 2)
      timers.push(setTimeout(bookmark, (w.timeoutSeconds - 2) * 1000));
  }
  const close = () => {
    unsubscribe();
    unregister();
    for (const t of timers) clearTimeout(t);
    if (!res.writableEnded) res.end();
  };
  if (w.timeoutSeconds && w.timeoutSeconds > 0) timers.push(setTimeout(close, w.timeoutSeconds * 1000));
  const unregister = faults.registerWatch((prefix, abrupt) => {
    if (!w.path.startsWith(prefix)) return false;
    if (!abrupt) {
      close(); // the stream ends cleanly, as when the server's watch timeout expires
      return true;
    }
    // The connection breaks without a final chunk (a proxy or network failure).
    unsubscribe();
    for (const t of timers) clearInterval(t);
    res.socket?.destroy();
    return true;
  });
  res.on("close", close);
}
