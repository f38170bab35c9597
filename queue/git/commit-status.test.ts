import { afterEach, describe, expect, it } from "vitest";
import { type StatusHost, startStatusHost } from "../../test/git/status-host.js";
import { postStatus, readStatusOf, repoApiBase, statusAccess, statusOfReport } from "./commit-status.js";

const SHA = "c".repeat(40);
let host: StatusHost | undefined;
afterEach(async () => {
  await host?.close();
  host = undefined;
});

describe("repoApiBase", () => {
  it("GitHub, GitHub Enterprise, Gitea (also under a sub-path), or the GitProvider's own API root and repository", () => {
    expect(repoApiBase({ url: "https://github.com/team/apps.git" }, "github")).toBe(
      "https://api.github.com/repos/team/apps",
    );
    expect(repoApiBase({ url: "https://ghe.corp/team/apps" }, "github")).toBe(
      "https://ghe.corp/api/v3/repos/team/apps",
    );
    expect(repoApiBase({ url: "https://git.corp/team/apps.git" }, "gitea")).toBe(
      "https://git.corp/api/v1/repos/team/apps",
    );
    expect(repoApiBase({ url: "https://corp/gitea/team/apps.git" }, "gitea")).toBe(
      "https://corp/gitea/api/v1/repos/team/apps",
    );
    expect(
      repoApiBase(
        { url: "https://git.corp/team/apps.git", commitStatus: { apiURL: "http://127.0.0.1:9/api/v1/" } },
        "gitea",
      ),
    ).toBe("http://127.0.0.1:9/api/v1/repos/team/apps");
    expect(
      repoApiBase(
        {
          url: "http://127.0.0.1:7/site.git",
          commitStatus: { apiURL: "http://127.0.0.1:9/api/v1", repository: "team/site" },
        },
        "gitea",
      ),
    ).toBe("http://127.0.0.1:9/api/v1/repos/team/site");
    expect(() => repoApiBase({ url: "http://127.0.0.1:7/site.git" }, "gitea")).toThrow(
      /owner and repository/,
    );
  });
});

/** The options of a status host's API with its token, as the GitProvider naming it as its API gets them. */
const through = (h: StatusHost, api: "github" | "gitea", token: string) =>
  statusAccess({ url: "https://git.example/team/apps.git", commitStatus: { apiURL: h.root } }, api, token, {
    allowHttp: true,
  });

describe("a GitProvider's token goes to its own commit-status API only", () => {
  it("another origin, or plain http without the operator's flag, is refused before any connection", async () => {
    const h = await startStatusHost({ api: "gitea", owner: "team", repo: "apps", token: "s3cret" });
    host = h;
    h.setStatus(SHA, "ci/approved", "success");
    // The provider's API is the status host; a base somewhere else (a claim's old apiURL) gets nothing.
    const own = through(h, "gitea", "s3cret");
    const other = await startStatusHost({ api: "gitea", owner: "team", repo: "apps", token: "s3cret" });
    try {
      await expect(
        readStatusOf({ ...own, base: `${other.root}/repos/team/apps` }, SHA, "ci/approved"),
      ).rejects.toThrow(/not the GitProvider's own host/);
      await expect(
        postStatus({ ...own, base: `${other.root}/repos/team/apps` }, SHA, {
          state: "success",
          context: "c",
          description: "",
        }),
      ).rejects.toThrow(/not the GitProvider's own host/);
      expect(other.requests).toEqual([]);
    } finally {
      await other.close();
    }
    // Plain http without the flag: not sent, not connected.
    const clear = statusAccess(
      { url: "https://git.example/team/apps.git", commitStatus: { apiURL: h.root } },
      "gitea",
      "s3cret",
    );
    await expect(readStatusOf(clear, SHA, "ci/approved")).rejects.toThrow(/--allow-http-credentials/);
    expect(h.requests).toEqual([]);
    expect(await readStatusOf(own, SHA, "ci/approved")).toBe("success");
  });

  it("a redirect answered to a request carrying the token is not followed", async () => {
    const h = await startStatusHost({ api: "gitea", owner: "team", repo: "apps", token: "s3cret" });
    host = h;
    h.setStatus(SHA, "ci/approved", "success");
    const { createServer } = await import("node:http");
    const mover = createServer((req, res) => {
      res.writeHead(301, { location: `${h.root}${req.url?.replace(/^\/api\/v1/, "")}` });
      res.end();
    });
    await new Promise<void>((r) => mover.listen(0, "127.0.0.1", r));
    try {
      const root = `http://127.0.0.1:${(mover.address() as { port: number }).port}/api/v1`;
      const o = statusAccess(
        { url: "https://git.example/team/apps.git", commitStatus: { apiURL: root } },
        "gitea",
        "s3cret",
        { allowHttp: true },
      );
      await expect(readStatusOf(o, SHA, "ci/approved")).rejects.toThrow(/HTTP 301/);
      expect(h.requests).toEqual([]);
    } finally {
      await new Promise<void>((r) => mover.close(() => r()));
    }
  });
});

for (const api of ["github", "gitea"] as const) {
  describe(`readStatusOf against a ${api} status API`, () => {
    it("missing, then pending, then success: the latest status of the context counts, other contexts do not", async () => {
      const h = await startStatusHost({ api, owner: "team", repo: "apps", token: "s3cret" });
      host = h;
      const o = through(h, api, "s3cret");
      expect(await readStatusOf(o, SHA, "ci/approved")).toBe("missing");
      h.setStatus(SHA, "ci/approved", "pending");
      h.setStatus(SHA, "ci/lint", "success");
      expect(await readStatusOf(o, SHA, "ci/approved")).toBe("pending");
      h.setStatus(SHA, "ci/approved", "success");
      expect(await readStatusOf(o, SHA, "ci/approved")).toBe("success");
      h.setStatus(SHA, "ci/approved", "failure");
      expect(await readStatusOf(o, SHA, "ci/approved")).toBe("failure");
      expect(h.badRequests).toEqual([]);
      expect(h.requests.every((r) => r.method === "GET" && r.path.endsWith(`/commits/${SHA}/status`))).toBe(
        true,
      );
    });

    it("a wrong token is an error, never a success", async () => {
      const h = await startStatusHost({ api, owner: "team", repo: "apps", token: "s3cret" });
      host = h;
      h.setStatus(SHA, "ci/approved", "success");
      await expect(readStatusOf(through(h, api, "nope"), SHA, "ci/approved")).rejects.toThrow(/HTTP 401/);
    });
  });
}

describe("posting applygate's own status", () => {
  it("pending while the apply runs, success or failure at its end; nothing for an attempt that started nothing", () => {
    const claim = { namespace: "prod", name: "shop" };
    expect(statusOfReport("Requested", claim)).toBeUndefined();
    expect(statusOfReport("Stale", claim)).toBeUndefined();
    expect(statusOfReport("Running", claim)).toEqual({
      state: "pending",
      context: "applygate/prod/shop",
      description: "applying",
    });
    expect(statusOfReport("Succeeded", claim)?.state).toBe("success");
    // Ended unfinished by a newer commit: never left pending, never a success.
    expect(statusOfReport("Superseded", claim, "superseded by 3d4ae03")).toEqual({
      state: "failure",
      context: "applygate/prod/shop",
      description: "not applied: a newer commit superseded it",
    });
    expect(statusOfReport("Failed", claim, "health check failed")).toEqual({
      state: "failure",
      context: "applygate/prod/shop",
      description: "health check failed",
    });
  });
  for (const api of ["github", "gitea"] as const) {
    it(`posts in the shape ${api} accepts`, async () => {
      const h = await startStatusHost({ api, owner: "team", repo: "apps", token: "s3cret" });
      host = h;
      const o = through(h, api, "s3cret");
      await postStatus(o, SHA, { state: "pending", context: "applygate/prod/shop", description: "applying" });
      await postStatus(o, SHA, {
        state: "success",
        context: "applygate/prod/shop",
        description: "x".repeat(300),
      });
      expect(h.badRequests).toEqual([]);
      expect(h.posted.map((p) => [p.sha, p.state, p.context, p.description?.length])).toEqual([
        [SHA, "pending", "applygate/prod/shop", 8],
        [SHA, "success", "applygate/prod/shop", 140],
      ]);
      expect(await readStatusOf(o, SHA, "applygate/prod/shop")).toBe("success");
      await expect(
        postStatus(through(h, api, "nope"), SHA, { state: "failure", context: "c", description: "" }),
      ).rejects.toThrow(/401/);
    });
  }
});
