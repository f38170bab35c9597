/**
 * What an endpoint's answer and a tool's report mean for the operation (pure). Completion is
 * observed, never assumed: only a 2xx or a report from the tool moves an operation forward, and
 * a lost answer is Unresolved, never a success and never silently sent again.
 */
import { STATUS_CODES } from "node:http";
import type { CompletionMode } from "../../queue/crds/index.js";
import { StatusReason } from "../../queue/crds/reasons.js";
import type { CallbackReport } from "../../queue/webhook-callback.js";

/** How many characters of a tool's report message are kept as the operation's message. */
export const MESSAGE_BYTES = 512;

/** What the request gave. */
export type SendResult =
  /**
   * An answer arrived (within the timeout). Its status only: the body of whatever answered is
   * never copied into the claim's status, which the claim's namespace reads (an endpoint may be
   * any service the sidecar can reach).
   */
  | { kind: "answered"; status: number }
  /** No answer within the timeout. */
  | { kind: "timeout" }
  /** Refused before anything was sent (the address, the URL, the connection refused). */
  | { kind: "notSent"; reason: StatusReason; message: string }
  /** Sent (or partly sent), then the connection broke: the tool may or may not have it. */
  | { kind: "lost"; message: string };

export type Verdict =
  | { phase: "Succeeded"; message: string }
  | { phase: "Failed"; outcome: string; message: string }
  /** Accepted by the tool: its reports say the rest. */
  | { phase: "Running"; message: string }
  /** Not known whether the tool has it: followed on, by reports only. */
  | { phase: "Unresolved"; outcome: string; message: string }
  /** Nothing reached the tool: the attempt started nothing. */
  | { phase: "RequestFailed"; reason: StatusReason; message: string };

const head = (s: string) => (s.length > MESSAGE_BYTES ? `${s.slice(0, MESSAGE_BYTES)}…` : s).trim();

/** The verdict on the request, by completion mode. */
export function judgeSend(mode: CompletionMode, r: SendResult, timeoutSeconds: number): Verdict {
  switch (r.kind) {
    case "notSent":
      return { phase: "RequestFailed", reason: r.reason, message: r.message };
    case "lost":
      return {
        phase: "Unresolved",
        outcome: StatusReason.AnswerLost,
        message: `the request's answer was lost (${r.message}); not known whether the endpoint has it`,
      };
    case "timeout":
      // In callback mode a timeout is a lost answer too: the tool may have accepted it.
      return mode === "response"
        ? { phase: "Failed", outcome: StatusReason.Timeout, message: `no answer within ${timeoutSeconds} s` }
        : {
            phase: "Unresolved",
            outcome: StatusReason.AnswerLost,
            message: `no answer within ${timeoutSeconds} s; not known whether the endpoint accepted it`,
          };
    case "answered": {
      const answered = `the endpoint answered ${statusLine(r.status)}`;
      if (r.status < 200 || r.status >= 300)
        return { phase: "Failed", outcome: `HTTP${r.status}`, message: answered };
      return mode === "response"
        ? { phase: "Succeeded", message: answered }
        : { phase: "Running", message: `${answered}; waiting for the tool's report` };
    }
  }
}

/** `500 Internal Server Error`: the standard phrase, never the one the endpoint sent. */
function statusLine(status: number): string {
  const phrase = STATUS_CODES[status];
  return phrase ? `${status} ${phrase}` : String(status);
}

/** What a report from the tool does to an operation in flight. */
export type ReportVerdict =
  | { end: false; phase: "Running"; message?: string }
  | { end: true; phase: "Succeeded" | "Failed"; message?: string };

export function judgeReport(r: CallbackReport): ReportVerdict {
  const message = r.message !== undefined ? head(r.message) : undefined;
  if (r.phase === "Running") return { end: false, phase: "Running", ...(message ? { message } : {}) };
  return { end: true, phase: r.phase, ...(message ? { message } : {}) };
}
