import { appendFileSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { auditTail } from "./audit.js";
import { type ApiServer, readAuditLog, startApiServer } from "./index.js";

const line = (verb: string, name: string) =>
  `${JSON.stringify({ kind: "Event", verb, user: { username: "u" }, objectRef: { name } })}\n`;

describe("auditTail", () => {
  it("returns each event once, holding back a line not yet ended (a character cut in two included)", () => {
    const path = join(mkdtempSync(join(tmpdir(), "audit-tail-")), "audit.log");
    const next = auditTail(path);
    expect(next()).toEqual([]); // no file yet
    appendFileSync(path, line("get", "a") + line("list", "b"));
    expect(next().map((e) => e.verb)).toEqual(["get", "list"]);
    expect(next()).toEqual([]);
    // A line written in two parts, cut inside a two-byte character.
    const whole = Buffer.from(line("patch", "é-name"));
    const cut = whole.indexOf(Buffer.from("é")) + 1;
    appendFileSync(path, whole.subarray(0, cut));
    expect(next()).toEqual([]);
    appendFileSync(path, whole.subarray(cut));
    expect(next().map((e) => e.objectRef?.name)).toEqual(["é-name"]);
    // A tail from the end skips what is written already.
    const later = auditTail(path, "end");
    expect(later()).toEqual([]);
    appendFileSync(path, line("delete", "c"));
    expect(later().map((e) => e.verb)).toEqual(["delete"]);
    expect(next().map((e) => e.verb)).toEqual(["delete"]);
  });

  describe("over a running server", () => {
    let api: ApiServer;
    let path: string;
    beforeAll(async () => {
      path = join(mkdtempSync(join(tmpdir(), "audit-tail-")), "audit.log");
      api = await startApiServer({ auditLog: path });
    });
    afterAll(() => api.close());

    it("follows the requests as they are answered, as the whole-file read sees them", async () => {
      const next = auditTail(path);
      const seen: string[] = [];
      for (const name of ["one", "two", "three"]) {
        const res = await fetch(`${api.url}/api/v1/namespaces/default/configmaps/${name}`, {
          headers: { Authorization: `Bearer ${api.token()}` },
        });
        expect(res.status).toBe(404);
        seen.push(...next().map((e) => e.objectRef?.name ?? ""));
      }
      expect(seen).toEqual(["one", "two", "three"]);
      expect(readAuditLog(path).map((e) => e.objectRef?.name)).toEqual(seen);
    });
  });
});
