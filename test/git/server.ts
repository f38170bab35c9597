/**
 * A real Git smart-HTTP server for tests and the playground: bare repositories served by the git
 * CLI's own `git http-backend` CGI behind a small node:http wrapper, on an ephemeral loopback
 * port. It counts requests by kind and injects faults, so tests can pin round trips and outages.
 */
import { spawn } from "node:child_process";
import { createHmac, randomUUID } from "node:crypto";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { Socket } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { gunzipSync } from "node:zlib";
import { git, gitOk } from "./cli.js";

/**
 * advertisement: a read of the refs, GET info/refs (either service) or a protocol v2 `ls-refs`
 * POST; fetch: any other POST git-upload-pack; push: POST git-receive-pack.
 */
export type RequestKind = "advertisement" | "fetch" | "push";
export type KindFilter = RequestKind | "any";

export interface GitServerOptions {
  /** Folder holding the bare repositories; a temporary one (removed on close) when omitted. */
  root?: string;
  /** Require HTTP basic auth with these credentials. */
  auth?: { username: string; password: string };
  host?: string;
  port?: number;
  /**
   * After every push that moved a branch, deliver a signed Gitea-style push webhook here, as a Git
   * host would (the playground points it at the gateway's receiver).
   */
  webhook?: { url: string; secret: string };
  /** Speak protocol v2 to clients asking for it (default true); false: answer v0 always, as an old host. */
  protocolV2?: boolean;
}

export interface PushHook {
  url: string;
  secret: string;
}

export interface RequestCounts {
  advertisement: number;
  fetch: number;
  push: number;
}

interface Fault {
  kind: KindFilter;
  remaining: number;
  apply: (req: IncomingMessage, res: ServerResponse, next: () => void) => void;
}

export interface GitServer {
  url: string;
  root: string;
  /** Clone URL of a repository, optionally with credentials embedded. */
  repoUrl(name: string, withAuth?: boolean): string;
  /** Creates a bare repository on branch `main`, optionally with an initial commit of the given files. */
  createRepo(name: string, files?: Record<string, string>, opts?: { branch?: string }): Promise<string>;
  /** Tip of a branch as the server holds it, or undefined. */
  tip(name: string, branch?: string): Promise<string | undefined>;
  counts(): RequestCounts;
  /**
   * The arguments of each protocol v2 `ls-refs` served since the last resetCounts, in order (one
   * array a request: `peel`, `ref-prefix refs/heads/main`, …).
   */
  lsRefsAsked(): string[][];
  /**
   * The user name and password (basic auth) each request carried since the last resetCounts, in
   * order; `null` for a request that carried none.
   */
  credentialsSeen(): Array<{ username: string; password: string } | null>;
  resetCounts(): void;
  faults: {
    /** Answer the next n requests of a kind with a status (default 500) and no Git work. */
    failNext(n: number, kind?: KindFilter, status?: number): void;
    /** Hold the next n requests of a kind without answering until released (or the server closes). */
    stallNext(n: number, kind?: KindFilter): { release(): void };
    /** Let the next n pushes land, then drop the connection instead of sending the reply. */
    dropPushReply(n?: number): void;
    /** Refuse every push with 403 while on. */
    refusePushes(on: boolean): void;
    /** Speak protocol v2 to upload-pack clients asking for it, or not (a host downgraded). */
    protocolV2(on: boolean): void;
    /** Answer everything 503 while down (a Git host outage). */
    setDown(down: boolean): void;
    clear(): void;
  };
  /**
   * Adds a push webhook delivered after the one of the options, as a Git host delivers each of a
   * repository's hooks (a CI system's beside applygate's). Answers a function that removes it.
   */
  addWebhook(hook: PushHook): () => void;
  close(): Promise<void>;
}

/** The user name and password of a basic Authorization header, or null. */
function basicOf(header: string | undefined): { username: string; password: string } | null {
  const m = /^Basic\s+(\S+)$/i.exec(header ?? "");
  if (!m) return null;
  const text = Buffer.from(m[1] as string, "base64").toString("utf8");
  const at = text.indexOf(":");
  return at < 0
    ? { username: text, password: "" }
    : { username: text.slice(0, at), password: text.slice(at + 1) };
}

/** Bodies of protocol v2 upload-pack POSTs, read whole to tell an `ls-refs` from a fetch. */
const bodies = new WeakMap<IncomingMessage, Buffer>();

const isV2UploadPack = (req: IncomingMessage) =>
  req.method === "POST" &&
  new URL(req.url ?? "/", "http://x").pathname.endsWith("/git-upload-pack") &&
  String(req.headers["git-protocol"] ?? "").includes("version=2");

function commandOf(body: Buffer, encoding: string | undefined): string | undefined {
  let text: Buffer = body;
  try {
    if (encoding === "gzip") text = gunzipSync(body);
  } catch {
    return undefined;
  }
  return /command=([a-z-]+)/.exec(text.subarray(0, 64).toString("latin1"))?.[1];
}

/** The argument lines of a v2 command (the pkt-lines after its delimiter, up to the flush). */
function argumentsOf(body: Buffer, encoding: string | undefined): string[] {
  let buf: Buffer = body;
  try {
    if (encoding === "gzip") buf = gunzipSync(body);
  } catch {
    return [];
  }
  const out: string[] = [];
  let afterDelim = false;
  for (let i = 0; i + 4 <= buf.length; ) {
    const len = Number.parseInt(buf.subarray(i, i + 4).toString("latin1"), 16);
    if (Number.isNaN(len) || len === 0) break;
    if (len === 1) {
      afterDelim = true;
      i += 4;
      continue;
    }
    if (len < 4) break;
    if (afterDelim)
      out.push(
        buf
          .subarray(i + 4, i + len)
          .toString("utf8")
          .replace(/\n$/, ""),
      );
    i += len;
  }
  return out;
}

function kindOf(req: IncomingMessage): RequestKind | undefined {
  const url = new URL(req.url ?? "/", "http://x");
  if (req.method === "GET" && url.pathname.endsWith("/info/refs")) return "advertisement";
  if (req.method === "POST" && url.pathname.endsWith("/git-upload-pack")) {
    const body = bodies.get(req);
    const encoding = req.headers["content-encoding"];
    return body && commandOf(body, typeof encoding === "string" ? encoding : undefined) === "ls-refs"
      ? "advertisement"
      : "fetch";
  }
  if (req.method === "POST" && url.pathname.endsWith("/git-receive-pack")) return "push";
  return undefined;
}

export async function startGitServer(opts: GitServerOptions = {}): Promise<GitServer> {
  const ownsRoot = !opts.root;
  const root = opts.root ?? (await mkdtemp(join(tmpdir(), "applygate-git-")));
  await mkdir(root, { recursive: true });
  const execPath = (await gitOk(["--exec-path"])).trim();
  const backend = join(execPath, "git-http-backend");
  const credentialsSeen: Array<{ username: string; password: string } | null> = [];
  const counts: RequestCounts = { advertisement: 0, fetch: 0, push: 0 };
  let lsRefsAsked: string[][] = [];
  let faults: Fault[] = [];
  let down = false;
  let refuse = false;
  let speaksV2 = opts.protocolV2 ?? true;
  const stalled = new Set<() => void>();
  const sockets = new Set<Socket>();

  const serveBackend = (req: IncomingMessage, res: ServerResponse, dropReply: boolean) => {
    const url = new URL(req.url ?? "/", "http://x");
    const env: NodeJS.ProcessEnv = {
      PATH: process.env.PATH,
      GIT_PROJECT_ROOT: root,
      GIT_HTTP_EXPORT_ALL: "1",
      // http-backend refuses receive-pack without an authenticated user.
      REMOTE_USER: opts.auth?.username ?? "anonymous",
      REQUEST_METHOD: req.method,
      PATH_INFO: decodeURIComponent(url.pathname),
      QUERY_STRING: url.search.replace(/^\?/, ""),
      CONTENT_TYPE: req.headers["content-type"] ?? "",
      HTTP_CONTENT_ENCODING: String(req.headers["content-encoding"] ?? ""),
    };
    // Protocol v2 only for upload-pack: receive-pack's v2 advertisement lacks the service line.
    const service = url.searchParams.get("service") ?? url.pathname.split("/").pop();
    if (speaksV2 && req.headers["git-protocol"] && service === "git-upload-pack")
      env.GIT_PROTOCOL = String(req.headers["git-protocol"]);
    const child = spawn(backend, [], { env });
    const read = bodies.get(req);
    if (read) child.stdin.end(read);
    else req.pipe(child.stdin);
    child.stdin.on("error", () => {});
    let head = Buffer.alloc(0);
    let headersDone = false;
    const bodyChunks: Buffer[] = [];
    child.stdout.on("data", (chunk: Buffer) => {
      if (headersDone) {
        if (dropReply) bodyChunks.push(chunk);
        else res.write(chunk);
        return;
      }
      head = Buffer.concat([head, chunk]);
      const end = head.indexOf("\r\n\r\n");
      if (end < 0) return;
      headersDone = true;
      const lines = head.subarray(0, end).toString().split("\r\n");
      let status = 200;
      const headers: Record<string, string> = {};
      for (const line of lines) {
        const i = line.indexOf(":");
        if (i < 0) continue;
        const k = line.slice(0, i).trim();
        const v = line.slice(i + 1).trim();
        if (k.toLowerCase() === "status") status = Number.parseInt(v, 10);
        else headers[k] = v;
      }
      const rest = head.subarray(end + 4);
      if (dropReply) {
        bodyChunks.push(rest);
        return;
      }
      res.writeHead(status, headers);
      if (rest.length) res.write(rest);
    });
    child.stderr.resume();
    child.on("close", () => {
      if (dropReply) {
        // The push has landed (receive-pack finished); the client never hears so.
        req.socket.destroy();
        return;
      }
      if (!headersDone) {
        if (!res.headersSent) res.writeHead(500);
      }
      res.end();
    });
  };

  /** Branch tips of one bare repository, for the post-push webhook. */
  const branchTips = async (repoDir: string): Promise<Map<string, string>> => {
    const r = await git(["for-each-ref", "--format=%(refname) %(objectname)", "refs/heads"], {
      cwd: repoDir,
    });
    const out = new Map<string, string>();
    for (const line of r.stdout.split("\n")) {
      const [ref, sha] = line.split(" ");
      if (ref && sha) out.set(ref, sha);
    }
    return out;
  };

  const hooks: PushHook[] = opts.webhook ? [opts.webhook] : [];
  const deliverPushWebhooks = async (repoPath: string, before: Map<string, string>) => {
    if (hooks.length === 0) return;
    const after = await branchTips(join(root, repoPath));
    const repoName = repoPath.replace(/\.git$/, "");
    for (const [ref, sha] of after) {
      const old = before.get(ref);
      if (old === sha) continue;
      const body = JSON.stringify({
        ref,
        before: old ?? "0".repeat(40),
        after: sha,
        repository: { full_name: repoName, clone_url: `${url}/${repoPath}`, html_url: `${url}/${repoName}` },
        pusher: { login: "playground" },
        commits: [],
      });
      for (const hook of [...hooks]) {
        const signature = createHmac("sha256", hook.secret).update(body).digest("hex");
        await fetch(hook.url, {
          method: "POST",
          headers: {
            "content-type": "application/json",
            "x-gitea-event": "push",
            "x-gitea-delivery": randomUUID(),
            "x-gitea-signature": signature,
          },
          body,
        }).catch(() => {});
      }
    }
  };

  const handle = (req: IncomingMessage, res: ServerResponse) => {
    if (isV2UploadPack(req) && !bodies.has(req)) {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        bodies.set(req, Buffer.concat(chunks));
        handle(req, res);
      });
      return;
    }
    if (kindOf(req) === "push" && hooks.length > 0 && !down && !refuse) {
      // Read the tips before receive-pack can move them (the request body waits, paused, meanwhile).
      const repoPath = decodeURIComponent(new URL(req.url ?? "/", "http://x").pathname)
        .replace(/^\/+/, "")
        .replace(/\/git-receive-pack$/, "");
      void branchTips(join(root, repoPath)).then(
        (before) => {
          res.once("finish", () => void deliverPushWebhooks(repoPath, before).catch(() => {}));
          handleNow(req, res);
        },
        () => handleNow(req, res),
      );
      return;
    }
    handleNow(req, res);
  };

  const handleNow = (req: IncomingMessage, res: ServerResponse) => {
    const kind = kindOf(req);
    if (kind) counts[kind]++;
    credentialsSeen.push(basicOf(req.headers.authorization));
    const body = bodies.get(req);
    if (kind === "advertisement" && body) {
      const encoding = req.headers["content-encoding"];
      lsRefsAsked.push(argumentsOf(body, typeof encoding === "string" ? encoding : undefined));
    }
    if (opts.auth) {
      const expected = `Basic ${Buffer.from(`${opts.auth.username}:${opts.auth.password}`).toString("base64")}`;
      if (req.headers.authorization !== expected) {
        req.resume();
        res.writeHead(401, { "WWW-Authenticate": 'Basic realm="git"' });
        res.end("authentication required\n");
        return;
      }
    }
    if (down) {
      req.resume();
      res.writeHead(503, { "content-type": "text/plain" });
      res.end("service unavailable\n");
      return;
    }
    const isPushService =
      kind === "push" || (kind === "advertisement" && req.url?.includes("service=git-receive-pack"));
    if (refuse && isPushService) {
      req.resume();
      res.writeHead(403, { "content-type": "text/plain" });
      res.end("pushes refused\n");
      return;
    }
    const fault = faults.find((f) => f.remaining > 0 && (f.kind === "any" || f.kind === kind));
    if (fault) {
      fault.remaining--;
      faults = faults.filter((f) => f.remaining > 0);
      fault.apply(req, res, () => serveBackend(req, res, false));
      return;
    }
    serveBackend(req, res, false);
  };

  const server: Server = createServer(handle);
  server.on("connection", (s) => {
    sockets.add(s);
    s.on("close", () => sockets.delete(s));
  });
  await new Promise<void>((resolve) => server.listen(opts.port ?? 0, opts.host ?? "127.0.0.1", resolve));
  const addr = server.address();
  const port = typeof addr === "object" && addr ? addr.port : 0;
  const url = `http://${opts.host ?? "127.0.0.1"}:${port}`;

  const api: GitServer = {
    url,
    root,
    repoUrl(name, withAuth = false) {
      const repo = name.endsWith(".git") ? name : `${name}.git`;
      if (withAuth && opts.auth) {
        const u = new URL(`${url}/${repo}`);
        u.username = encodeURIComponent(opts.auth.username);
        u.password = encodeURIComponent(opts.auth.password);
        return u.toString();
      }
      return `${url}/${repo}`;
    },
    async createRepo(name, files, o = {}) {
      const branch = o.branch ?? "main";
      const repo = name.endsWith(".git") ? name : `${name}.git`;
      const bare = join(root, repo);
      await mkdir(dirname(bare), { recursive: true });
      await gitOk(["init", "-q", "--bare", "-b", branch, bare]);
      // Let pushes over HTTP update refs without an owner check on the served folder.
      await gitOk(["config", "http.receivepack", "true"], { cwd: bare });
      if (files && Object.keys(files).length > 0) {
        const work = await mkdtemp(join(tmpdir(), "applygate-seed-"));
        try {
          await gitOk(["init", "-q", "-b", branch, work]);
          for (const [path, content] of Object.entries(files)) {
            await mkdir(dirname(join(work, path)), { recursive: true });
            await writeFile(join(work, path), content);
          }
          await gitOk(["add", "-A"], { cwd: work });
          await gitOk(["commit", "-q", "-m", "initial content"], { cwd: work });
          await gitOk(["push", "-q", bare, `HEAD:refs/heads/${branch}`], { cwd: work });
        } finally {
          await rm(work, { recursive: true, force: true });
        }
      }
      return api.repoUrl(name);
    },
    async tip(name, branch = "main") {
      const repo = name.endsWith(".git") ? name : `${name}.git`;
      const r = await git(["rev-parse", "--verify", "-q", `refs/heads/${branch}`], { cwd: join(root, repo) });
      return r.code === 0 ? r.stdout.trim() : undefined;
    },
    counts: () => ({ ...counts }),
    credentialsSeen: () => credentialsSeen.map((c) => c && { ...c }),
    lsRefsAsked: () => lsRefsAsked.map((a) => [...a]),
    resetCounts() {
      lsRefsAsked = [];
      credentialsSeen.length = 0;
      counts.advertisement = 0;
      counts.fetch = 0;
      counts.push = 0;
    },
    faults: {
      failNext(n, kind = "any", status = 500) {
        faults.push({
          kind,
          remaining: n,
          apply: (req, res) => {
            req.resume();
            res.writeHead(status, { "content-type": "text/plain" });
            res.end(`injected failure ${status}\n`);
          },
        });
      },
      stallNext(n, kind = "any") {
        const held: Array<() => void> = [];
        let released = false;
        faults.push({
          kind,
          remaining: n,
          apply: (_req, _res, next) => {
            if (released) return next();
            held.push(next);
            stalled.add(next);
          },
        });
        return {
          release() {
            released = true;
            for (const next of held.splice(0)) {
              stalled.delete(next);
              next();
            }
          },
        };
      },
      dropPushReply(n = 1) {
        faults.push({ kind: "push", remaining: n, apply: (req, res) => serveBackend(req, res, true) });
      },
      refusePushes(on) {
        refuse = on;
      },
      setDown(d) {
        down = d;
      },
      protocolV2(on) {
        speaksV2 = on;
      },
      clear() {
        faults = [];
        down = false;
        refuse = false;
        speaksV2 = opts.protocolV2 ?? true;
      },
    },
    addWebhook(hook) {
      hooks.push(hook);
      return () => {
        const i = hooks.indexOf(hook);
        if (i >= 0) hooks.splice(i, 1);
      };
    },
    async close() {
      stalled.clear();
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      if (ownsRoot) await rm(root, { recursive: true, force: true });
    },
  };
  return api;
}
