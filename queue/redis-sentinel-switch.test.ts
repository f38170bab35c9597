/**
 * A connection through the sentinels survives a `+switch-master` announced while it is already
 * reconnecting. ioredis's optional failover detector disconnects the connector on that message;
 * when the connection was lost first (the primary died) and is in the middle of asking a sentinel
 * for the primary, that disconnect ends the connection for good (status `end`, never retried).
 * The Sentinel failover test lost a BullMQ consumer that way now and then; here the interleaving
 * is made on purpose with a sentinel of our own that holds its answer while it announces a switch.
 */
import { createServer, type Server, type Socket } from "node:net";
import type { Redis } from "ioredis";
import { afterEach, describe, expect, it } from "vitest";
import { testRedisUrl } from "../test/redis/isolated.js";
import { untilWith } from "../test/support/wait.js";
import { connectRedis } from "./redis.js";

/** The Redis the tests share, which the sentinel names as the primary. */
const DATA = (() => {
  const u = new URL(testRedisUrl());
  return { host: u.hostname, port: Number(u.port || 6379) };
})();
const MASTER = "switching";
const until = untilWith({ timeoutMs: 10_000, everyMs: 10 });

const bulk = (s: string) => `$${Buffer.byteLength(s)}\r\n${s}\r\n`;
const array = (items: string[]) => `*${items.length}\r\n${items.join("")}`;

/** Commands (arrays of bulk strings) parsed off a RESP byte stream. */
function commands(onCommand: (args: string[]) => void) {
  let buf = "";
  return (chunk: Buffer) => {
    buf += chunk.toString("latin1");
    for (;;) {
      const parsed = parseArray(buf);
      if (!parsed) return;
      buf = buf.slice(parsed.used);
      onCommand(parsed.args);
    }
  };
}
function parseArray(buf: string): { args: string[]; used: number } | undefined {
  if (!buf.startsWith("*")) return undefined;
  let at = buf.indexOf("\r\n");
  if (at < 0) return undefined;
  const n = Number(buf.slice(1, at));
  at += 2;
  const args: string[] = [];
  for (let i = 0; i < n; i++) {
    const end = buf.indexOf("\r\n", at);
    if (end < 0) return undefined;
    const len = Number(buf.slice(at + 1, end));
    if (buf.length < end + 2 + len + 2) return undefined;
    args.push(buf.slice(end + 2, end + 2 + len));
    at = end + 2 + len + 2;
  }
  return { args, used: at };
}

/**
 * A sentinel that names the local Redis as the primary. `hold` keeps the next answer to "which is
 * the primary" until released; `subscribers` are the connections subscribed to `+switch-master`.
 */
class FakeSentinel {
  server: Server;
  port = 0;
  asked = 0;
  held: Array<() => void> = [];
  hold = false;
  subscribers = new Set<Socket>();

  constructor() {
    this.server = createServer((socket) => {
      socket.on("error", () => {});
      socket.on("close", () => this.subscribers.delete(socket));
      socket.on(
        "data",
        commands((args) => this.answer(socket, args)),
      );
    });
  }

  async listen(): Promise<void> {
    await new Promise<void>((r) => this.server.listen(0, "127.0.0.1", r));
    this.port = (this.server.address() as { port: number }).port;
  }

  private answer(socket: Socket, args: string[]) {
    const [cmd, sub] = args.map((a) => a.toLowerCase());
    if (cmd === "sentinel" && sub === "get-master-addr-by-name") {
      this.asked++;
      const reply = () => socket.write(array([bulk(DATA.host), bulk(String(DATA.port))]));
      if (this.hold) this.held.push(reply);
      else reply();
    } else if (cmd === "sentinel" && sub === "sentinels") socket.write("*0\r\n");
    else if (cmd === "subscribe") {
      this.subscribers.add(socket);
      socket.write(array([bulk("subscribe"), bulk(args[1] as string), ":1\r\n"]));
    } else socket.write(`-ERR unknown command '${args[0]}'\r\n`);
  }

  announceSwitch(): void {
    const payload = `${MASTER} ${DATA.host} ${DATA.port} ${DATA.host} ${DATA.port}`;
    for (const s of this.subscribers)
      s.write(array([bulk("message"), bulk("+switch-master"), bulk(payload)]));
  }

  release(): void {
    this.hold = false;
    for (const reply of this.held.splice(0)) reply();
  }

  async close(): Promise<void> {
    for (const s of this.subscribers) s.destroy();
    await new Promise<void>((r) => this.server.close(() => r()));
  }
}

describe("a switch announced while the connection reconnects", () => {
  let sentinel: FakeSentinel | undefined;
  const clients: Redis[] = [];
  afterEach(async () => {
    for (const c of clients.splice(0)) c.disconnect();
    await sentinel?.close();
  });

  /** Breaks the connection and announces a switch while its reconnect waits for the sentinel. */
  async function switchWhileReconnecting(client: Redis, s: FakeSentinel): Promise<void> {
    expect(await client.ping()).toBe("PONG");
    const detecting = client.options.failoverDetector === true;
    // The failover detector subscribes once the connection is up.
    if (detecting) await until(() => s.subscribers.size > 0, "the failover detector to subscribe");
    const killer = connectRedis(`redis://${DATA.host}:${DATA.port}`);
    clients.push(killer);
    s.hold = true;
    const askedBefore = s.asked;
    const id = (await client.client("ID")) as number;
    await killer.client("KILL", "ID", String(id));
    await until(() => s.asked > askedBefore, "the reconnect to ask the sentinel");
    // The primary switched (to the same address: what matters is when it is said). A detector
    // acts on it by closing its subscriptions.
    s.announceSwitch();
    if (detecting) await until(() => s.subscribers.size === 0, "the failover detector to act");
    s.release();
    await until(() => client.status === "ready" || client.status === "end", "the connection to settle");
  }

  it("reconnects to the primary the sentinels name, instead of ending", async () => {
    sentinel = new FakeSentinel();
    await sentinel.listen();
    const client = connectRedis(`redis+sentinel://127.0.0.1:${sentinel.port}/${MASTER}`);
    clients.push(client);
    await switchWhileReconnecting(client, sentinel);
    expect(client.status).toBe("ready");
    expect(await client.ping()).toBe("PONG");
  });

  it("would end for good with ioredis's failover detector, which is why it is off", async () => {
    sentinel = new FakeSentinel();
    await sentinel.listen();
    const client = connectRedis(`redis+sentinel://127.0.0.1:${sentinel.port}/${MASTER}`, {
      failoverDetector: true,
    });
    clients.push(client);
    await switchWhileReconnecting(client, sentinel);
    expect(client.status).toBe("end");
  });
});
