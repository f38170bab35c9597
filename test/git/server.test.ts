import * as fs from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as isogit from "isomorphic-git";
import http from "isomorphic-git/http/node";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { untilWith } from "../support/wait.js";
import { git, gitOk } from "./cli.js";
import { GitPeer } from "./peer.js";
import { type GitServer, startGitServer } from "./server.js";

const waitFor = untilWith({ timeoutMs: 10_000, everyMs: 10 });

describe("the Git smart-HTTP test server", () => {
  let server: GitServer;
  let url: string;
  const cleanup: Array<() => Promise<void>> = [];

  beforeEach(async () => {
    server = await startGitServer();
    url = await server.createRepo("demo", { "app/config.yaml": "a: 1\n" });
  });
  afterEach(async () => {
    for (const c of cleanup.splice(0)) await c();
    await server.close();
  });

  async function peer(): Promise<GitPeer> {
    const p = await GitPeer.clone(url);
    cleanup.push(() => p.remove());
    return p;
  }

  it("serves a clone and a push from the real git CLI", async () => {
    const a = await peer();
    expect(await a.readFile("app/config.yaml")).toBe("a: 1\n");
    await a.writeFile("app/config.yaml", "a: 2\n");
    const sha = await a.commit("change a");
    expect((await a.push()).ok).toBe(true);
    expect(await server.tip("demo")).toBe(sha);
  });

  it("rejects a non-fast-forward push from the real git CLI", async () => {
    const a = await peer();
    const b = await peer();
    await a.commitAndPush("x.yaml", "x\n", "a's change");
    await b.writeFile("y.yaml", "y\n");
    await b.commit("b's change");
    const out = await b.push();
    expect(out.ok).toBe(false);
    expect(out.rejected).toBe(true);
  });

  it("serves isomorphic-git clone and push", async () => {
    const dir = await mkdtemp(join(tmpdir(), "iso-"));
    cleanup.push(() => rm(dir, { recursive: true, force: true }));
    await isogit.clone({ fs, http, dir, url, singleBranch: true, ref: "main" });
    fs.writeFileSync(join(dir, "new.yaml"), "n: 1\n");
    await isogit.add({ fs, dir, filepath: "new.yaml" });
    const sha = await isogit.commit({ fs, dir, message: "new", author: { name: "t", email: "t@x" } });
    const res = await isogit.push({ fs, http, dir, ref: "main" });
    expect(res.ok).toBe(true);
    expect(await server.tip("demo")).toBe(sha);
  });

  it("counts requests by kind", async () => {
    server.resetCounts();
    const a = await peer();
    // The CLI speaks protocol v2: ls-refs (a read of the refs) and the fetch are two upload-pack posts.
    expect(server.counts()).toMatchObject({ advertisement: 2, fetch: 1, push: 0 });
    await a.writeFile("z.yaml", "z\n");
    await a.commit("z");
    await a.push();
    expect(server.counts()).toMatchObject({ advertisement: 3, fetch: 1, push: 1 });
  });

  it("answers an injected 5xx and then serves again", async () => {
    server.faults.failNext(1, "advertisement", 502);
    const dir = await mkdtemp(join(tmpdir(), "fail-"));
    cleanup.push(() => rm(dir, { recursive: true, force: true }));
    const first = await git(["clone", "-q", url, dir]);
    expect(first.code).not.toBe(0);
    expect(first.stderr).toMatch(/502|error/i);
    await rm(dir, { recursive: true, force: true });
    expect((await git(["clone", "-q", url, dir])).code).toBe(0);
  });

  it("is unreachable for every request while down", async () => {
    server.faults.setDown(true);
    const r = await git(["ls-remote", url]);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(/503/);
    server.faults.setDown(false);
    expect((await git(["ls-remote", url])).code).toBe(0);
  });

  it("stalls a request until released", async () => {
    const stall = server.faults.stallNext(1, "advertisement");
    let done = false;
    const pending = git(["ls-remote", url]).then((r) => {
      done = true;
      return r;
    });
    await waitFor(() => server.counts().advertisement > 0, "the stalled ls-remote to reach the server");
    expect(done).toBe(false);
    stall.release();
    expect((await pending).code).toBe(0);
  });

  it("drops a push's reply after the push landed", async () => {
    const a = await peer();
    await a.writeFile("lost.yaml", "l\n");
    const sha = await a.commit("reply lost");
    server.faults.dropPushReply(1);
    const out = await a.push();
    expect(out.ok).toBe(false);
    expect(await server.tip("demo")).toBe(sha);
  });

  it("refuses pushes while told to", async () => {
    server.faults.refusePushes(true);
    const a = await peer();
    await a.writeFile("r.yaml", "r\n");
    await a.commit("refused");
    const out = await a.push();
    expect(out.ok).toBe(false);
    expect(out.stderr).toMatch(/403/);
  });

  it("requires basic auth when configured", async () => {
    const secured = await startGitServer({ auth: { username: "u", password: "p" } });
    try {
      await secured.createRepo("s", { "f.yaml": "f\n" });
      expect((await git(["ls-remote", secured.repoUrl("s")])).code).not.toBe(0);
      expect((await gitOk(["ls-remote", secured.repoUrl("s", true)])).length).toBeGreaterThan(0);
    } finally {
      await secured.close();
    }
  });
});

describe("the Git server's post-push webhook", () => {
  it("delivers a signed Gitea-style push notice after a push moved a branch", async () => {
    const { createServer } = await import("node:http");
    const { createHmac } = await import("node:crypto");
    const received: Array<{ headers: Record<string, unknown>; body: string }> = [];
    const sink = createServer((req, res) => {
      let body = "";
      req.on("data", (c) => (body += c));
      req.on("end", () => {
        received.push({ headers: req.headers, body });
        res.end();
      });
    });
    await new Promise<void>((r) => sink.listen(0, "127.0.0.1", r));
    const port = (sink.address() as { port: number }).port;
    const server = await startGitServer({
      webhook: { url: `http://127.0.0.1:${port}/hook`, secret: "s3cret" },
    });
    try {
      const url = await server.createRepo("hooked", { "a.yaml": "a\n" });
      const before = await server.tip("hooked");
      const p = await GitPeer.clone(url);
      const after = await p.commitAndPush("b.yaml", "b\n", "b");
      await p.remove();
      await waitFor(() => received.length > 0, "the push notice to arrive");
      const [hit] = received;
      const payload = JSON.parse(hit!.body);
      expect(payload).toMatchObject({ ref: "refs/heads/main", before, after });
      expect(hit!.headers["x-gitea-event"]).toBe("push");
      expect(hit!.headers["x-gitea-signature"]).toBe(
        createHmac("sha256", "s3cret").update(hit!.body).digest("hex"),
      );
    } finally {
      await server.close();
      sink.close();
    }
  });

  it("delivers to every hook added, each signed with its own secret, and none to a hook removed", async () => {
    const { createServer } = await import("node:http");
    const { createHmac } = await import("node:crypto");
    const received: Array<{ path: string; headers: Record<string, unknown>; body: string }> = [];
    const sink = createServer((req, res) => {
      let body = "";
      req.on("data", (c) => (body += c));
      req.on("end", () => {
        received.push({ path: req.url ?? "", headers: req.headers, body });
        res.end();
      });
    });
    await new Promise<void>((r) => sink.listen(0, "127.0.0.1", r));
    const port = (sink.address() as { port: number }).port;
    const server = await startGitServer({ webhook: { url: `http://127.0.0.1:${port}/a`, secret: "one" } });
    try {
      const removeB = server.addWebhook({ url: `http://127.0.0.1:${port}/b`, secret: "two" });
      server.addWebhook({ url: `http://127.0.0.1:${port}/c`, secret: "three" });
      removeB();
      const url = await server.createRepo("hooked", { "a.yaml": "a\n" });
      const p = await GitPeer.clone(url);
      const after = await p.commitAndPush("b.yaml", "b\n", "b");
      await p.remove();
      // Hooks are delivered one after another in the order added: once /c has its notice, /b would have had one.
      await waitFor(() => received.some((r) => r.path === "/c"), "the last hook's push notice to arrive");
      expect(received.map((r) => r.path)).toEqual(["/a", "/c"]);
      for (const [path, secret] of [
        ["/a", "one"],
        ["/c", "three"],
      ] as const) {
        const hit = received.find((r) => r.path === path);
        expect(JSON.parse(hit!.body)).toMatchObject({ after });
        expect(hit!.headers["x-gitea-signature"]).toBe(
          createHmac("sha256", secret).update(hit!.body).digest("hex"),
        );
      }
    } finally {
      await server.close();
      sink.close();
    }
  });
});
