/**
 * The playground's deployer: the reference endpoint of a WebhookClaim in mode callback. It checks
 * the request's `X-Signature` (HMAC-SHA256 of the raw body with its key, compared in constant
 * time), answers 202 at once, fetches the commit it was told from the Git server, applies every
 * object of its folder with server-side apply under its own field manager and its own identity,
 * and reports the end to the gateway's callback API, signed with the same key.
 *
 * Held by its WebhookClaim it never applies on its own: only when called. Without a claim it plays
 * what a CI pipeline does without applygate: the Git host's push webhook (`/push`) triggers a build
 * of each pushed commit that touches its folder, one after another, each applied after its build
 * delay whatever the cluster holds meanwhile.
 */
import { createHmac, timingSafeEqual } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  type KubeConfig,
  type KubernetesObject,
  KubernetesObjectApi,
  PatchStrategy,
} from "@kubernetes/client-node";
import { parseAllDocuments } from "yaml";
import { errorMessage } from "../../queue/errors.js";
import type { Logger } from "../../queue/log.js";
import { gitOk } from "../git/cli.js";

export const DEPLOYER_FIELD_MANAGER = "playground-deployer";

export interface DeployerOptions {
  /** The HMAC key its WebhookClaim's Secret holds. */
  key: string;
  /** The folder it applies. */
  folder: string;
  /** Where it fetches commits from. */
  repoUrl: string;
  /** The gateway it reports to. */
  gatewayUrl: () => string;
  /** Its own identity (a ServiceAccount allowed to apply ConfigMaps in its app's namespace). */
  kubeConfig: KubeConfig;
  log: Logger;
  /** How long a build takes between fetching a commit and applying it (default 0). */
  buildMs?: number;
  /** The secret of the Git host's push webhook to `/push` (a Gitea-style signature over the raw body). */
  pushSecret?: string;
}

export interface Deployer {
  /** Where its WebhookClaim calls it. */
  url: string;
  /** Where the Git host delivers its push webhook. */
  pushUrl: string;
  /** Requests accepted, and applies that ended (for tests and the ready screen). */
  stats: { accepted: number; applied: number; failed: number };
  /** Commits it applied, in order (called or push-triggered). */
  applies: string[];
  /** Commits the Git host's push webhook announced, in order (whether or not they were built). */
  pushes: string[];
  /** The commit its last build or call fetched, once it has the objects it is about to apply. */
  fetched(): string | undefined;
  /**
   * Whether a push triggers a build (its own trigger, as a pipeline runs without applygate). Off by
   * default: held by its claim, a push is only noted.
   */
  triggerOnPush(on: boolean): void;
  /** How long each build takes from now on (a test slows one down); starts at the option's value. */
  buildMs: number;
  /** Builds and applies `commit` as a push would (a pipeline's first run), when the last queued build ended. */
  build(commit: string): Promise<void>;
  close(): Promise<void>;
}

interface Request {
  commit: string;
  token: string;
}

function signatureValid(key: string, raw: Buffer, header: string | undefined, prefix = "sha256="): boolean {
  const expected = Buffer.from(`${prefix}${createHmac("sha256", key).update(raw).digest("hex")}`);
  const given = Buffer.from(header ?? "");
  return given.length === expected.length && timingSafeEqual(given, expected);
}

const NO_COMMIT = "0".repeat(40);

export interface ReportSend {
  url: string;
  body: string;
  signature: string;
  /** How long it keeps trying before it gives up (default 10 minutes). */
  giveUpMs?: number;
  /** True once its sender closed: it stops trying (answering false). */
  stopped?: () => boolean;
  /** Injected for tests. */
  sleep?: (ms: number) => Promise<void>;
  now?: () => number;
}

/**
 * Sends one signed report to the gateway's callback API and keeps sending it while the answer
 * says "try again": a `503` (Redis unavailable, with `Retry-After`), any other 5xx, or no answer.
 * The operation ends only with a report (a lost one leaves it Unresolved and its applier's next
 * attempt waiting), so a few quick tries are not enough: a Redis restart longer than they last
 * would lose the end. `202` (kept) and the uniform miss `404` (finished or unknown: a repeat of
 * a report already kept) stop it; so does `400`, which no repeat can change. Answers whether the
 * report was kept (or already was). It stops when its sender closes.
 */
export async function sendReport(r: ReportSend): Promise<boolean> {
  const sleep = r.sleep ?? ((ms: number) => new Promise<void>((done) => setTimeout(done, ms)));
  const now = r.now ?? Date.now;
  const until = now() + (r.giveUpMs ?? 10 * 60_000);
  for (let attempt = 1; ; attempt++) {
    let waitMs = Math.min(200 * attempt, 2000);
    try {
      const res = await fetch(r.url, {
        method: "POST",
        headers: { "content-type": "application/json", "x-signature": r.signature },
        body: r.body,
      });
      await res.arrayBuffer().catch(() => undefined);
      if (res.status === 202 || res.status === 404) return true;
      if (res.status < 500) return false;
      const after = Number(res.headers.get("retry-after"));
      if (Number.isFinite(after) && after > 0) waitMs = Math.min(after * 1000, 30_000);
    } catch {}
    if (now() + waitMs > until || r.stopped?.()) return false;
    await sleep(waitMs);
    if (r.stopped?.()) return false;
  }
}

export async function startDeployer(o: DeployerOptions): Promise<Deployer> {
  const work = await mkdtemp(join(tmpdir(), "applygate-deployer-"));
  await gitOk(["init", "-q", "--bare", work]);
  const stats = { accepted: 0, applied: 0, failed: 0 };
  const applies: string[] = [];
  const pushes: string[] = [];
  let fetched: string | undefined;
  let onPush = false;
  let closed = false;
  /** Push-triggered builds run one after another, in the order the pushes arrived. */
  let builds: Promise<void> = Promise.resolve();
  let buildMs = o.buildMs ?? 0;
  const buildDelay = () =>
    buildMs > 0 ? new Promise<void>((r) => setTimeout(r, buildMs)) : Promise.resolve();
  const objectApi = KubernetesObjectApi.makeApiClient(o.kubeConfig);

  /** Every object of the folder at `commit`, as Git holds it. */
  async function objectsAt(commit: string): Promise<Record<string, unknown>[]> {
    await fetchRepo();
    const files = (await gitOk(["ls-tree", "-r", "--name-only", commit, "--", o.folder], { cwd: work }))
      .split("\n")
      .filter((f) => f.endsWith(".yaml") || f.endsWith(".yml"));
    const out: Record<string, unknown>[] = [];
    for (const f of files) {
      const text = await gitOk(["show", `${commit}:${f}`], { cwd: work });
      for (const d of parseAllDocuments(text)) {
        const obj = d.toJSON() as Record<string, unknown> | null;
        if (obj?.kind) out.push(obj);
      }
    }
    return out;
  }

  async function fetchRepo(): Promise<void> {
    await gitOk(["fetch", "-q", o.repoUrl, "+refs/heads/*:refs/remotes/origin/*"], { cwd: work });
  }

  /** Whether the push from `before` to `after` changed a file of its folder (a pipeline's path filter). */
  async function touchesFolder(before: string, after: string): Promise<boolean> {
    if (before === NO_COMMIT) return true;
    const changed = await gitOk(["diff", "--name-only", before, after, "--", o.folder], { cwd: work }).catch(
      () => "unknown",
    );
    return changed.trim().length > 0;
  }

  /** Fetches, waits out the build, applies: the objects are those of `commit`, whatever the cluster holds by then. */
  async function applyCommit(commit: string): Promise<number> {
    const objects = await objectsAt(commit);
    fetched = commit;
    await buildDelay();
    if (closed) throw new Error("the deployer stopped");
    for (const obj of objects) await serverSideApply(obj);
    applies.push(commit);
    return objects.length;
  }

  async function pushBuild(before: string, after: string): Promise<void> {
    if (closed) return;
    try {
      await fetchRepo();
      if (!(await touchesFolder(before, after))) return;
      const n = await applyCommit(after);
      stats.applied++;
      o.log.info({ commit: after, objects: n }, "deployer applied a pushed commit");
    } catch (err) {
      if (closed) return;
      stats.failed++;
      o.log.warn({ commit: after, err: errorMessage(err) }, "deployer build failed");
    }
  }

  const queueBuild = (before: string, after: string) => {
    builds = builds.then(() => pushBuild(before, after));
    return builds;
  };

  /** Server-side apply with its own identity, through client-node (TLS and token from its kubeconfig). */
  async function serverSideApply(obj: Record<string, unknown>): Promise<void> {
    const meta = obj.metadata as { name: string; namespace?: string };
    try {
      await objectApi.patch(
        obj as KubernetesObject,
        undefined,
        undefined,
        DEPLOYER_FIELD_MANAGER,
        true,
        PatchStrategy.ServerSideApply,
      );
    } catch (err) {
      const e = err as { code?: number; body?: unknown; message?: string };
      throw new Error(
        `apply ${obj.kind} ${meta.name}: ${e.code ?? "?"} ${String(e.body ?? e.message).slice(0, 200)}`,
      );
    }
  }

  async function report(opToken: string, phase: "Succeeded" | "Failed", message: string): Promise<void> {
    const body = JSON.stringify({ phase, message });
    const signature = `sha256=${createHmac("sha256", o.key).update(body).digest("hex")}`;
    const kept = await sendReport({
      url: `${o.gatewayUrl()}/v1/operations/${encodeURIComponent(opToken)}`,
      body,
      signature,
      stopped: () => closed,
    });
    if (!kept && !closed) o.log.warn({ token: opToken }, "deployer could not report to the gateway");
  }

  async function deploy(r: Request): Promise<void> {
    try {
      const n = await applyCommit(r.commit);
      stats.applied++;
      o.log.info({ commit: r.commit, token: r.token, objects: n }, "deployer applied");
      await report(r.token, "Succeeded", `applied ${n} object(s) of ${o.folder} at ${r.commit.slice(0, 7)}`);
    } catch (err) {
      stats.failed++;
      o.log.warn({ commit: r.commit, token: r.token, err: errorMessage(err) }, "deployer failed");
      await report(r.token, "Failed", errorMessage(err));
    }
  }

  const read = (req: IncomingMessage) =>
    new Promise<Buffer>((resolve, reject) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => resolve(Buffer.concat(chunks)));
      req.on("error", reject);
    });

  /** The Git host's push webhook: noted always, built only while it triggers on pushes. */
  const onPushHook = (raw: Buffer, signature: string | undefined, res: ServerResponse) => {
    if (!o.pushSecret || !signatureValid(o.pushSecret, raw, signature, "")) {
      res.statusCode = 401;
      return res.end("bad signature");
    }
    let push: { before?: unknown; after?: unknown };
    try {
      push = JSON.parse(raw.toString("utf8"));
    } catch {
      res.statusCode = 400;
      return res.end("not JSON");
    }
    if (typeof push.after !== "string" || push.after === NO_COMMIT) {
      res.statusCode = 204;
      return res.end();
    }
    pushes.push(push.after);
    res.statusCode = 202;
    res.end(onPush ? "build queued" : "noted");
    if (onPush) void queueBuild(typeof push.before === "string" ? push.before : NO_COMMIT, push.after);
  };

  const server: Server = createServer(async (req, res) => {
    const raw = await read(req).catch(() => Buffer.alloc(0));
    if (req.method === "POST" && req.url === "/push") {
      const sig = req.headers["x-gitea-signature"];
      return onPushHook(raw, Array.isArray(sig) ? sig[0] : sig, res);
    }
    const sig = req.headers["x-signature"];
    if (req.method !== "POST" || !signatureValid(o.key, raw, Array.isArray(sig) ? sig[0] : sig)) {
      res.statusCode = 401;
      return res.end("bad signature");
    }
    let body: Partial<Request>;
    try {
      body = JSON.parse(raw.toString("utf8"));
    } catch {
      res.statusCode = 400;
      return res.end("not JSON");
    }
    if (typeof body.commit !== "string" || typeof body.token !== "string") {
      res.statusCode = 400;
      return res.end("commit and token required");
    }
    stats.accepted++;
    res.statusCode = 202;
    res.end("accepted");
    void deploy({ commit: body.commit, token: body.token });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}/deploy`,
    pushUrl: `http://127.0.0.1:${port}/push`,
    stats,
    applies,
    pushes,
    fetched: () => fetched,
    get buildMs() {
      return buildMs;
    },
    set buildMs(ms: number) {
      buildMs = ms;
    },
    triggerOnPush(on) {
      onPush = on;
    },
    build: (commit) => queueBuild(NO_COMMIT, commit),
    async close() {
      closed = true;
      await new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      });
      await rm(work, { recursive: true, force: true });
    },
  };
}
