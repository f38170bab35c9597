import { readFile } from "node:fs/promises";
import { describe, expect, it } from "vitest";
import { errorCode, errorMessage } from "./errors.js";

describe("errorMessage", () => {
  it("is an Error's message, an error-like object's, or the value as a string", () => {
    expect(errorMessage(new TypeError("bad input"))).toBe("bad input");
    expect(errorMessage({ message: "from a plain object", code: 7 })).toBe("from a plain object");
    expect(errorMessage("thrown string")).toBe("thrown string");
    expect(errorMessage(undefined)).toBe("undefined");
    expect(errorMessage({ message: 42 })).toBe("[object Object]");
  });
});

describe("errorCode", () => {
  it("is a Node.js error's code, absent for a value without a string code", async () => {
    const missing = await readFile("/nonexistent/applygate").catch((err: unknown) => err);
    expect(errorCode(missing)).toBe("ENOENT");
    expect(errorCode({ code: "EPERM" })).toBe("EPERM");
    expect(errorCode(Object.assign(new Error("conflict"), { code: 409 }))).toBeUndefined();
    expect(errorCode(new Error("no code"))).toBeUndefined();
    expect(errorCode("ENOENT")).toBeUndefined();
    expect(errorCode(null)).toBeUndefined();
  });
});
