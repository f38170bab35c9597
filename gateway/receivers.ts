/**
 * `POST /hook/<hex>`: one receiver path per GitProvider. Verify first (against a dummy secret when
 * the path is unknown), then read the event, then the payload; every miss answers the same bytes
 * after the same work. A verified event that is not a push is answered 200 and ignored; a verified
 * push for a branch some GitTarget writes becomes a push notice, acknowledged only once Redis
 * holds it.
 */
import { isUtf8 } from "node:buffer";
import { createHash } from "node:crypto";
import type { Queue } from "bullmq";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { PushNotice } from "../queue/contract.js";
import { errorMessage } from "../queue/errors.js";
import { enqueueNotice } from "../queue/intake.js";
import type { Logger } from "../queue/log.js";
import { sendMiss, sendUnavailable, withTimeout } from "./answers.js";
import type { Catalog } from "./catalog.js";
import type { GatewayMetrics } from "./metrics.js";
import { deliveryEvent, deliveryIdOf, parsePayload, readPush } from "./push.js";
import { header, verifyDelivery, verifyUnknown } from "./verify.js";

export interface ReceiverDeps {
  catalog: Catalog;
  notices: Queue;
  metrics: GatewayMetrics;
  log: Logger;
  redisTimeoutMs: number;
  /** Resolves once replicas hold what this gateway just enqueued (`--redis-wait-replicas`); unset: no wait. */
  replicated?: () => Promise<void>;
  now: () => Date;
}

export function receiverRoutes(deps: ReceiverDeps) {
  return async function receivers(app: FastifyInstance): Promise<void> {
    // The HMAC is over the bytes as sent, so every body arrives unparsed.
    app.removeAllContentTypeParsers();
    app.addContentTypeParser("*", { parseAs: "buffer" }, (_req, body, done) => done(null, body));
    app.post<{ Params: { id: string } }>("/hook/:id", (req, reply) => receive(deps, req, reply));
  };
}

async function receive(
  deps: ReceiverDeps,
  req: FastifyRequest<{ Params: { id: string } }>,
  reply: FastifyReply,
): Promise<FastifyReply> {
  const body = Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0);
  // Misses are not labelled by provider type: the metrics must not tell a real path from a fake.
  const miss = () => {
    deps.metrics.deliveries.inc({ provider_type: "unknown", outcome: "miss" });
    return sendMiss(reply);
  };
  // Every push payload is JSON or a form carrying JSON, in UTF-8: anything else is a miss, found
  // cheaply and the same way on every path, before any lookup or hashing.
  if (!plausiblePayload(body, header(req.headers, "content-type"))) return miss();
  const provider = deps.catalog.snapshot().providerByHookPath(`/hook/${req.params.id}`);
  const providerType = provider?.type ?? "unknown";
  const verified =
    provider?.secret !== undefined
      ? await verifyDelivery({
          type: provider.type,
          secret: provider.secret,
          allowSha1: provider.allowSha1,
          body,
          headers: req.headers,
        })
      : await verifyUnknown(body, req.headers);
  if (!verified || !provider) return miss();

  const event = deliveryEvent(provider.type, req.headers);
  // The provider on every line, as a child logger's binding would put it (first, the same bytes),
  // without building a child per delivery.
  const who = `${provider.namespace}/${provider.name}`;
  const ignored = (code: number, status: string, detail?: string) => {
    deps.metrics.deliveries.inc({ provider_type: providerType, outcome: "ignored" });
    deps.log.debug({ provider: who, status, detail, event }, "delivery ignored");
    return reply.code(code).send(detail ? { status, detail } : { status });
  };
  // A verified ping (sent when a hook is created) or any other event is the provider's own host
  // talking: a 404 would show there as a failed delivery, so it is answered 200 and ignored.
  if (event !== "push") return ignored(200, "ignored", "not a push event");

  const payload = parsePayload(body, req.headers["content-type"]);
  const reading = readPush(payload);
  if (reading.kind === "invalid") {
    deps.metrics.deliveries.inc({ provider_type: providerType, outcome: "ignored" });
    return reply.code(400).send({ error: `unreadable push: ${reading.reason}` });
  }
  if (reading.kind === "other-ref") return ignored(200, "ignored", `${reading.ref} is not a branch`);
  if (!reading.repository.includes(provider.repository)) {
    return ignored(202, "ignored", "repository is not this provider's");
  }
  const targets = deps.catalog.snapshot().targetsWriting(provider, reading.branch);
  if (targets.length === 0) return ignored(202, "ignored", `no GitTarget writes branch ${reading.branch}`);

  const notice: PushNotice = {
    type: "push",
    provider: { namespace: provider.namespace, name: provider.name },
    deliveryId: deliveryIdOf(req.headers) ?? `body-${createHash("sha256").update(body).digest("hex")}`,
    repository: reading.repository,
    branch: reading.branch,
    before: reading.before,
    after: reading.after,
    deleted: reading.deleted,
    forced: reading.forced,
    receivedAt: deps.now().toISOString(),
    branchKeys: [...new Set(targets.map((t) => t.branchKey!))],
  };
  const started = performance.now();
  try {
    const { jobId } = await withTimeout(
      enqueueNotice(deps.notices, notice).then(async (queued) => {
        await deps.replicated?.();
        return queued;
      }),
      deps.redisTimeoutMs,
      "enqueue",
    );
    deps.metrics.enqueueSeconds.observe({ kind: "push" }, (performance.now() - started) / 1000);
    deps.metrics.deliveries.inc({ provider_type: providerType, outcome: "accepted" });
    deps.log.info(
      {
        provider: who,
        branch: notice.branchKeys[0],
        commit: notice.after,
        deliveryId: notice.deliveryId,
        jobId,
      },
      "push notice queued",
    );
    return reply.code(202).send({ status: "queued", id: jobId });
  } catch (err) {
    deps.log.warn(
      { provider: who, err: errorMessage(err), deliveryId: notice.deliveryId },
      "push notice not queued",
    );
    return sendUnavailable(reply);
  }
}

const FORM = "application/x-www-form-urlencoded";

/**
 * Could this body be a push payload? Valid UTF-8, and a JSON object (first non-blank byte `{`) or
 * a form starting with its `payload` field. Cost: one native scan of the bytes.
 */
export function plausiblePayload(body: Buffer, contentType: string | undefined): boolean {
  if (body.length === 0 || !isUtf8(body)) return false;
  if (contentType?.toLowerCase().startsWith(FORM))
    return body.subarray(0, 8).toString("latin1") === "payload=";
  for (const byte of body) {
    if (byte === 0x20 || byte === 0x0a || byte === 0x0d || byte === 0x09) continue;
    return byte === 0x7b; // {
  }
  return false;
}
