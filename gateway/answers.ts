/** Fixed answers the gateway gives, so identical situations produce identical bytes. */
import type { FastifyReply } from "fastify";

/** Every webhook miss, and every unknown route, answers exactly this. */
export const MISS_STATUS = 404;
export const MISS_BODY = '{"error":"not found"}';

export function sendMiss(reply: FastifyReply): FastifyReply {
  return reply.code(MISS_STATUS).type("application/json; charset=utf-8").send(MISS_BODY);
}

/** Seconds a client is told to wait when Redis does not answer. */
export const UNAVAILABLE_RETRY_AFTER_SECONDS = 5;

export function sendUnavailable(reply: FastifyReply, what = "queue unavailable"): FastifyReply {
  return reply
    .code(503)
    .header("retry-after", String(UNAVAILABLE_RETRY_AFTER_SECONDS))
    .send({ error: `${what}; retry later` });
}

/** Rejects after `ms` unless the promise settles first; Redis calls must not hang a request. */
export function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout;
  return Promise.race([
    promise,
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${what} took longer than ${ms} ms`)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}
