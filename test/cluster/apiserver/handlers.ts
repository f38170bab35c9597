/** HTTP routing: discovery, the REST verbs, auth, faults, Status bodies for errors. */
import type { IncomingMessage, ServerResponse } from "node:http";
import { errorMessage } from "../../../queue/errors.js";
import type { AuditLog, AuditRecord } from "./audit.js";
import type { User, Users } from "./auth.js";
import { ApiError, errors } from "./errors.js";
import { type Faults, reasonFor } from "./faults.js";
import type { Objects, PatchKind, Target, WriteOptions } from "./objects.js";
import { openApiGroupVersion, openApiRoot } from "./openapi.js";
import { decodeProtobuf, isProtobuf } from "./protobuf.js";
import { decide, type Policy } from "./rbac.js";
import { type Registry, storageKeyOf } from "./registry.js";
import { fieldSelector, labelSelector } from "./selectors.js";
import type { Store } from "./store.js";
import { toTable, wantsTable } from "./table.js";
import { apiVersionOf, type KObject } from "./types.js";
import { serveWatch } from "./watch.js";

export interface Context {
  store: Store;
  registry: Registry;
  objects: Objects;
  users: Users;
  faults: Faults;
  anonymous: User | undefined;
  bookmarkIntervalMs: number;
  now: () => number;
  gitVersion: string;
  /** The stored Roles, ClusterRoles and bindings, for users authorised by RBAC. */
  policy: () => Policy;
  /** Requests answered so far, by authenticated user (a watch counts once, when it starts). */
  requests: Map<string, number>;
  /** Users whose requests are also written down, as `METHOD path` (a watch as `WATCH path`). */
  traces: Map<string, string[]>;
  audit?: AuditLog;
}

const patchKinds: Record<string, PatchKind> = {
  "application/merge-patch+json": "merge",
  "application/json-patch+json": "json",
  "application/strategic-merge-patch+json": "strategic",
  "application/apply-patch+yaml": "apply",
  "application/apply-patch+cbor": "apply",
};

function sendJson(res: ServerResponse, code: number, body: unknown, warnings: string[] = []): void {
  const headers: Record<string, string | string[]> = {
    "Content-Type": "application/json",
    "Cache-Control": "no-cache, private",
  };
  if (warnings.length) headers.Warning = warnings.map((w) => `299 - ${JSON.stringify(w)}`);
  res.writeHead(code, headers);
  res.end(JSON.stringify(body));
}

function readBytes(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => resolve(Buffer.concat(chunks)));
    req.on("error", reject);
  });
}

const readBody = async (req: IncomingMessage) => (await readBytes(req)).toString("utf8");

/** A request's object: JSON, or the protobuf kubectl's typed clients send for built-in kinds. */
async function readObject(req: IncomingMessage): Promise<unknown> {
  const raw = await readBytes(req);
  if (raw.length === 0) return undefined;
  if (isProtobuf(req.headers["content-type"])) return decodeProtobuf(raw);
  return parseJson(raw.toString("utf8"));
}

interface Route extends Target {
  group: string;
  version: string;
  plural: string;
}

/** /api/v1/… or /apis/<g>/<v>/… → group, version and the rest. */
function splitPath(path: string): { group: string; version: string; rest: string[] } | undefined {
  const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
  if (parts[0] === "api" && parts[1]) return { group: "", version: parts[1], rest: parts.slice(2) };
  if (parts[0] === "apis" && parts[1] && parts[2])
    return { group: parts[1], version: parts[2], rest: parts.slice(3) };
  return undefined;
}

function route(registry: Registry, path: string): Route | undefined {
  const s = splitPath(path);
  if (!s || s.rest.length === 0) return undefined;
  const { group, version, rest } = s;
  let namespace: string | undefined;
  let parts = rest;
  if (rest[0] === "namespaces" && rest.length >= 3) {
    const candidate = registry.find(group, version, rest[2]!);
    if (candidate?.namespaced) {
      namespace = rest[1];
      parts = rest.slice(2);
    }
  }
  const type = registry.find(group, version, parts[0]!);
  if (!type) return undefined;
  if (type.namespaced && namespace === undefined && parts.length > 1) return undefined;
  return { type, group, version, plural: type.plural, namespace, name: parts[1], subresource: parts[2] };
}

function verbOf(method: string, r: Route, watch: boolean): string {
  switch (method) {
    case "GET":
      return r.name ? "get" : watch ? "watch" : "list";
    case "POST":
      return "create";
    case "PUT":
      return "update";
    case "PATCH":
      return "patch";
    case "DELETE":
      return r.name ? "delete" : "deletecollection";
    default:
      return method.toLowerCase();
  }
}

function discovery(ctx: Context, path: string): unknown {
  const clean = path.replace(/\/+$/, "") || "/";
  if (clean === "/version")
    return {
      major: "1",
      minor: "32",
      gitVersion: ctx.gitVersion,
      gitCommit: "0000000000000000000000000000000000000000",
      gitTreeState: "clean",
      buildDate: "2025-01-01T00:00:00Z",
      goVersion: "go1.23.0",
      compiler: "gc",
      platform: "linux/amd64",
    };
  if (clean === "/api") return ctx.registry.apiVersions();
  if (clean === "/apis") return ctx.registry.apiGroupList();
  if (clean === "/openapi/v3") return openApiRoot(ctx.registry);
  if (clean.startsWith("/openapi/v3/"))
    return openApiGroupVersion(ctx.registry, clean.slice("/openapi/v3/".length));
  if (clean === "/healthz" || clean === "/readyz" || clean === "/livez") return "ok";
  const parts = clean.split("/").filter(Boolean);
  if (parts[0] === "api" && parts.length === 2) return ctx.registry.resourceList("", parts[1]!);
  if (parts[0] === "apis" && parts.length === 2) return ctx.registry.apiGroup(parts[1]!);
  if (parts[0] === "apis" && parts.length === 3) return ctx.registry.resourceList(parts[1]!, parts[2]!);
  return undefined;
}

/**
 * kubectl (client-go) sends no credentials to a plain-http server, so kubeconfigs written for it
 * carry the token in the server URL instead: http://host:port/token/<token>/… .
 */
function tokenFromPath(url: URL): string | undefined {
  const m = /^\/token\/([^/]+)(\/.*)?$/.exec(url.pathname);
  if (!m) return undefined;
  url.pathname = m[2] ?? "/";
  return decodeURIComponent(m[1]!);
}

/** `GET path`, `WATCH path`, `PATCH(apply) path`: one request as a trace writes it. */
function traceLine(method: string, url: URL, contentType: string | undefined): string {
  const w = url.searchParams.get("watch");
  const verb = method === "GET" && (w === "true" || w === "1") ? "WATCH" : method;
  const patch = method === "PATCH" ? patchKinds[(contentType ?? "").split(";")[0]!.trim()] : undefined;
  return `${verb}${patch ? `(${patch})` : ""} ${url.pathname}`;
}

export async function handle(ctx: Context, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const url = new URL(req.url ?? "/", "http://localhost");
  const method = req.method ?? "GET";
  const pathToken = tokenFromPath(url);
  const audit = ctx.audit?.begin(req, `${url.pathname}${url.search}`);
  let watching = false;
  try {
    const latency = ctx.faults.latencyFor(method, url.pathname);
    if (latency > 0) await new Promise((r) => setTimeout(r, latency));
    const user = ctx.users.fromAuthorization(
      pathToken ? `Bearer ${pathToken}` : req.headers.authorization,
      ctx.anonymous,
    );
    if (!user) throw errors.unauthorized();
    audit?.authenticated(user);
    ctx.requests.set(user.name, (ctx.requests.get(user.name) ?? 0) + 1);
    ctx.traces.get(user.name)?.push(traceLine(method, url, req.headers["content-type"]));
    const fail = ctx.faults.take(method, url.pathname);
    if (fail) {
      const reason = fail.reason ?? reasonFor(fail.status);
      throw new ApiError(fail.status, reason, fail.message ?? `injected failure (${reason})`);
    }
    if (method === "GET") {
      const doc = discovery(ctx, url.pathname);
      if (doc !== undefined) {
        const decision = decide(user, { verb: "get", path: url.pathname }, ctx.policy);
        audit?.authorized("get", decision);
        if (!decision.allowed) throw errors.forbiddenPath(user.name, url.pathname);
        if (typeof doc === "string") {
          res.writeHead(200, { "Content-Type": "text/plain" });
          res.end(doc);
        } else sendJson(res, 200, doc);
        return;
      }
    }
    const r = route(ctx.registry, url.pathname);
    if (!r) throw new ApiError(404, "NotFound", "the server could not find the requested resource");
    const q = url.searchParams;
    const watch = q.get("watch") === "true" || q.get("watch") === "1";
    const verb = verbOf(method, r, watch);
    const access = { group: r.group, resource: r.plural, subresource: r.subresource, namespace: r.namespace };
    const decision = decide(user, { verb, ...access, name: r.name }, ctx.policy);
    const { group: apiGroup, ...ref } = access; // an audit objectRef names the group apiGroup
    audit?.authorized(verb, decision, { ...ref, apiGroup, apiVersion: r.version, name: r.name });
    watching = verb === "watch";
    if (!decision.allowed)
      throw errors.forbidden(
        user.name,
        verb,
        { group: r.group, plural: r.plural, name: r.name },
        r.namespace,
      );
    await dispatch(ctx, req, res, r, verb, url, user, audit);
  } catch (e) {
    if (res.headersSent) {
      res.destroy();
      audit?.end(res.statusCode, false);
      return;
    }
    const err = e instanceof ApiError ? e : errors.internal(errorMessage(e));
    sendJson(res, err.code, err.toStatus());
    audit?.end(err.code, false, { reason: err.reason });
    return;
  }
  audit?.end(res.statusCode, watching && !res.writableEnded);
}

async function dispatch(
  ctx: Context,
  req: IncomingMessage,
  res: ServerResponse,
  r: Route,
  verb: string,
  url: URL,
  user: User,
  audit: AuditRecord | undefined,
): Promise<void> {
  const q = url.searchParams;
  const accept = req.headers.accept;
  const table = wantsTable(accept);
  const include = q.get("includeObject");
  const render = (o: KObject) =>
    table ? toTable(r.type, [o], { resourceVersion: o.metadata.resourceVersion }, include, ctx.now()) : o;
  const opts: WriteOptions = {
    fieldManager: q.get("fieldManager") ?? undefined,
    fieldValidation: q.get("fieldValidation") ?? undefined,
    dryRun: q.getAll("dryRun").includes("All"),
    force: q.get("force") === "true",
    userAgent: req.headers["user-agent"],
    user,
  };
  switch (verb) {
    case "get":
      if (r.subresource === "scale") {
        sendJson(res, 200, ctx.objects.getScale(r));
        return;
      }
      if (r.subresource && !(r.subresource === "status" && r.type.statusSubresource))
        throw errors.notFound({ ...r.type, name: `${r.name}/${r.subresource}` });
      sendJson(res, 200, render(ctx.objects.get(r)));
      return;
    case "list":
    case "watch": {
      const labels = labelSelector(q.get("labelSelector"));
      const fields = fieldSelector(q.get("fieldSelector"), r.type.fieldLabels);
      const matches = (o: KObject) => labels(o) && fields(o);
      if (verb === "watch") {
        serveWatch(res, ctx.store, ctx.faults, {
          type: r.type,
          typeKey: storageKeyOf(r.type),
          namespace: r.namespace,
          matches,
          resourceVersion: q.get("resourceVersion") ?? undefined,
          bookmarks: q.get("allowWatchBookmarks") === "true",
          bookmarkIntervalMs: ctx.bookmarkIntervalMs,
          timeoutSeconds: q.get("timeoutSeconds") ? Number(q.get("timeoutSeconds")) : undefined,
          path: url.pathname,
          render,
        });
        return;
      }
      sendJson(res, 200, list(ctx, r, matches, q, table, include));
      return;
    }
    case "create": {
      const body = await readObject(req);
      audit?.requestObject(body);
      const out = ctx.objects.create(r, body, opts);
      sendJson(res, 201, out.object, out.warnings);
      return;
    }
    case "update": {
      const body = await readObject(req);
      audit?.requestObject(body);
      const out = ctx.objects.update(r, body, opts);
      sendJson(res, 200, out.object, out.warnings);
      return;
    }
    case "patch": {
      const contentType = (req.headers["content-type"] ?? "").split(";")[0]!.trim();
      const kind = patchKinds[contentType];
      if (!kind) throw errors.unsupportedMediaType(contentType);
      const out = ctx.objects.patch(r, kind, await readBody(req), opts);
      sendJson(res, out.created ? 201 : 200, out.object, out.warnings);
      return;
    }
    case "delete": {
      const out = ctx.objects.delete(r, (await readObject(req)) ?? {}, {
        ...opts,
        propagationPolicy: q.get("propagationPolicy") ?? undefined,
      });
      sendJson(res, 200, out.response ?? out.object);
      return;
    }
    case "deletecollection": {
      const labels = labelSelector(q.get("labelSelector"));
      const fields = fieldSelector(q.get("fieldSelector"), r.type.fieldLabels);
      const body = (await readObject(req)) ?? {};
      const items = ctx.objects.list(r.type, r.namespace).filter((o) => labels(o) && fields(o));
      const deleted = items.map(
        (o) =>
          ctx.objects.delete({ ...r, namespace: o.metadata.namespace, name: o.metadata.name }, body, opts)
            .object,
      );
      sendJson(res, 200, {
        kind: r.type.listKind,
        apiVersion: apiVersionOf(r.type),
        metadata: { resourceVersion: String(ctx.store.currentRv()) },
        items: deleted,
      });
      return;
    }
    default:
      throw errors.methodNotAllowed(`the server does not allow this method on the requested resource`);
  }
}

function parseJson(raw: string): unknown {
  try {
    return JSON.parse(raw);
  } catch (e) {
    throw errors.badRequest(`error decoding request body: ${errorMessage(e)}`);
  }
}

function list(
  ctx: Context,
  r: Route,
  matches: (o: KObject) => boolean,
  q: URLSearchParams,
  table: boolean,
  include: string | null,
) {
  const all = ctx.objects.list(r.type, r.namespace).filter(matches);
  const rv = String(ctx.store.currentRv());
  let start = 0;
  const cont = q.get("continue");
  if (cont) {
    try {
      const token = JSON.parse(Buffer.from(cont, "base64url").toString("utf8")) as { after: string };
      start = all.findIndex((o) => `${o.metadata.namespace ?? ""}/${o.metadata.name}` > token.after);
      if (start < 0) start = all.length;
    } catch {
      throw errors.badRequest("invalid continue token");
    }
  }
  const limit = Number(q.get("limit") ?? "0");
  const page = limit > 0 ? all.slice(start, start + limit) : all.slice(start);
  const metadata: Record<string, unknown> = { resourceVersion: rv };
  const remaining = all.length - start - page.length;
  if (limit > 0 && remaining > 0) {
    const last = page[page.length - 1]!;
    metadata.continue = Buffer.from(
      JSON.stringify({ after: `${last.metadata.namespace ?? ""}/${last.metadata.name}` }),
    ).toString("base64url");
    metadata.remainingItemCount = remaining;
  }
  if (table) return toTable(r.type, page, metadata, include, ctx.now());
  return { kind: r.type.listKind, apiVersion: apiVersionOf(r.type), metadata, items: page };
}
