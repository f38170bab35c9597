/**
 * The playground's deployer: the reference endpoint of a WebhookClaim in mode callback. It checks
 * the request's `X-Signature` (HMAC-SHA256 of the raw body with its key, compared in constant
 * time), answers 202 at once, fetches the commit it was told from the Git server, applies every
 * object of its folder with server-side apply under its own field manager and its own identity,
 * and reports the end to the gateway's callback API, signed with the same key. It never applies
 * on its own: only when called.
 */
import { createHmac, timingSafeEqual } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { KubeConfig } from "@kubernetes/client-node";
import { parseAllDocuments } from "yaml";
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
}

export interface Deployer {
  url: string;
  /** Requests accepted, and applies that ended (for tests and the ready screen). */
  stats: { accepted: number; applied: number; failed: number };
  close(): Promise<void>;
}

interface Request {
  commit: string;
  token: string;
}

function signatureValid(key: string, raw: Buffer, header: string | undefined): boolean {
  const expected = Buffer.from(`sha256=${createHmac("sha256", key).update(raw).digest("hex")}`);
  const given = Buffer.from(header ?? "");
  return given.length === expected.length && timingSafeEqual(given, expected);
}

export async function startDeployer(o: DeployerOptions): Promise<Deployer> {
  const work = await mkdtemp(join(tmpdir(), "applygate-deployer-"));
  await gitOk(["init", "-q", "--bare", work]);
  const stats = { accepted: 0, applied: 0, failed: 0 };
  const cluster = o.kubeConfig.getCurrentCluster()!.server;
  const token = o.kubeConfig.getCurrentUser()?.token ?? "";

  /** Every object of the folder at `commit`, as Git holds it. */
  async function objectsAt(commit: string): Promise<Record<string, unknown>[]> {
    await gitOk(["fetch", "-q", o.repoUrl, "+refs/heads/*:refs/remotes/origin/*"], { cwd: work });
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

  async function serverSideApply(obj: Record<string, unknown>): Promise<void> {
    const meta = obj.metadata as { name: string; namespace?: string };
    const [group, version] = String(obj.apiVersion).includes("/")
      ? String(obj.apiVersion).split("/")
      : ["", String(obj.apiVersion)];
    const plural = `${String(obj.kind).toLowerCase()}s`;
    const base = group ? `/apis/${group}/${version}` : `/api/${version}`;
    const ns = meta.namespace ? `/namespaces/${meta.namespace}` : "";
    const res = await fetch(
      `${cluster}${base}${ns}/${plural}/${meta.name}?fieldManager=${DEPLOYER_FIELD_MANAGER}&force=true`,
      {
        method: "PATCH",
        headers: { "content-type": "application/apply-patch+yaml", authorization: `Bearer ${token}` },
        body: JSON.stringify(obj),
      },
    );
    if (!res.ok)
      throw new Error(`apply ${obj.kind} ${meta.name}: ${res.status} ${(await res.text()).slice(0, 200)}`);
  }

  async function report(opToken: string, phase: "Succeeded" | "Failed", message: string): Promise<void> {
    const body = JSON.stringify({ phase, message });
    const signature = `sha256=${createHmac("sha256", o.key).update(body).digest("hex")}`;
    // A report whose answer is lost is sent again a few times: once the end is recorded, a
    // repeat answers the miss (404), and the first Succeeded or Failed is the one kept.
    for (let attempt = 1; attempt <= 5; attempt++) {
      try {
        const res = await fetch(`${o.gatewayUrl()}/v1/operations/${encodeURIComponent(opToken)}`, {
          method: "POST",
          headers: { "content-type": "application/json", "x-signature": signature },
          body,
        });
        if (res.status === 202 || res.status === 404) return;
      } catch {}
      await new Promise((r) => setTimeout(r, 200 * attempt));
    }
    o.log.warn({ token: opToken }, "deployer could not report to the gateway");
  }

  async function deploy(r: Request): Promise<void> {
    try {
      const objects = await objectsAt(r.commit);
      for (const obj of objects) await serverSideApply(obj);
      stats.applied++;
      o.log.info({ commit: r.commit, token: r.token, objects: objects.length }, "deployer applied");
      await report(
        r.token,
        "Succeeded",
        `applied ${objects.length} object(s) of ${o.folder} at ${r.commit.slice(0, 7)}`,
      );
    } catch (err) {
      stats.failed++;
      o.log.warn({ commit: r.commit, token: r.token, err: (err as Error).message }, "deployer failed");
      await report(r.token, "Failed", (err as Error).message);
    }
  }

  const read = (req: IncomingMessage) =>
    new Promise<Buffer>((resolve, reject) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => resolve(Buffer.concat(chunks)));
      req.on("error", reject);
    });

  const server: Server = createServer(async (req, res) => {
    const raw = await read(req).catch(() => Buffer.alloc(0));
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
    stats,
    async close() {
      await new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      });
      await rm(work, { recursive: true, force: true });
    },
  };
}
