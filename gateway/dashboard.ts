/**
 * bull-board at `/queues` over every applygate queue, inside its own fastify scope guarded by
 * basic auth or a bearer token. bull-board has no authentication of its own. Read-only unless the
 * operator asks otherwise (`--dashboard-writable`): a writable board adds jobs to any queue,
 * apply attempts included (docs/security.md). Never framed by another page: every answer says so
 * (`X-Frame-Options: DENY`, CSP `frame-ancestors 'none'`), so a page elsewhere cannot overlay the
 * board's buttons for a signed-in operator to click. Its page loads nothing from another host:
 * bull-board's HTML names a web font on a public CDN, which the CSP refuses (the browser falls
 * back to a local font), so opening the board tells no third party who looks at which queues and
 * works where the cluster has no way out.
 */
import { createBullBoard } from "@bull-board/api";
import { BullMQAdapter } from "@bull-board/api/bullMQAdapter";
import { FastifyAdapter } from "@bull-board/fastify";
import type { Queue } from "bullmq";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { header, stringsEqual } from "./verify.js";

export const DASHBOARD_PATH = "/queues";

export type DashboardAuth =
  | { basic: { user: string; password: string }; bearer?: string }
  | { bearer: string; basic?: undefined }
  | "insecure";

export interface DashboardOptions {
  queues: Queue[];
  auth: DashboardAuth;
  /** Only shows the queues (bull-board answers every change 405). */
  readOnly: boolean;
}

/**
 * The Content-Security-Policy of every dashboard answer: everything from the gateway itself (the
 * board's inline style attributes included), nothing from anywhere else, framed by no page.
 */
export const DASHBOARD_CSP = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data:",
  "font-src 'self' data:",
  "connect-src 'self'",
  "object-src 'none'",
  "base-uri 'self'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join("; ");

/** The headers every dashboard answer carries, a refusal included: no page may frame it. */
export const DASHBOARD_FRAME_HEADERS = {
  "x-frame-options": "DENY",
  "content-security-policy": DASHBOARD_CSP,
} as const;

/** True when the request carries the dashboard's credentials. */
export function dashboardAllows(auth: DashboardAuth, authorization: string | undefined): boolean {
  if (auth === "insecure") return true;
  if (!authorization) return false;
  const space = authorization.indexOf(" ");
  const scheme = authorization.slice(0, space).toLowerCase();
  const value = authorization.slice(space + 1).trim();
  if (scheme === "bearer" && auth.bearer !== undefined) return stringsEqual(value, auth.bearer);
  if (scheme === "basic" && auth.basic) {
    const decoded = Buffer.from(value, "base64").toString("utf8");
    const colon = decoded.indexOf(":");
    if (colon < 0) return false;
    const userOk = stringsEqual(decoded.slice(0, colon), auth.basic.user);
    const passOk = stringsEqual(decoded.slice(colon + 1), auth.basic.password);
    return userOk && passOk;
  }
  return false;
}

export function dashboardRoutes(opts: DashboardOptions) {
  return async function dashboard(app: FastifyInstance): Promise<void> {
    app.addHook("onRequest", async (req: FastifyRequest, reply: FastifyReply) => {
      reply.headers(DASHBOARD_FRAME_HEADERS);
      if (dashboardAllows(opts.auth, header(req.headers, "authorization"))) return;
      const challenge =
        opts.auth !== "insecure" && opts.auth.basic ? 'Basic realm="queues"' : 'Bearer realm="queues"';
      return reply.code(401).header("www-authenticate", challenge).send({ error: "unauthorized" });
    });
    const adapter = new FastifyAdapter();
    adapter.setBasePath(DASHBOARD_PATH);
    createBullBoard({
      // An apply attempt is never retried by hand, even on a writable board: every retry is the
      // branch worker's decision (the sidecar refuses an attempt's job run twice all the same).
      queues: opts.queues.map(
        (q) =>
          new BullMQAdapter(q, {
            readOnlyMode: opts.readOnly,
            allowRetries: !opts.readOnly && !q.name.startsWith("attempts-"),
          }),
      ),
      serverAdapter: adapter,
      options: { uiConfig: { boardTitle: "applygate queues" } },
    });
    await app.register(adapter.registerPlugin(), { prefix: DASHBOARD_PATH });
  };
}
