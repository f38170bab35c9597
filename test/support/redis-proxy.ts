/**
 * A TCP proxy on 127.0.0.1 in front of a test Redis, for what a Redis outage does to a client:
 * its clients dropped, a SUBSCRIBE held back, or the reply to one command lost (the command ran,
 * the connection closed before its answer came back, as when Redis stops right after running it).
 */
import type { AddressInfo } from "node:net";
import { createServer, type Server, Socket } from "node:net";

export interface RedisProxy {
  url: string;
  state: {
    /** Hold back (never forward) the next SUBSCRIBE; `held` turns true once one was. */
    holdSubscribe: boolean;
    held: boolean;
  };
  /**
   * The next command whose bytes match `pattern` reaches Redis, and its connection closes before
   * the answer comes back. Resolves once that connection is closed.
   */
  loseReplyTo(pattern: RegExp): Promise<void>;
  dropClients(): void;
  close(): Promise<void>;
}

export async function redisProxy(redisUrl: string): Promise<RedisProxy> {
  const target = new globalThis.URL(redisUrl);
  const clients = new Set<Socket>();
  const state = { holdSubscribe: false, held: false };
  let loseReply: { pattern: RegExp; lost: () => void } | undefined;
  const server: Server = createServer((client) => {
    clients.add(client);
    const upstream = new Socket();
    upstream.connect(Number(target.port || 6379), target.hostname);
    let replyLost: (() => void) | undefined;
    upstream.on("data", (b) => {
      if (!replyLost) {
        client.write(b);
        return;
      }
      // The answer (and whatever came with it) never reaches the client.
      const lost = replyLost;
      replyLost = undefined;
      close();
      lost();
    });
    client.on("data", (b) => {
      const text = b.toString("latin1");
      if (state.holdSubscribe && /subscribe/i.test(text)) {
        state.held = true;
        return;
      }
      if (loseReply?.pattern.test(text)) {
        replyLost = loseReply.lost;
        loseReply = undefined;
      }
      upstream.write(b);
    });
    const close = () => {
      clients.delete(client);
      client.destroy();
      upstream.destroy();
    };
    client.on("end", close);
    client.on("close", close);
    client.on("error", close);
    upstream.on("close", close);
    upstream.on("error", close);
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
  const { port } = server.address() as AddressInfo;
  return {
    url: `redis://127.0.0.1:${port}${target.pathname}`,
    state,
    loseReplyTo: (pattern) => new Promise<void>((lost) => (loseReply = { pattern, lost })),
    dropClients: () => {
      for (const c of clients) c.destroy();
    },
    close: () =>
      new Promise<void>((r) => {
        for (const c of clients) c.destroy();
        server.close(() => r());
      }),
  };
}
