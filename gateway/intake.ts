/**
 * The intake API for API-side tools: `POST /v1/targets/{namespace}/{name}/writes` and
 * `.../refusals`. Authenticated per GitTarget by a bearer token or an HMAC of the body (keys from
 * the target's intake Secret), validated with the contract's zod schemas, acknowledged only once
 * Redis holds the write or notice.
 */
import { createHash, randomUUID } from "node:crypto";
import type { Queue } from "bullmq";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { Redis } from "ioredis";
import type { ZodError, ZodType, ZodTypeDef } from "zod";
import { type AcceptedWrite, RefusalNotice, RefusalRequest, WriteRequest } from "../queue/contract.js";
import { StatusReason } from "../queue/crds/reasons.js";
import { errorMessage } from "../queue/errors.js";
import { acceptWrite, enqueueNotice } from "../queue/intake.js";
import type { Logger } from "../queue/log.js";
import { podSecurityRefusal } from "../queue/pod-security.js";
import { checkChanges, checkScope } from "../queue/scope.js";
import { objectRefProblem, writeProblem } from "../queue/write-check.js";
import { sendUnavailable, withTimeout } from "./answers.js";
import type { Catalog, TargetEntry } from "./catalog.js";
import type { GatewayMetrics, IntakeOutcome } from "./metrics.js";
import type { PublicationWaiter } from "./publications.js";
import { header, prefixedHmacMatches, stringsEqual } from "./verify.js";

export interface IntakeDeps {
  catalog: Catalog;
  redis: Redis;
  prefix: string;
  notices: Queue;
  branches: Queue;
  publications: PublicationWaiter;
  metrics: GatewayMetrics;
  log: Logger;
  redisTimeoutMs: number;
  /** Resolves once replicas hold what this gateway just enqueued (`--redis-wait-replicas`); unset: no wait. */
  replicated?: () => Promise<void>;
  /** Longest `wait=published` may hold a request; also its default. */
  maxWaitMs: number;
  now: () => Date;
}

type TargetParams = { namespace: string; name: string };
type Req = FastifyRequest<{ Params: TargetParams; Querystring: Record<string, string | undefined> }>;

export function intakeRoutes(deps: IntakeDeps) {
  return async function intake(app: FastifyInstance): Promise<void> {
    // Raw bytes: an HMAC-authenticated call is signed over the body as sent.
    app.removeAllContentTypeParsers();
    app.addContentTypeParser("*", { parseAs: "buffer" }, (_req, body, done) => done(null, body));
    app.post("/v1/targets/:namespace/:name/writes", (req: Req, reply) => writes(deps, req, reply));
    app.post("/v1/targets/:namespace/:name/refusals", (req: Req, reply) => refusals(deps, req, reply));
  };
}

/** Names the first bad field: `changes.0.object.kind: Required`. */
export function describeZodError(err: ZodError): string {
  const issue = err.issues[0];
  if (!issue) return "invalid request";
  return `${issue.path.length ? issue.path.join(".") : "body"}: ${issue.message}`;
}

/** Is the caller allowed to write to this target? Bearer token or `X-Signature: sha256=<hex>`. */
export function authorized(target: TargetEntry | undefined, body: Buffer, headers: Req["headers"]): boolean {
  const auth = header(headers, "authorization");
  const bearer = auth?.toLowerCase().startsWith("bearer ") ? auth.slice(7).trim() : undefined;
  const signature = header(headers, "x-signature");
  if (bearer !== undefined) {
    const ok = stringsEqual(bearer, target?.intakeToken ?? "\u0000no-token");
    return ok && target?.intakeToken !== undefined;
  }
  if (signature !== undefined) {
    const ok = prefixedHmacMatches(target?.intakeHmacKey ?? "\u0000no-key", body, signature, ["sha256"]);
    return ok && target?.intakeHmacKey !== undefined;
  }
  return false;
}

type Prepared<T> =
  | { ok: true; target: TargetEntry & { branchKey: string }; request: T }
  | { ok: false; reply: FastifyReply };

/** Authenticates the caller, finds the target ready, and parses the body with `schema`; else the answer. */
function prepare<T>(
  deps: IntakeDeps,
  kind: string,
  schema: ZodType<T, ZodTypeDef, unknown>,
  req: Req,
  reply: FastifyReply,
): Prepared<T> {
  const count = (outcome: IntakeOutcome) => deps.metrics.intake.inc({ kind, outcome });
  const body = Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0);
  const target = deps.catalog.snapshot().target(req.params.namespace, req.params.name);
  if (!authorized(target, body, req.headers) || !target) {
    count("unauthorized");
    return {
      ok: false,
      reply: reply
        .code(401)
        .header("www-authenticate", 'Bearer realm="applygate"')
        .send({ error: "unauthorized" }),
    };
  }
  if (!target.branchKey) {
    count("unavailable");
    return { ok: false, reply: reply.code(409).send({ error: `target not ready: ${target.problem}` }) };
  }
  let json: unknown;
  try {
    json = JSON.parse(body.toString("utf8"));
  } catch {
    count("invalid");
    return { ok: false, reply: reply.code(400).send({ error: "body: not valid JSON" }) };
  }
  const parsed = schema.safeParse(json);
  if (!parsed.success) {
    count("invalid");
    return { ok: false, reply: reply.code(400).send({ error: describeZodError(parsed.error) }) };
  }
  return { ok: true, target: target as TargetEntry & { branchKey: string }, request: parsed.data };
}

async function writes(deps: IntakeDeps, req: Req, reply: FastifyReply): Promise<FastifyReply> {
  const count = (outcome: IntakeOutcome) => deps.metrics.intake.inc({ kind: "write", outcome });
  const p = prepare(deps, "write", WriteRequest, req, reply);
  if (!p.ok) return p.reply;
  const wait = req.query.wait;
  if (wait !== undefined && wait !== "published") {
    count("invalid");
    return reply.code(400).send({ error: 'wait: expected "published"' });
  }
  let waitMs = deps.maxWaitMs;
  if (req.query.timeout !== undefined) {
    const seconds = Number(req.query.timeout);
    if (!Number.isFinite(seconds) || seconds <= 0) {
      count("invalid");
      return reply.code(400).send({ error: "timeout: expected a positive number of seconds" });
    }
    waitMs = Math.min(deps.maxWaitMs, seconds * 1000);
  }
  const { target } = p;
  const refused = (reason: string) =>
    deps.metrics.refusedWrites.inc({ target: `${target.namespace}/${target.name}`, reason });
  // Whatever the worker could not store is refused here, so no accepted write can block a branch.
  const problem = writeProblem(p.request.changes);
  if (problem) {
    count("unstorable");
    refused(StatusReason.Unstorable);
    return reply.code(422).send({ error: `${problem.field}: ${problem.message}`, field: problem.field });
  }
  const scoped = checkChanges(target.scope, p.request.changes);
  if (!scoped.ok) {
    count("forbidden");
    refused(scoped.reason);
    deps.log.info(
      { target: `${target.namespace}/${target.name}`, object: scoped.object, rule: scoped.reason },
      "write refused: outside the GitTarget's scope",
    );
    return reply.code(403).send({
      error: scoped.message,
      field: `changes.${scoped.index}`,
      object: scoped.object,
      rule: scoped.reason,
    });
  }
  // Pod templates are held to their namespace's Pod Security level (at the door only: the
  // watch plane's writes are objects the API server admitted).
  const snapshot = deps.catalog.snapshot();
  const unsafe = podSecurityRefusal(
    p.request.changes,
    (ns) => snapshot.podSecurityLevel(ns),
    target.namespace,
  );
  if (unsafe) {
    count("forbidden");
    refused(StatusReason.PodSecurity);
    deps.log.info(
      { target: `${target.namespace}/${target.name}`, object: unsafe.object, rule: StatusReason.PodSecurity },
      "write refused: beyond its namespace's Pod Security level",
    );
    return reply.code(403).send({
      error: unsafe.message,
      field: `changes.${unsafe.index}`,
      object: unsafe.object,
      rule: StatusReason.PodSecurity,
    });
  }
  const write: AcceptedWrite = {
    ...p.request,
    id: `w-${randomUUID()}`,
    target: { namespace: target.namespace, name: target.name, ...(target.uid ? { uid: target.uid } : {}) },
    branchKey: target.branchKey,
    path: target.path,
    acceptedAt: deps.now().toISOString(),
  };
  const log = deps.log.child({ branch: target.branchKey, target: `${target.namespace}/${target.name}` });
  let encoded: string;
  try {
    encoded = JSON.stringify(write);
  } catch (err) {
    // Not Redis's fault: the body is at fault, and 503 is for Redis alone.
    count("invalid");
    return reply.code(400).send({ error: `body: cannot be serialized: ${errorMessage(err)}` });
  }
  const started = performance.now();
  let result: Awaited<ReturnType<typeof acceptWrite>>;
  try {
    // Subscribe before accepting, so the publication cannot slip past between the two.
    if (wait) await withTimeout(deps.publications.ready(), deps.redisTimeoutMs, "subscribe");
    result = await withTimeout(
      acceptWrite(
        deps.redis,
        deps.prefix,
        write,
        deps.branches,
        (err) =>
          log.warn(
            { err: errorMessage(err), writeId: write.id },
            "branch signal failed; the write waits for the owner's sweep",
          ),
        encoded,
      ).then(async (r) => {
        if (r.accepted) await deps.replicated?.();
        return r;
      }),
      deps.redisTimeoutMs,
      "accept write",
    );
  } catch (err) {
    count("unavailable");
    log.warn({ err: errorMessage(err) }, "write not accepted: Redis unavailable");
    return sendUnavailable(reply);
  }
  deps.metrics.enqueueSeconds.observe({ kind: "write" }, (performance.now() - started) / 1000);
  if (!result.accepted) {
    count("paused");
    return reply
      .code(429)
      .header("retry-after", String(result.retryAfterSeconds))
      .send({ error: "intake paused for this branch until retained writes are published" });
  }
  count("accepted");
  log.info({ writeId: write.id, changes: write.changes.length, save: write.save === true }, "write accepted");
  const answer = { id: write.id, branchKey: target.branchKey };
  if (!wait) return reply.code(202).send(answer);
  const settled = await deps.publications.wait(write.id, waitMs);
  if (settled && "commit" in settled && settled.commit)
    return reply.code(200).send({ ...answer, published: true, commit: settled.commit });
  // The worker refused it (it can never publish): say so now rather than after the bound.
  if (settled && "refused" in settled)
    return reply.code(422).send({ ...answer, published: false, refused: settled.refused });
  return reply.code(202).send({ ...answer, published: false });
}

async function refusals(deps: IntakeDeps, req: Req, reply: FastifyReply): Promise<FastifyReply> {
  const count = (outcome: IntakeOutcome) => deps.metrics.intake.inc({ kind: "refusal", outcome });
  const p = prepare(deps, "refusal", RefusalRequest, req, reply);
  if (!p.ok) return p.reply;
  const { target } = p;
  // A refusal names an object as a write does: it must be one the GitTarget may hold.
  const problem = objectRefProblem(p.request.object, "object");
  if (problem) {
    count("unstorable");
    return reply.code(422).send({ error: `${problem.field}: ${problem.message}`, field: problem.field });
  }
  const scoped = checkScope(target.scope, p.request.object);
  if (!scoped.ok) {
    count("forbidden");
    deps.log.info(
      { target: `${target.namespace}/${target.name}`, object: scoped.object, rule: scoped.reason },
      "refusal notice refused: outside the GitTarget's scope",
    );
    return reply
      .code(403)
      .send({ error: scoped.message, field: "object", object: scoped.object, rule: scoped.reason });
  }
  // A client retrying with the same Idempotency-Key gets the same notice id, hence one job.
  const key = header(req.headers, "idempotency-key");
  const id = key
    ? `refusal-${createHash("sha256").update(`${target.namespace}/${target.name}\n${key}`).digest("hex")}`
    : `refusal-${randomUUID()}`;
  const notice = RefusalNotice.parse({
    ...p.request,
    type: "refusal",
    id,
    target: { namespace: target.namespace, name: target.name, ...(target.uid ? { uid: target.uid } : {}) },
    branchKey: target.branchKey,
    receivedAt: deps.now().toISOString(),
  });
  const started = performance.now();
  try {
    await withTimeout(
      enqueueNotice(deps.notices, notice).then(() => deps.replicated?.()),
      deps.redisTimeoutMs,
      "enqueue",
    );
  } catch (err) {
    count("unavailable");
    deps.log.warn({ err: errorMessage(err), branch: target.branchKey }, "refusal not queued");
    return sendUnavailable(reply);
  }
  deps.metrics.enqueueSeconds.observe({ kind: "refusal" }, (performance.now() - started) / 1000);
  count("accepted");
  return reply.code(202).send({ id, branchKey: target.branchKey });
}
