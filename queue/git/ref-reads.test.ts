import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { gitOk } from "../../test/git/cli.js";
import { GitPeer } from "../../test/git/peer.js";
import { type GitServer, startGitServer } from "../../test/git/server.js";
import { untilWith } from "../../test/support/wait.js";
import { RefReads } from "./ref-reads.js";
import { BareRepo } from "./repo.js";
import { discoverRefs, lsRefs } from "./smart-http.js";

const until = untilWith({ timeoutMs: 10_000, everyMs: 5 });

describe("branch tips read through protocol v2 ls-refs, shared per repository", () => {
  let server: GitServer;
  let dir: string;
  let url: string;
  let main: string;
  const branches = Array.from({ length: 40 }, (_, i) => `b${i}`);
  beforeEach(async () => {
    server = await startGitServer();
    dir = await mkdtemp(join(tmpdir(), "applygate-refs-"));
    url = await server.createRepo("r", { "a.yaml": "a: 1\n" });
    main = (await server.tip("r")) as string;
    const bare = join(server.root, "r.git");
    for (const b of branches) await gitOk(["update-ref", `refs/heads/${b}`, main], { cwd: bare });
  });
  afterEach(async () => {
    await server.close();
    await rm(dir, { recursive: true, force: true });
  });

  it("the test server and the client speak v2: ls-refs names only the branches asked for", async () => {
    const found = await discoverRefs({ url });
    expect(found.version).toBe(2);
    const refs = await lsRefs({ url }, ["refs/heads/b1"]);
    // A prefix matches b1 and b10..b19; never a branch outside it.
    expect([...refs.keys()].sort()).toEqual(
      ["refs/heads/b1", ...Array.from({ length: 10 }, (_, i) => `refs/heads/b1${i}`)].sort(),
    );
  });

  it("reads asked together share requests: forty baselines cost a few, not forty", async () => {
    const repo = await BareRepo.open(join(dir, "r.git"));
    server.resetCounts();
    const tips = await Promise.all(branches.map((b) => repo.fetchBranch({ url }, b)));
    expect(tips.map((t) => t.tip)).toEqual(branches.map(() => main));
    // The info/refs learning v2, then at most two ls-refs (the first read's, and the rest's).
    expect(server.counts().advertisement).toBeLessThanOrEqual(3);
    expect(server.counts().fetch).toBe(1);
    server.resetCounts();
    // Once v2 is known, one read is one request.
    expect(await repo.remoteTip({ url }, "b7")).toBe(main);
    expect(server.counts().advertisement).toBe(1);
    expect(await repo.remoteTip({ url }, "nope")).toBeUndefined();
  });

  it("a read asked while another is on the wire is answered by a later request: never a tip older than the question", async () => {
    const reads = new RefReads();
    expect(await reads.tip({ url }, "main")).toBe(main); // v2 learnt
    const stall = server.faults.stallNext(1, "advertisement");
    const early = reads.tip({ url }, "main");
    await until(() => server.counts().advertisement >= 3, "the first ls-refs is at the server");
    const peer = await GitPeer.clone(url);
    const pushed = await peer.commitAndPush("b.yaml", "b: 1\n", "moved");
    server.resetCounts();
    // Asked after the push: it must see the push, though a read is on the wire, so it waits for
    // a request of its own, not the answer of the one sent before it was asked.
    const late = reads.tip({ url }, "main");
    stall.release();
    expect([main, pushed]).toContain(await early);
    expect(await late).toBe(pushed);
    expect(server.counts().advertisement).toBe(1);
    await peer.remove();
  });

  it("a host that does not speak v2 is read from its v0 advertisement, one per batch", async () => {
    server.faults.protocolV2(false);
    const reads = new RefReads();
    server.resetCounts();
    const tips = await Promise.all(branches.map((b) => reads.tip({ url }, b)));
    expect(tips).toEqual(branches.map(() => main));
    expect(server.counts()).toMatchObject({ advertisement: 2, fetch: 0 });
    expect(reads.stats.requests).toBe(2);
  });

  it("a host that stops speaking v2 is asked info/refs again after the failed ls-refs", async () => {
    const reads = new RefReads();
    expect(await reads.tip({ url }, "b3")).toBe(main);
    server.faults.protocolV2(false);
    // The ls-refs reaches a v0 upload-pack, which does not understand it: that read fails…
    await expect(reads.tip({ url }, "b3")).rejects.toThrow();
    // …and the next one learns the host anew, from its v0 advertisement.
    expect(await reads.tip({ url }, "b3")).toBe(main);
    server.faults.protocolV2(true);
  });

  it("one caller whose signal aborts leaves; the shared request answers the others", async () => {
    const reads = new RefReads();
    await reads.tip({ url }, "main");
    const stall = server.faults.stallNext(1, "advertisement");
    const ctl = new AbortController();
    const leaving = reads.tip({ url, signal: ctl.signal }, "b1");
    const staying = reads.tip({ url }, "b2");
    await until(() => server.counts().advertisement >= 3, "the ls-refs is at the server");
    ctl.abort(new Error("the cycle passed its deadline"));
    await expect(leaving).rejects.toThrow(/abandoned: the cycle passed its deadline$/);
    stall.release();
    expect(await staying).toBe(main);
  });

  /** An annotated tag, a lightweight one and a tag of the annotated one: what each peels to. */
  const tagRepo = async () => {
    const bare = join(server.root, "r.git");
    await gitOk(["tag", "-a", "-m", "release 1", "v1", "main"], { cwd: bare });
    await gitOk(["tag", "light", "main"], { cwd: bare });
    await gitOk(["tag", "-a", "-m", "again", "v1-again", "v1"], { cwd: bare });
    const oid = async (ref: string) => (await gitOk(["rev-parse", ref], { cwd: bare })).trim();
    return [
      { name: "light", object: main, commit: main, annotated: false },
      { name: "v1", object: await oid("refs/tags/v1"), commit: main, annotated: true },
      { name: "v1-again", object: await oid("refs/tags/v1-again"), commit: main, annotated: true },
    ];
  };
  const byName = <T extends { name: string }>(xs: T[]) => [...xs].sort((a, b) => (a.name < b.name ? -1 : 1));

  it("tags are read with one ls-refs of refs/tags/, peeled: no branch is asked for or answered", async () => {
    const expected = await tagRepo();
    const repo = await BareRepo.open(join(dir, "r.git"));
    server.resetCounts();
    expect(byName(await repo.remoteTags({ url }))).toEqual(expected);
    // The info/refs learning v2, then the ls-refs: it names the tags' prefix only, with peel.
    expect(server.counts()).toMatchObject({ advertisement: 2, fetch: 0 });
    expect(server.lsRefsAsked()).toEqual([["peel", "ref-prefix refs/tags/"]]);
    // What that request answers: the tags and their peeled commits, none of the 41 branches.
    expect([...(await lsRefs({ url }, ["refs/tags/"], { peel: true })).keys()].sort()).toEqual([
      "refs/tags/light",
      "refs/tags/v1",
      "refs/tags/v1-again",
      "refs/tags/v1-again^{}",
      "refs/tags/v1^{}",
    ]);
    server.resetCounts();
    // Once v2 is known, a read of the tags is one request; asked while another read is on the
    // wire, it goes with the branches asked meanwhile in the next one.
    const stall = server.faults.stallNext(1, "advertisement");
    const first = repo.remoteTip({ url }, "main");
    await until(() => server.counts().advertisement >= 1, "the first ls-refs is at the server");
    const later = Promise.all([repo.remoteTags({ url }), repo.remoteTip({ url }, "b7")]);
    stall.release();
    expect(await first).toBe(main);
    const [tags, tip] = await later;
    expect(byName(tags)).toEqual(expected);
    expect(tip).toBe(main);
    expect(server.counts().advertisement).toBe(2);
    expect(server.lsRefsAsked()).toEqual([
      ["ref-prefix refs/heads/main"],
      ["peel", "ref-prefix refs/tags/", "ref-prefix refs/heads/b7"],
    ]);
  });

  it("a host that does not speak v2 gives the tags from its v0 advertisement, peeled the same", async () => {
    const expected = await tagRepo();
    server.faults.protocolV2(false);
    const repo = await BareRepo.open(join(dir, "r.git"));
    server.resetCounts();
    expect(byName(await repo.remoteTags({ url }))).toEqual(expected);
    expect(server.counts()).toMatchObject({ advertisement: 1, fetch: 0 });
    expect(server.lsRefsAsked()).toEqual([]);
    server.faults.protocolV2(true);
  });

  it("a push notice's commit is downloaded beside the read of the tip, and a wrong one is no harm", async () => {
    const repo = await BareRepo.open(join(dir, "r.git"));
    await repo.fetchBranch({ url }, "main");
    const peer = await GitPeer.clone(url);
    const pushed = await peer.commitAndPush("b.yaml", "b: 1\n", "moved");
    server.resetCounts();
    const stall = server.faults.stallNext(1, "advertisement");
    const read = repo.fetchBranch({ url }, "main", [main], pushed);
    // The download is at the server while the read of the tip still waits.
    await until(() => server.counts().fetch === 1, "the hinted download reached the server");
    expect(server.counts().advertisement).toBe(1);
    stall.release();
    expect(await read).toEqual({ tip: pushed, downloaded: true });
    expect(server.counts().fetch).toBe(1);
    // A hint naming no commit of the host: the read answers the real tip all the same.
    const again = await peer.commitAndPush("c.yaml", "c: 1\n", "again");
    expect((await repo.fetchBranch({ url }, "main", [pushed], "1".repeat(40))).tip).toBe(again);
    expect(await repo.readFile(again, "c.yaml")).toEqual(Buffer.from("c: 1\n"));
    await peer.remove();
  });
});
