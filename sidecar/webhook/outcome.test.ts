import { describe, expect, it } from "vitest";
import { judgeReport, judgeSend, MESSAGE_BYTES } from "./outcome.js";

describe("judgeSend", () => {
  it("mode response: 2xx Succeeded, anything else Failed, a timeout Failed", () => {
    expect(judgeSend("response", { kind: "answered", status: 204, body: "" }, 30).phase).toBe("Succeeded");
    expect(judgeSend("response", { kind: "answered", status: 299, body: "ok" }, 30)).toEqual({
      phase: "Succeeded",
      message: "ok",
    });
    expect(judgeSend("response", { kind: "answered", status: 302, body: "" }, 30)).toMatchObject({
      phase: "Failed",
      outcome: "HTTP302",
    });
    expect(judgeSend("response", { kind: "answered", status: 500, body: "boom" }, 30)).toEqual({
      phase: "Failed",
      outcome: "HTTP500",
      message: "boom",
    });
    expect(judgeSend("response", { kind: "timeout" }, 30)).toMatchObject({
      phase: "Failed",
      outcome: "Timeout",
    });
  });

  it("mode callback: 2xx is Running; a timeout is a lost answer (Unresolved), never Failed", () => {
    expect(judgeSend("callback", { kind: "answered", status: 202, body: "" }, 30).phase).toBe("Running");
    expect(judgeSend("callback", { kind: "timeout" }, 30)).toMatchObject({
      phase: "Unresolved",
      outcome: "AnswerLost",
    });
    expect(judgeSend("callback", { kind: "answered", status: 401, body: "bad signature" }, 30)).toMatchObject(
      { phase: "Failed" },
    );
  });

  it("a lost answer is Unresolved in both modes; nothing sent is RequestFailed", () => {
    for (const mode of ["response", "callback"] as const) {
      expect(judgeSend(mode, { kind: "lost", message: "socket hang up" }, 30)).toMatchObject({
        phase: "Unresolved",
      });
      expect(judgeSend(mode, { kind: "notSent", reason: "AddressRefused", message: "x" }, 30)).toEqual({
        phase: "RequestFailed",
        reason: "AddressRefused",
        message: "x",
      });
    }
  });

  it("keeps only the first bytes of the body", () => {
    const v = judgeSend("response", { kind: "answered", status: 500, body: "y".repeat(5000) }, 30);
    expect(v.message.length).toBe(MESSAGE_BYTES + 1);
  });
});

describe("judgeReport", () => {
  it("Running moves, Succeeded and Failed end", () => {
    expect(judgeReport({ phase: "Running", receivedAt: "t" })).toEqual({ end: false, phase: "Running" });
    expect(judgeReport({ phase: "Succeeded", message: "done", receivedAt: "t" })).toEqual({
      end: true,
      phase: "Succeeded",
      message: "done",
    });
    expect(judgeReport({ phase: "Failed", receivedAt: "t" })).toEqual({ end: true, phase: "Failed" });
  });
});
