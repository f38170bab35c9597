/**
 * A private `redis-server` a test can stop and start again behind the same port. By default it
 * keeps an append-only file in its own folder, as a production Redis does (see manifests/), so a
 * restart keeps what it acknowledged.
 *
 * The server listens on a unix socket in its own folder, and the test's clients reach it through
 * a TCP front that holds the port for the whole test. A server restarted on its TCP port left that
 * port free while it was down: another process on the machine (a soak run, a test of another
 * clone) could be handed it as a free port, and the restarted server then failed to bind while
 * the other's server answered in its place.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { createConnection, createServer, type Server, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { until } from "../support/wait.js";

export interface RestartableRedis {
  url: string;
  /** SIGTERM (or `signal`): Redis flushes its append-only file, if any, and exits. */
  stop(signal?: NodeJS.Signals): Promise<void>;
  /** Starts it again in the same folder behind the same port; resolves once it answers. */
  start(): Promise<void>;
  /** Stops it, closes the port and removes its folder. */
  remove(): Promise<void>;
}

export interface RestartableOptions {
  /** Keep an append-only file across restarts (default true); without it a restart starts empty. */
  persist?: boolean;
}

export async function restartableRedis(o: RestartableOptions = {}): Promise<RestartableRedis> {
  const dir = await mkdtemp(join(tmpdir(), "applygate-redis-"));
  const socket = join(dir, "redis.sock");
  const front = await holdPort(socket);
  let child: ChildProcess | undefined;
  const start = async () => {
    child = spawn(
      "redis-server",
      [
        "--port",
        "0",
        "--unixsocket",
        socket,
        "--unixsocketperm",
        "700",
        "--save",
        "",
        "--appendonly",
        o.persist === false ? "no" : "yes",
        "--dir",
        dir,
      ],
      { stdio: "ignore" },
    );
    await until(async () => socketAnswers(socket), "redis-server to answer", {
      timeoutMs: 10_000,
      everyMs: 50,
      retryErrors: true,
    });
  };
  const stop = (signal: NodeJS.Signals = "SIGTERM") => {
    const c = child;
    if (!c || c.exitCode !== null || c.signalCode !== null) return Promise.resolve();
    return new Promise<void>((resolve) => {
      c.once("exit", () => {
        front.dropAll();
        resolve();
      });
      c.kill(signal);
    });
  };
  await start();
  return {
    url: `redis://127.0.0.1:${front.port}`,
    stop,
    start,
    async remove() {
      await stop();
      await front.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/** Whether a Redis on the unix socket answers PING. */
function socketAnswers(path: string): Promise<boolean> {
  return new Promise((resolve) => {
    const s = createConnection(path);
    const done = (ok: boolean) => {
      s.destroy();
      resolve(ok);
    };
    s.once("error", () => done(false));
    s.once("connect", () => s.write("PING\r\n"));
    s.once("data", (d) => done(d.toString().startsWith("+PONG")));
  });
}

/**
 * A TCP port on 127.0.0.1, held until `close`, whose connections are piped to the unix socket. A
 * connection made while nothing listens there is closed at once, as a stopped server's would be.
 */
async function holdPort(path: string): Promise<{ port: number; dropAll(): void; close(): Promise<void> }> {
  const open = new Set<Socket>();
  const server: Server = createServer((client) => {
    open.add(client);
    const backend = createConnection(path);
    const end = () => {
      client.destroy();
      backend.destroy();
      open.delete(client);
    };
    client.on("error", end).on("close", end);
    backend.on("error", end).on("close", end);
    client.pipe(backend);
    backend.pipe(client);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as { port: number }).port;
  return {
    port,
    dropAll() {
      for (const s of open) s.destroy();
      open.clear();
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of open) s.destroy();
        server.close(() => resolve());
      }),
  };
}
