import { afterEach, describe, expect, it } from "vitest";
import { type StatusHost, startStatusHost } from "../../test/git/status-host.js";
import { postStatus, readStatusOf, repoApiBase, statusOfReport } from "./commit-status.js";

const SHA = "c".repeat(40);
let host: StatusHost | undefined;
afterEach(async () => {
  await host?.close();
  host = undefined;
});

describe("repoApiBase", () => {
  it("GitHub, GitHub Enterprise, Gitea (also under a sub-path), or the API root given", () => {
    expect(repoApiBase("https://github.com/team/apps.git", "github")).toBe(
      "https://api.github.com/repos/team/apps",
    );
    expect(repoApiBase("https://ghe.corp/team/apps", "github")).toBe(
      "https://ghe.corp/api/v3/repos/team/apps",
    );
    expect(repoApiBase("https://git.corp/team/apps.git", "gitea")).toBe(
      "https://git.corp/api/v1/repos/team/apps",
    );
    expect(repoApiBase("https://corp/gitea/team/apps.git", "gitea")).toBe(
      "https://corp/gitea/api/v1/repos/team/apps",
    );
    expect(repoApiBase("https://git.corp/team/apps.git", "gitea", "http://127.0.0.1:9/api/v1/")).toBe(
      "http://127.0.0.1:9/api/v1/repos/team/apps",
    );
    expect(
      repoApiBase("http://127.0.0.1:7/site.git", "gitea", "http://127.0.0.1:9/api/v1", "team/site"),
    ).toBe("http://127.0.0.1:9/api/v1/repos/team/site");
    expect(() => repoApiBase("http://127.0.0.1:7/site.git", "gitea")).toThrow(/owner and repository/);
  });
});

for (const api of ["github", "gitea"] as const) {
  describe(`readStatusOf against a ${api} status API`, () => {
    it("missing, then pending, then success: the latest status of the context counts, other contexts do not", async () => {
      const h = await startStatusHost({ api, owner: "team", repo: "apps", token: "s3cret" });
      host = h;
      const o = { api, base: `${h.root}/repos/team/apps`, token: "s3cret" };
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
      await expect(
        readStatusOf({ api, base: `${h.root}/repos/team/apps`, token: "nope" }, SHA, "ci/approved"),
      ).rejects.toThrow(/HTTP 401/);
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
      const o = { api, base: `${h.root}/repos/team/apps`, token: "s3cret" };
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
        postStatus({ ...o, token: "nope" }, SHA, { state: "failure", context: "c", description: "" }),
      ).rejects.toThrow(/401/);
    });
  }
});
