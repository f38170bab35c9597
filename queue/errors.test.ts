import { describe, expect, it } from "vitest";
import { errorMessage } from "./errors.js";

describe("errorMessage", () => {
  it("is an Error's message, an error-like object's, or the value as a string", () => {
    expect(errorMessage(new TypeError("bad input"))).toBe("bad input");
    expect(errorMessage({ message: "from a plain object", code: 7 })).toBe("from a plain object");
    expect(errorMessage("thrown string")).toBe("thrown string");
    expect(errorMessage(undefined)).toBe("undefined");
    expect(errorMessage({ message: 42 })).toBe("[object Object]");
  });
});
