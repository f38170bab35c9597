/**
 * The callback API of the webhook applier: `POST /v1/operations/{token}`, where a tool reports
 * the phase of an apply it was asked for (`{phase: Running|Succeeded|Failed, message}`), signed
 * with its WebhookClaim's HMAC key as the request was (`X-Signature` or `X-Hub-Signature-256`,
 * `sha256=<hex>` over the raw body). An unknown or finished token and a bad signature answer
 * the same miss and cost the same: one Redis read and one HMAC, whatever the case. A report is
 * acknowledged (202) only once Redis holds it, appended to the operation's reports for the
 * sidecar following it.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { Redis } from "ioredis";
import type { Logger } from "../queue/log.js";
import { CallbackBody, CallbackRecord, callbackKeys, SIGNATURE_HEADER } from "../queue/webhook-callback.js";
import { sendMiss, sendUnavailable, withTimeout } from "./answers.js";
import type { Catalog } from "./catalog.js";
import { describeZodError } from "./intake.js";
import { DUMMY_SECRET, header, prefixedHmacMatches } from "./verify.js";

export interface CallbackDeps {
  catalog: Catalog;
  redis: Redis;
  prefix: string;
  log: Logger;
  redisTimeoutMs: number;
  replicated?: () => Promise<void>;
  now: () => Date;
}

/** Appends only while the record exists: a report racing the operation's end is not kept. */
const APPEND_WHILE_OPEN = `
if redis.call('EXISTS', KEYS[1]) == 1 then
  redis.call('RPUSH', KEYS[2], ARGV[1])
  redis.call('EXPIRE', KEYS[2], ARGV[2])
  return 1
end
return 0`;

const TOKEN = /^[A-Za-z0-9._:-]{1,200}$/;

type Req = FastifyRequest<{ Params: { token: string } }>;

export function callbackRoutes(deps: CallbackDeps) {
  return async function callbacks(app: FastifyInstance): Promise<void> {
    app.removeAllContentTypeParsers();
    app.addContentTypeParser("*", { parseAs: "buffer" }, (_req, body, done) => done(null, body));
    app.post("/v1/operations/:token", (req: Req, reply) => report(deps, req, reply));
  };
}

async function report(deps: CallbackDeps, req: Req, reply: FastifyReply): Promise<FastifyReply> {
  const body = Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0);
  const token = TOKEN.test(req.params.token) ? req.params.token : "\u0000";
  const keys = callbackKeys(deps.prefix, token);
  let raw: string | null;
  try {
    raw = await withTimeout(deps.redis.get(keys.record), deps.redisTimeoutMs, "callback lookup");
  } catch {
    return sendUnavailable(reply);
  }
  let record: CallbackRecord | undefined;
  try {
    const r = raw === null ? undefined : CallbackRecord.safeParse(JSON.parse(raw));
    record = r?.success ? r.data : undefined;
  } catch {
    record = undefined;
  }
  const entry = record
    ? deps.catalog.snapshot().webhookClaim(record.claim.namespace, record.claim.name)
    : undefined;
  // One HMAC on every path, a dummy key when there is nothing to check against.
  const signature =
    header(req.headers, SIGNATURE_HEADER["generic-hmac"]) ?? header(req.headers, SIGNATURE_HEADER.github);
  const matches = prefixedHmacMatches(entry?.key ?? DUMMY_SECRET, body, signature, ["sha256"]);
  if (!matches || !entry?.key) return sendMiss(reply);

  let parsed: CallbackBody;
  try {
    const r = CallbackBody.safeParse(JSON.parse(body.toString("utf8")));
    if (!r.success) return reply.code(400).send({ error: describeZodError(r.error) });
    parsed = r.data;
  } catch {
    return reply.code(400).send({ error: "body: not JSON" });
  }
  const entryJson = JSON.stringify({ ...parsed, receivedAt: deps.now().toISOString() });
  let kept: number;
  try {
    kept = (await withTimeout(
      deps.redis.eval(APPEND_WHILE_OPEN, 2, keys.record, keys.reports, entryJson, String(7 * 24 * 3600)),
      deps.redisTimeoutMs,
      "callback append",
    )) as number;
    if (kept === 1) await deps.replicated?.();
  } catch {
    return sendUnavailable(reply);
  }
  // Ended between the read and the append: finished, as any later report is.
  if (kept !== 1) return sendMiss(reply);
  deps.log.info(
    { token, claim: `${entry.namespace}/${entry.name}`, phase: parsed.phase },
    "webhook operation report accepted",
  );
  return reply.code(202).send({ accepted: true });
}
