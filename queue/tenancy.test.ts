/**
 * Who holds a repository: every spelling of one repository is one repository; the oldest GitProvider
 * naming it holds it, whatever the order of the listing; another is refused unless the holder
 * admits its namespace; a GitTarget writes only through a provider that may be used.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  byAge,
  folderSegments,
  foldersOverlap,
  judgeHolding,
  type ProviderFacts,
  repositoryOf,
} from "./tenancy.js";

const REPO = "git.example/team/apps";

describe("repositoryOf: one repository however it is spelled", () => {
  it("scheme, host case and root dot, default ports, userinfo, .git, slashes, dot segments, percent-encoding, path case, ssh forms", () => {
    const spellings = [
      "https://git.example/team/apps",
      "https://git.example/team/apps.git",
      "https://git.example/team/apps/",
      "https://git.example/team/apps.git/",
      "https://git.example/team/apps.git.git",
      "HTTPS://GIT.EXAMPLE/team/apps",
      "https://git.example./team/apps",
      "https://git.example:443/team/apps",
      "http://git.example/team/apps",
      "http://git.example:80/team/apps.git",
      "https://user:secret@git.example/team/apps",
      "https://git.example//team//apps",
      "https://git.example/team/x/../apps",
      "https://git.example/team/./apps",
      "https://git.example/team/%61pps",
      "https://git.example/team/%2561pps",
      "https://git.example/team%2Fapps",
      "https://git.example/Team/Apps",
      "https://git.example/team/apps?tab=code#readme",
      "git@git.example:team/apps.git",
      "ssh://git@git.example/team/apps.git",
      "ssh://git@git.example:22/team/apps",
      "git://git.example/team/apps.git",
      "git.example/team/apps",
      " https://git.example/team/apps ",
    ];
    for (const s of spellings) expect(repositoryOf(s), s).toBe(REPO);
  });

  it("IPv4 and IPv6 hosts in their canonical form", () => {
    expect(repositoryOf("http://0x7f.0.0.1:8080/site.git")).toBe("127.0.0.1:8080/site");
    expect(repositoryOf("http://127.1:8080/site.git")).toBe("127.0.0.1:8080/site");
    expect(repositoryOf("http://2130706433:8080/site")).toBe("127.0.0.1:8080/site");
    expect(repositoryOf("http://[0:0:0:0:0:0:0:1]:8080/site")).toBe("[::1]:8080/site");
  });

  it("another host, port, owner or name is another repository", () => {
    for (const other of [
      "https://git.example/team/apps2",
      "https://git.example/other/apps",
      "https://git.example:8443/team/apps",
      "https://other.example/team/apps",
      "https://git.example/team/apps/extra",
    ])
      expect(repositoryOf(other), other).not.toBe(REPO);
  });

  it("what is not a repository URL is nothing", () => {
    for (const bad of [
      "",
      "https://",
      "file:///srv/git/apps",
      "https://git.example/",
      "https://git.example/%zz",
    ])
      expect(repositoryOf(bad), bad).toBeUndefined();
  });

  it("property: random owner and repository names, spelled at random, are one repository", () => {
    const name = fc.stringMatching(/^[a-z0-9][a-z0-9-]{0,15}$/);
    const spell = fc.constantFrom(
      (h: string, o: string, r: string) => `https://${h}/${o}/${r}.git`,
      (h: string, o: string, r: string) => `HTTP://${h.toUpperCase()}:80/${o}/${r}/`,
      (h: string, o: string, r: string) => `git@${h}:${o}/${r}`,
      (h: string, o: string, r: string) => `ssh://git@${h}:22/${o.toUpperCase()}/${r}.git`,
      (h: string, o: string, r: string) =>
        `https://x:y@${h}.//${o}/%${r.charCodeAt(0).toString(16)}${r.slice(1)}`,
    );
    fc.assert(
      fc.property(fc.domain(), name, name, spell, spell, (host, owner, repo, a, b) => {
        expect(repositoryOf(a(host, owner, repo))).toBe(repositoryOf(b(host, owner, repo)));
        expect(repositoryOf(a(host, owner, repo))).not.toBe(repositoryOf(b(host, owner, `${repo}x`)));
      }),
      { numRuns: 300 },
    );
  });
});

const T0 = "2026-03-01T10:00:00Z";
const later = (s: number) => new Date(Date.parse(T0) + s * 1000).toISOString();
const provider = (namespace: string, name: string, url: string, createdAt?: string, accessFrom?: string[]) =>
  ({
    namespace,
    name,
    url,
    ...(createdAt ? { createdAt } : {}),
    ...(accessFrom ? { accessFrom: { namespaces: accessFrom } } : {}),
  }) as ProviderFacts;

describe("judgeHolding: the oldest GitProvider naming a repository holds it", () => {
  const holder = provider("team-a", "apps", "https://git.example/team/apps.git", T0);
  const squatter = provider("a-team", "apps", "HTTPS://git.example:443/Team/apps/", later(5));

  it("a later GitProvider in another namespace is refused, naming the holder; the holder is not", () => {
    const h = judgeHolding([squatter, holder]);
    expect(h.provider("team-a", "apps")).toBeUndefined();
    expect(h.provider("a-team", "apps")).toEqual({
      reason: "RepositoryHeld",
      message: expect.stringContaining(
        "held by GitProvider team-a/apps, which does not admit namespace a-team",
      ),
    });
    expect(h.holderOf("a-team", "apps")).toBe(holder);
    // Its GitTargets may not write through it; the holder's may.
    expect(
      h.target({ namespace: "a-team", name: "web", providerNamespace: "a-team", providerName: "apps" }),
    ).toMatchObject({ reason: "RepositoryHeld", message: expect.stringContaining("team-a/apps") });
    expect(
      h.target({ namespace: "team-a", name: "site", providerNamespace: "team-a", providerName: "apps" }),
    ).toBeUndefined();
  });

  it("the holder's consent (accessFrom: the namespace, or *) admits another namespace's GitProvider", () => {
    for (const ns of [["a-team"], ["*"]]) {
      const consenting = { ...holder, accessFrom: { namespaces: ns } };
      expect(judgeHolding([squatter, consenting]).provider("a-team", "apps")).toBeUndefined();
    }
    // Consent to another namespace is no consent to this one.
    const other = { ...holder, accessFrom: { namespaces: ["team-c"] } };
    expect(judgeHolding([squatter, other]).provider("a-team", "apps")?.reason).toBe("RepositoryHeld");
  });

  it("GitProviders of the holder's own namespace share its repository", () => {
    const sibling = provider("team-a", "apps-readonly", "git@git.example:team/apps.git", later(9));
    expect(judgeHolding([sibling, holder]).provider("team-a", "apps-readonly")).toBeUndefined();
  });

  it("a GitTarget naming a provider that does not admit its namespace says so first", () => {
    const h = judgeHolding([holder, squatter]);
    expect(
      h.target({ namespace: "team-b", name: "x", providerNamespace: "team-a", providerName: "apps" }),
    ).toMatchObject({ reason: "ProviderNamespaceNotAllowed" });
    expect(
      h.target({ namespace: "team-b", name: "x", providerNamespace: "team-a", providerName: "gone" }),
    ).toBeUndefined();
  });

  it("deleting the holder lets the next oldest hold the repository", () => {
    const third = provider("c-team", "apps", "https://git.example/team/apps", later(9));
    const h = judgeHolding([third, squatter]);
    expect(h.provider("a-team", "apps")).toBeUndefined();
    expect(h.provider("c-team", "apps")?.message).toContain("held by GitProvider a-team/apps");
  });

  it("same creation time: namespace, then name, decide; no creation time counts as the newest", () => {
    const a = provider("team-a", "x", "https://git.example/team/apps", T0);
    const b = provider("team-b", "x", "https://git.example/team/apps", T0);
    expect(judgeHolding([b, a]).provider("team-b", "x")?.reason).toBe("RepositoryHeld");
    const undated = provider("aaa", "x", "https://git.example/team/apps");
    expect(judgeHolding([undated, b]).provider("aaa", "x")?.reason).toBe("RepositoryHeld");
    expect(byAge(undated, { ...undated, name: "y" })).toBe(-1);
  });

  it("property: the holder never depends on the order of the listing", () => {
    const ns = fc.constantFrom("a", "b", "team-a", "team-b", "z");
    const url = fc.constantFrom(
      "https://git.example/team/apps",
      "git@git.example:team/apps.git",
      "https://GIT.example/team/apps/",
      "https://git.example/team/other",
    );
    const p = fc.record({
      namespace: ns,
      name: fc.constantFrom("p", "q", "r"),
      url,
      createdAt: fc.option(fc.integer({ min: 0, max: 5 }).map(later), { nil: undefined }),
    });
    fc.assert(
      fc.property(
        fc.uniqueArray(p, { selector: (x) => `${x.namespace}/${x.name}`, maxLength: 8 }),
        fc.func(fc.integer()),
        (providers, rank) => {
          const shuffled = [...providers].sort(
            (x, y) => rank(x.name + x.namespace) - rank(y.name + y.namespace),
          );
          const one = judgeHolding(providers as ProviderFacts[]);
          const two = judgeHolding(shuffled as ProviderFacts[]);
          for (const x of providers) {
            expect(two.provider(x.namespace, x.name)).toEqual(one.provider(x.namespace, x.name));
            expect(two.holderOf(x.namespace, x.name)).toEqual(one.holderOf(x.namespace, x.name));
          }
          // Exactly one holder per repository, and it is the oldest naming it.
          for (const x of providers) {
            const holder = one.holderOf(x.namespace, x.name);
            if (!holder) continue;
            const same = providers.filter((y) => repositoryOf(y.url) === repositoryOf(x.url));
            expect(same.every((y) => byAge(holder, y as ProviderFacts) <= 0)).toBe(true);
          }
        },
      ),
      { numRuns: 300 },
    );
  });
});

describe("folders: a folder of a branch is held by the GitTargets of one namespace", () => {
  const platform = provider("platform", "repo", "https://git.example/team/apps.git", T0, ["*"]);
  const teamRepo = provider("team-b", "mine", "git@git.example:Team/apps", later(1));
  const target = (
    namespace: string,
    name: string,
    path: string,
    at: number,
    via = platform,
    branch = "main",
  ) => ({
    namespace,
    name,
    providerNamespace: via.namespace,
    providerName: via.name,
    branch,
    path,
    createdAt: later(at),
  });

  it("folderSegments and foldersOverlap compare whole segments, without case; the root holds everything", () => {
    expect(folderSegments(".")).toEqual([]);
    expect(folderSegments("apps/./Web/")).toEqual(["apps", "web"]);
    expect(foldersOverlap(["apps"], ["apps", "web"])).toBe(true);
    expect(foldersOverlap(["apps", "web"], ["apps"])).toBe(true);
    expect(foldersOverlap(["apps"], ["apps"])).toBe(true);
    expect(foldersOverlap([], ["anything"])).toBe(true);
    expect(foldersOverlap(["apps"], ["apps-2"])).toBe(false);
    expect(foldersOverlap(["apps", "a"], ["apps", "b"])).toBe(false);
  });

  it("another namespace's GitTarget on the folder, inside it, or around it is refused naming the holder; the holder's namespace may nest", () => {
    const holder = target("platform", "infra", "clusters/prod", 0);
    const cases: Array<[ReturnType<typeof target>, boolean]> = [
      [target("team-b", "same", "clusters/prod", 5), false],
      [target("team-b", "inside", "clusters/prod/web", 5), false],
      [target("team-b", "around", "clusters", 5), false],
      [target("team-b", "root", ".", 5), false],
      [target("team-b", "case", "Clusters/PROD/x", 5), false],
      [target("team-b", "beside", "clusters/prod-2", 5), true],
      [target("team-b", "other-branch", "clusters/prod", 5, platform, "dev"), true],
      [target("platform", "nested", "clusters/prod/web", 5), true],
      // Through its own GitProvider of the same repository: still the same branch.
      [target("team-b", "own-provider", "clusters/prod/x", 5, teamRepo), false],
    ];
    for (const [t, ok] of cases) {
      const verdict = judgeHolding([platform, teamRepo], [holder, t]).target(t);
      if (ok) expect(verdict, t.name).toBeUndefined();
      else
        expect(verdict, t.name).toEqual({
          reason: "FolderHeld",
          message: expect.stringContaining(`of GitTarget platform/infra`),
        });
      expect(judgeHolding([platform, teamRepo], [t, holder]).target(holder), t.name).toBeUndefined();
    }
  });

  it("the oldest holds: a newer GitTarget of the holder's own repository team is refused too, if another namespace came first", () => {
    const first = target("team-b", "early", "clusters/prod/web", 0);
    const late = target("platform", "infra", "clusters", 9);
    const h = judgeHolding([platform], [late, first]);
    expect(h.target(first)).toBeUndefined();
    expect(h.target(late)?.reason).toBe("FolderHeld");
  });

  it("a GitTarget refused for its GitProvider holds no folder", () => {
    const closed = provider("platform", "repo", "https://git.example/team/apps.git", T0);
    const foreign = target("team-b", "x", "clusters/prod", 0, closed);
    const own = target("platform", "infra", "clusters", 5, closed);
    const h = judgeHolding([closed], [foreign, own]);
    expect(h.target(foreign)?.reason).toBe("ProviderNamespaceNotAllowed");
    expect(h.target(own)).toBeUndefined();
  });

  it("property: at most one namespace writes any folder of a branch, whatever the order of the listing", () => {
    const seg = fc.constantFrom("a", "b", "A", "c");
    const t = fc.record({
      namespace: fc.constantFrom("n1", "n2", "n3"),
      name: fc.constantFrom("t1", "t2", "t3", "t4"),
      path: fc.array(seg, { maxLength: 3 }).map((s) => (s.length === 0 ? "." : s.join("/"))),
      at: fc.integer({ min: 0, max: 3 }),
    });
    fc.assert(
      fc.property(
        fc.uniqueArray(t, { selector: (x) => `${x.namespace}/${x.name}`, maxLength: 8 }),
        fc.func(fc.integer()),
        (list, rank) => {
          const targets = list.map((x) => target(x.namespace, x.name, x.path, x.at));
          const shuffled = [...targets].sort(
            (x, y) => rank(x.namespace + x.name) - rank(y.namespace + y.name),
          );
          const one = judgeHolding([platform], targets);
          const two = judgeHolding([platform], shuffled);
          const accepted = targets.filter((x) => one.target(x) === undefined);
          for (const x of targets) expect(two.target(x)).toEqual(one.target(x));
          for (const x of accepted)
            for (const y of accepted)
              if (x.namespace !== y.namespace)
                expect(foldersOverlap(folderSegments(x.path), folderSegments(y.path))).toBe(false);
          // And each refused one is refused for an accepted, older one of another namespace it overlaps.
          for (const x of targets.filter((t) => one.target(t) !== undefined)) {
            const by = accepted.filter(
              (y) =>
                y.namespace !== x.namespace &&
                byAge(y, x) < 0 &&
                foldersOverlap(folderSegments(x.path), folderSegments(y.path)),
            );
            expect(by.length).toBeGreaterThan(0);
            expect(one.target(x)?.message).toContain(
              `of GitTarget ${by.sort(byAge)[0]?.namespace}/${by.sort(byAge)[0]?.name}`,
            );
          }
        },
      ),
      { numRuns: 300 },
    );
  });
});
