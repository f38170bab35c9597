import { describe, expect, it } from "vitest";
import { judgeReport, judgeSend, MESSAGE_BYTES } from "./outcome.js";

describe("judgeSend", () => {
  it("mode response: 2xx Succeeded, anything else Failed, a timeout Failed", () => {
    expect(judgeSend("response", { kind: "answered", status: 204 }, 30).phase).toBe("Succeeded");
    expect(judgeSend("response", { kind: "answered", status: 200 }, 30)).toEqual({
      phase: "Succeeded",
      message: "the endpoint answered 200 OK",
    });
    expect(judgeSend("response", { kind: "answered", status: 302 }, 30)).toMatchObject({
      phase: "Failed",
      outcome: "HTTP302",
    });
    expect(judgeSend("response", { kind: "answered", status: 500 }, 30)).toEqual({
      phase: "Failed",
      outcome: "HTTP500",
      message: "the endpoint answered 500 Internal Server Error",
    });
    expect(judgeSend("response", { kind: "answered", status: 599 }, 30)).toEqual({
      phase: "Failed",
      outcome: "HTTP599",
      message: "the endpoint answered 599",
    });
    expect(judgeSend("response", { kind: "timeout" }, 30)).toMatchObject({
      phase: "Failed",
      outcome: "Timeout",
    });
  });

  it("mode callback: 2xx is Running; a timeout is a lost answer (Unresolved), never Failed", () => {
    expect(judgeSend("callback", { kind: "answered", status: 202 }, 30)).toEqual({
      phase: "Running",
      message: "the endpoint answered 202 Accepted; waiting for the tool's report",
    });
    expect(judgeSend("callback", { kind: "timeout" }, 30)).toMatchObject({
      phase: "Unresolved",
      outcome: "AnswerLost",
    });
    expect(judgeSend("callback", { kind: "answered", status: 401 }, 30)).toEqual({
      phase: "Failed",
      outcome: "HTTP401",
      message: "the endpoint answered 401 Unauthorized",
    });
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

  it("keeps only the first characters of a tool's report message", () => {
    const v = judgeReport({ phase: "Failed", message: "y".repeat(5000), receivedAt: "t" });
    expect(v.message?.length).toBe(MESSAGE_BYTES + 1);
  });
});
