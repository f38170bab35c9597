import { afterEach, describe, expect, it } from "vitest";
import { type StatusHost, startStatusHost } from "../../test/git/status-host.js";
import { readStatusOf, repoApiBase } from "./commit-status.js";

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
