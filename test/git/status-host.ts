/**
 * A Git host's commit status API on a real local HTTP port, in the shapes GitHub and Gitea use:
 * `GET <root>/repos/{owner}/{repo}/commits/{ref}/status` answers the combined status (the latest
 * status per context, newest first; GitHub names the state `state`, Gitea `status`), and
 * `POST <root>/repos/{owner}/{repo}/statuses/{sha}` creates one. A request in another shape, or
 * without the token in the host's own Authorization form, is answered as the host would (401,
 * 404, 422) and counted as a bad request, so a test can assert none was made.
 */
import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";

export type HostApi = "github" | "gitea";

export interface PostedStatus {
  sha: string;
  state: string;
  context: string;
  description?: string;
  target_url?: string;
}

export interface StatusHost {
  /** API root: `http://127.0.0.1:<port>` (GitHub) or `http://127.0.0.1:<port>/api/v1` (Gitea). */
  root: string;
  /** Sets a status as CI would (newest first). */
  setStatus(sha: string, context: string, state: string): void;
  posted: PostedStatus[];
  requests: { method: string; path: string }[];
  badRequests: string[];
  close(): Promise<void>;
}

const SHA = /^[0-9a-f]{40}$/;

export async function startStatusHost(o: {
  api: HostApi;
  owner: string;
  repo: string;
  token: string;
}): Promise<StatusHost> {
  const prefix = o.api === "gitea" ? "/api/v1" : "";
  const statuses = new Map<string, PostedStatus[]>();
  const host: Omit<StatusHost, "root" | "close"> = {
    setStatus(sha, context, state) {
      statuses.set(sha, [{ sha, context, state }, ...(statuses.get(sha) ?? [])]);
    },
    posted: [],
    requests: [],
    badRequests: [],
  };
  const wantAuth = o.api === "github" ? `Bearer ${o.token}` : `token ${o.token}`;
  const repoPath = `${prefix}/repos/${o.owner}/${o.repo}`;
  const send = (res: import("node:http").ServerResponse, code: number, body: unknown) => {
    res.writeHead(code, { "content-type": "application/json" });
    res.end(JSON.stringify(body));
  };
  const bad = (res: import("node:http").ServerResponse, code: number, why: string) => {
    host.badRequests.push(why);
    send(res, code, { message: why });
  };
  const server: Server = createServer(async (req: IncomingMessage, res) => {
    const url = new URL(req.url ?? "/", "http://x");
    host.requests.push({ method: req.method ?? "", path: url.pathname });
    if (req.headers.authorization !== wantAuth)
      return bad(res, 401, `authorization ${req.headers.authorization}`);
    if (o.api === "github" && !String(req.headers.accept).includes("application/vnd.github+json"))
      return bad(res, 415, `accept ${req.headers.accept}`);
    if (!url.pathname.startsWith(`${repoPath}/`)) return bad(res, 404, `path ${url.pathname}`);
    const rest = url.pathname.slice(repoPath.length);
    const read = /^\/commits\/([^/]+)\/status$/.exec(rest);
    if (req.method === "GET" && read) {
      const sha = read[1] as string;
      if (!SHA.test(sha)) return bad(res, 404, `ref ${sha}`);
      const latest = new Map<string, PostedStatus>();
      for (const s of statuses.get(sha) ?? []) if (!latest.has(s.context)) latest.set(s.context, s);
      const list = [...latest.values()].map((s, i) =>
        o.api === "github"
          ? { id: i + 1, context: s.context, state: s.state, description: s.description ?? null }
          : { id: i + 1, context: s.context, status: s.state, description: s.description ?? "" },
      );
      return send(res, 200, {
        sha,
        state: list.length === 0 ? "pending" : "success",
        statuses: list,
        total_count: list.length,
      });
    }
    const post = /^\/statuses\/([^/]+)$/.exec(rest);
    if (req.method === "POST" && post) {
      const sha = post[1] as string;
      if (!SHA.test(sha)) return bad(res, 422, `sha ${sha}`);
      const chunks: Buffer[] = [];
      for await (const c of req) chunks.push(c as Buffer);
      let body: Record<string, unknown>;
      try {
        body = JSON.parse(Buffer.concat(chunks).toString("utf8"));
      } catch {
        return bad(res, 400, "body is not JSON");
      }
      const states = ["pending", "success", "failure", "error", ...(o.api === "gitea" ? ["warning"] : [])];
      if (typeof body.state !== "string" || !states.includes(body.state))
        return bad(res, 422, `state ${body.state}`);
      if (typeof body.context !== "string") return bad(res, 422, "context missing");
      const s: PostedStatus = {
        sha,
        state: body.state,
        context: body.context,
        ...(typeof body.description === "string" ? { description: body.description } : {}),
        ...(typeof body.target_url === "string" ? { target_url: body.target_url } : {}),
      };
      host.posted.push(s);
      statuses.set(sha, [s, ...(statuses.get(sha) ?? [])]);
      return send(res, 201, { id: host.posted.length, ...s });
    }
    return bad(res, 404, `${req.method} ${url.pathname}`);
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const port = (server.address() as AddressInfo).port;
  return {
    ...host,
    root: `http://127.0.0.1:${port}${prefix}`,
    close: () => new Promise<void>((r) => server.close(() => r())),
  } as StatusHost;
}
