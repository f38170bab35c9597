/**
 * The audit log: every request, one JSON line shaped like an audit.k8s.io/v1 Event at level
 * Metadata (who, which verb on which object, the answer's code, the authorizer's decision and
 * reason). A request is written once it is answered; a watch once its stream starts (stage
 * ResponseStarted). Lines are appended synchronously, so a line is on disk when its answer is.
 */
import { randomUUID } from "node:crypto";
import { closeSync, fstatSync, openSync, readSync, statSync, writeSync } from "node:fs";
import type { IncomingMessage } from "node:http";
import type { User } from "./auth.js";
import type { Decision } from "./rbac.js";

export interface AuditObjectRef {
  resource?: string;
  namespace?: string;
  name?: string;
  apiGroup?: string;
  apiVersion?: string;
  subresource?: string;
  uid?: string;
  resourceVersion?: string;
}

export interface AuditEvent {
  kind: "Event";
  apiVersion: "audit.k8s.io/v1";
  level: "Metadata";
  auditID: string;
  stage: "ResponseStarted" | "ResponseComplete";
  requestURI: string;
  verb: string;
  user: { username: string; groups?: string[] };
  sourceIPs: string[];
  userAgent?: string;
  objectRef?: AuditObjectRef;
  responseStatus: { metadata: Record<string, never>; code: number; status?: string; reason?: string };
  requestReceivedTimestamp: string;
  stageTimestamp: string;
  annotations?: Record<string, string>;
}

/** What one request gathers on its way through the handlers. */
export class AuditRecord {
  private user?: User;
  private verb?: string;
  private objectRef?: AuditObjectRef;
  private decision?: Decision;
  private readonly received: string;

  constructor(
    private readonly log: AuditLog,
    private readonly req: IncomingMessage,
    private readonly uri: string,
  ) {
    this.received = micro(log.now());
  }

  authenticated(user: User): void {
    this.user = user;
  }

  authorized(verb: string, decision: Decision, objectRef?: AuditObjectRef): void {
    this.verb = verb;
    this.decision = decision;
    if (objectRef) this.objectRef = Object.fromEntries(Object.entries(objectRef).filter(([, v]) => v));
  }

  /**
   * A create's or update's body completes the objectRef where the path left it empty (its name,
   * uid, resourceVersion), as kube-apiserver's audit does at every level from Metadata up.
   */
  requestObject(body: unknown): void {
    const meta = (body as { metadata?: Record<string, unknown> } | undefined)?.metadata;
    if (!this.objectRef || !meta) return;
    for (const key of ["namespace", "name", "uid", "resourceVersion"] as const) {
      const value = meta[key];
      if (!this.objectRef[key] && typeof value === "string" && value) this.objectRef[key] = value;
    }
  }

  /** Writes the line; `streaming` for a watch whose stream is still open. */
  end(code: number, streaming: boolean, failure?: { reason: string }): void {
    const ua = this.req.headers["user-agent"];
    const event: AuditEvent = {
      kind: "Event",
      apiVersion: "audit.k8s.io/v1",
      level: "Metadata",
      auditID: randomUUID(),
      stage: streaming ? "ResponseStarted" : "ResponseComplete",
      requestURI: this.uri,
      verb: this.verb ?? (this.req.method ?? "GET").toLowerCase(),
      user: this.user
        ? { username: this.user.name, groups: this.user.groups }
        : { username: "system:anonymous", groups: ["system:unauthenticated"] },
      sourceIPs: [this.req.socket.remoteAddress ?? "127.0.0.1"],
      ...(ua ? { userAgent: ua } : {}),
      ...(this.objectRef ? { objectRef: this.objectRef } : {}),
      responseStatus: {
        metadata: {},
        code,
        ...(failure ? { status: "Failure", reason: failure.reason } : {}),
      },
      requestReceivedTimestamp: this.received,
      stageTimestamp: micro(this.log.now()),
      ...(this.decision
        ? {
            annotations: {
              "authorization.k8s.io/decision": this.decision.allowed ? "allow" : "forbid",
              "authorization.k8s.io/reason": this.decision.reason,
            },
          }
        : {}),
    };
    this.log.write(event);
  }
}

export class AuditLog {
  /** Opened at the first line and kept open: one write per request, not an open and a close too. */
  private fd: number | undefined;

  constructor(
    private readonly path: string,
    readonly now: () => number,
  ) {}

  begin(req: IncomingMessage, uri: string): AuditRecord {
    return new AuditRecord(this, req, uri);
  }

  write(event: AuditEvent): void {
    this.fd ??= openSync(this.path, "a");
    writeSync(this.fd, `${JSON.stringify(event)}\n`);
  }

  close(): void {
    if (this.fd !== undefined) closeSync(this.fd);
    this.fd = undefined;
  }
}

/** RFC 3339 with microseconds, as the real server writes audit timestamps. */
function micro(ms: number): string {
  return new Date(ms).toISOString().replace(/Z$/, "000Z");
}

/** Every event of an audit log file (empty when there is none yet; a line not yet ended is left out). */
export function readAuditLog(path: string): AuditEvent[] {
  return auditTail(path)();
}

/**
 * Reads an audit log as it grows: each call returns the events written since the last one, so a
 * caller polling a long log parses each line once. With `from: "end"` the lines already written
 * are skipped (a phase that starts now).
 */
export function auditTail(path: string, from: "start" | "end" = "start"): () => AuditEvent[] {
  let offset = from === "end" ? sizeOf(path) : 0;
  // Bytes after the last newline read: a line still being written (or a character cut in two).
  let partial = Buffer.alloc(0);
  return () => {
    let fd: number;
    try {
      fd = openSync(path, "r");
    } catch {
      return [];
    }
    let bytes: Buffer;
    try {
      const added = Buffer.alloc(Math.max(0, fstatSync(fd).size - offset));
      const n = readSync(fd, added, 0, added.length, offset);
      offset += n;
      bytes = Buffer.concat([partial, added.subarray(0, n)]);
    } finally {
      closeSync(fd);
    }
    const end = bytes.lastIndexOf(0x0a);
    partial = Buffer.from(bytes.subarray(end + 1));
    return bytes
      .toString("utf8", 0, end + 1)
      .split("\n")
      .filter(Boolean)
      .map((l) => JSON.parse(l) as AuditEvent);
  };
}

function sizeOf(path: string): number {
  try {
    return statSync(path).size;
  } catch {
    return 0;
  }
}
