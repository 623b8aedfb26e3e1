import { describe, expect, it } from "vitest";
import { deepArray, deepObject } from "../test/support/fuzz";
import { tooDeep, tooDeepMessage } from "./json-depth";

describe("tooDeep", () => {
  it("names the first value past the limit, root at depth 1", () => {
    expect(tooDeep({ a: [[1]] }, 2)).toBe("a[0]");
    expect(tooDeep({ a: [1] }, 2)).toBeNull();
    expect(tooDeep([{}, { b: { c: {} } }], 3)).toBe("[1].b.c");
    expect(tooDeep("text", 0)).toBeNull();
    expect(tooDeep(null, 0)).toBeNull();
  });

  it("walks nesting far past what the stack allows, and a cycle, without recursing", () => {
    expect(tooDeep(deepArray(200_000))).toMatch(/^(\[0\])+$/);
    expect(tooDeep(deepObject(129))).toMatch(/^a(\.a)+$/);
    expect(tooDeep(deepObject(127))).toBeNull();
    const cycle: Record<string, unknown> = {};
    cycle.self = cycle;
    expect(tooDeep(cycle)).toMatch(/^self(\.self)+$/);
  });

  it("shortens a long path in the message", () => {
    const message = tooDeepMessage("a.".repeat(100));
    expect(message).toMatch(/^(a\.){59}a…: nests more than 128 levels deep \(LIMITS\.maxJsonDepth\)$/);
  });
});
