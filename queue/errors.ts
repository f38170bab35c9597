/**
 * What a caught value says, for a log line or a status message. A caught value is `unknown`: a
 * thrown string or a rejection with a plain object is no Error, so it is read here, never cast.
 */

/**
 * The message of a caught value: an Error's (or an error-like object's) `message`, else the
 * value as a string (a thrown string, a rejection with no Error).
 */
export function errorMessage(err: unknown): string {
  if (err instanceof Error) return err.message;
  if (typeof err === "object" && err !== null && "message" in err && typeof err.message === "string")
    return err.message;
  return String(err);
}

/** A Node.js error's code (`ENOENT`, `ERR_MODULE_NOT_FOUND`): a caught value's string `code`, if it has one. */
export function errorCode(err: unknown): string | undefined {
  if (typeof err === "object" && err !== null && "code" in err && typeof err.code === "string")
    return err.code;
  return undefined;
}
