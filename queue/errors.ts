/** What a caught value says, for a log line or a status message. */

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
