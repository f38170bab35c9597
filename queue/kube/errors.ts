/** The parts of a failed API call we act on, read alike from a client's ApiException and our KubeError. */

export interface ApiFailure {
  code?: number;
  reason?: string;
  message: string;
  causes?: { reason?: string; message?: string; field?: string }[];
}

/** Parses a failed call. In client-node 1.4 `ApiException.body` may be a JSON string. */
export function apiFailure(err: unknown): ApiFailure {
  const e = err as { code?: unknown; statusCode?: unknown; body?: unknown; message?: unknown };
  let body: unknown = e?.body;
  if (typeof body === "string") {
    try {
      body = JSON.parse(body);
    } catch {
      // not JSON: keep the text as the message
    }
  }
  const status = (typeof body === "object" && body !== null ? body : {}) as {
    code?: number;
    reason?: string;
    message?: string;
    details?: { causes?: ApiFailure["causes"] };
  };
  const code =
    typeof e?.code === "number" ? e.code : typeof e?.statusCode === "number" ? e.statusCode : status.code;
  const message =
    status.message ??
    (typeof body === "string" && body !== ""
      ? body
      : typeof e?.message === "string"
        ? e.message
        : String(err));
  return {
    ...(code !== undefined ? { code } : {}),
    ...(status.reason ? { reason: status.reason } : {}),
    message,
    ...(status.details?.causes ? { causes: status.details.causes } : {}),
  };
}

export const isNotFound = (err: unknown) => apiFailure(err).code === 404;
export const isConflict = (err: unknown) => apiFailure(err).code === 409;
export const isForbidden = (err: unknown) => apiFailure(err).code === 403;
export const isGone = (err: unknown) => apiFailure(err).code === 410;
/**
 * The API server could not answer now, but will: 429 (its priority and fairness, or a kind's
 * storage still initializing right after its CRD was made) and 5xx. Worth waiting out, never a
 * verdict on the request.
 */
export const isServerBusy = (err: unknown) => {
  const code = apiFailure(err).code;
  return code === 429 || (code !== undefined && code >= 500 && code <= 599);
};

/** Thrown by the client for a failed call, with the parsed status attached and a readable message. */
export class KubeError extends Error {
  override name = "KubeError";
  constructor(
    readonly what: string,
    readonly failure: ApiFailure,
  ) {
    super(`${what}: ${failure.code ?? "?"} ${failure.reason ?? ""} ${failure.message}`.replace(/\s+/g, " "));
  }
  get code() {
    return this.failure.code;
  }
}
