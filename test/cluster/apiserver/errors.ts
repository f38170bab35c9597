/** Kubernetes `Status` bodies for failures, and an exception that carries one. */

export interface StatusCause {
  reason?: string;
  message: string;
  field?: string;
}

export interface StatusBody {
  kind: "Status";
  apiVersion: "v1";
  metadata: Record<string, never>;
  status: "Failure" | "Success";
  message: string;
  reason: string;
  details?: { name?: string; group?: string; kind?: string; causes?: StatusCause[]; uid?: string };
  code: number;
}

export class ApiError extends Error {
  constructor(
    readonly code: number,
    readonly reason: string,
    message: string,
    readonly details?: StatusBody["details"],
  ) {
    super(message);
  }

  toStatus(): StatusBody {
    const body: StatusBody = {
      kind: "Status",
      apiVersion: "v1",
      metadata: {},
      status: "Failure",
      message: this.message,
      reason: this.reason,
      code: this.code,
    };
    if (this.details) {
      // Every field of StatusDetails is omitempty: the core group's "" is left out.
      const { group, ...rest } = this.details;
      body.details = group ? { group, ...rest } : rest;
    }
    return body;
  }
}

interface Target {
  group: string;
  plural: string;
  name?: string;
}

function qualified(t: Target): string {
  return t.group === "" ? t.plural : `${t.plural}.${t.group}`;
}

/** As apimachinery's aggregate error prints: one message alone, several in brackets. */
const aggregate = (messages: string[]) => (messages.length === 1 ? messages[0] : `[${messages.join(", ")}]`);

export const errors = {
  notFound: (t: Target & { name: string }) =>
    new ApiError(404, "NotFound", `${qualified(t)} "${t.name}" not found`, {
      name: t.name,
      group: t.group,
      kind: t.plural,
    }),
  alreadyExists: (t: Target & { name: string }) =>
    new ApiError(409, "AlreadyExists", `${qualified(t)} "${t.name}" already exists`, {
      name: t.name,
      group: t.group,
      kind: t.plural,
    }),
  conflict: (t: Target & { name: string }, why: string) =>
    new ApiError(409, "Conflict", `Operation cannot be fulfilled on ${qualified(t)} "${t.name}": ${why}`, {
      name: t.name,
      group: t.group,
      kind: t.plural,
    }),
  invalid: (t: Target & { kind: string; name: string }, causes: StatusCause[]) =>
    new ApiError(
      422,
      "Invalid",
      `${t.kind}${t.group ? "." + t.group : ""} "${t.name}" is invalid: ${aggregate(causes.map((c) => (c.field ? `${c.field}: ${c.message}` : c.message)))}`,
      { name: t.name, group: t.group, kind: t.kind, causes },
    ),
  badRequest: (message: string, causes?: StatusCause[]) =>
    new ApiError(400, "BadRequest", message, causes ? { causes } : undefined),
  methodNotAllowed: (message: string) => new ApiError(405, "MethodNotAllowed", message),
  unsupportedMediaType: (contentType: string) =>
    new ApiError(
      415,
      "UnsupportedMediaType",
      `the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml, application/strategic-merge-patch+json (got ${contentType})`,
    ),
  gone: (message: string) => new ApiError(410, "Expired", message),
  unauthorized: () => new ApiError(401, "Unauthorized", "Unauthorized"),
  forbidden: (user: string, verb: string, t: Target, namespace: string | undefined) =>
    new ApiError(
      403,
      "Forbidden",
      `${qualified(t)}${t.name ? ` "${t.name}"` : ""} is forbidden: User "${user}" cannot ${verb} resource "${t.plural}" in API group "${t.group}"${namespace ? ` in the namespace "${namespace}"` : " at the cluster scope"}`,
      { name: t.name, group: t.group, kind: t.plural },
    ),
  forbiddenPath: (user: string, path: string) =>
    new ApiError(403, "Forbidden", `forbidden: User "${user}" cannot get path "${path}"`),
  internal: (message: string) => new ApiError(500, "InternalError", `Internal error occurred: ${message}`),
};
