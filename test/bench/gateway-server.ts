/**
 * The servers the gateway benchmark drives, in a process of their own so the load generator does
 * not share their event loop: the full gateway (verify + enqueue into Redis) and a bare fastify
 * route answering the same payload. Prints `{gateway, bare}` URLs as one JSON line, then serves
 * until stdin closes; each `cpu` line read from stdin is answered with this process's
 * `process.cpuUsage()` as one JSON line, so the bench can charge CPU to the requests between two.
 */
import { createInterface } from "node:readline";
import Fastify from "fastify";
import { startGateway } from "../../gateway/app.js";
import { StaticCatalog } from "../../gateway/catalog.js";
import { silentLogger } from "../../queue/log.js";
import { fixtureObjects } from "../support/gateway.js";

const redisUrl = process.env.TEST_REDIS_URL ?? "redis://127.0.0.1:6379";
const prefix = process.env.BENCH_PREFIX ?? `bench-${process.pid}`;

const gw = await startGateway({
  redisUrl,
  prefix,
  catalog: new StaticCatalog(fixtureObjects()),
  logger: silentLogger(),
  queueEvents: false,
});

const bare = Fastify();
bare.removeAllContentTypeParsers();
bare.addContentTypeParser("*", { parseAs: "buffer" }, (_req, body, done) => done(null, body));
bare.post("/hook/:id", async (_req, reply) => reply.code(202).send({ status: "queued", id: "push-0" }));
const bareUrl = await bare.listen({ host: "127.0.0.1", port: 0 });

process.stdout.write(`${JSON.stringify({ gateway: gw.url, bare: bareUrl })}\n`);
const commands = createInterface({ input: process.stdin });
commands.on("line", (line) => {
  if (line.trim() === "cpu") process.stdout.write(`${JSON.stringify(process.cpuUsage())}\n`);
});
commands.on("close", async () => {
  await gw.close();
  await bare.close();
  process.exit(0);
});
