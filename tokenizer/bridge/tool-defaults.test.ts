import { describe, expect, it } from "vitest";
import { toolSchemas, withoutDefaults } from "./tool-defaults";

/** Claude Code 2.1's `Edit` schema as the proxy hands it to the bridge (recorded request). */
const editSchema = {
  type: "object",
  properties: {
    file_path: { type: "string" },
    old_string: { type: "string" },
    new_string: { type: "string" },
    replace_all: {
      description: "Replace all occurrences of old_string (default false)",
      default: false,
      type: "boolean",
    },
  },
  required: ["file_path", "old_string", "new_string"],
  additionalProperties: false,
};

describe("toolSchemas", () => {
  it("indexes OpenAI-shaped tools by name and skips entries without a name or an object schema", () => {
    const schemas = toolSchemas([
      { type: "function", function: { name: "Edit", parameters: editSchema } },
      { type: "function", function: { name: "NoSchema", parameters: null } },
      { type: "function", function: { parameters: editSchema } },
      "junk",
      null,
    ]);
    expect([...schemas.keys()]).toEqual(["Edit"]);
    expect(schemas.get("Edit")).toBe(editSchema);
    expect(toolSchemas(undefined).size).toBe(0);
  });
});

describe("withoutDefaults", () => {
  it("drops a key whose value equals its declared default, keeps a non-default value", () => {
    const args = { file_path: "a.js", old_string: "+", new_string: "-" };
    expect(withoutDefaults({ ...args, replace_all: false }, editSchema)).toEqual(args);
    expect(withoutDefaults({ ...args, replace_all: true }, editSchema)).toEqual({
      ...args,
      replace_all: true,
    });
  });

  it("counts only declared defaults: falsey values of undeclared keys stay", () => {
    const schema = { type: "object", properties: { flag: { type: "boolean" }, n: { type: "integer" } } };
    const args = { flag: false, n: 0, extra: "" };
    expect(withoutDefaults(args, schema)).toEqual(args);
  });

  it("compares defaults by value (objects, arrays, null) and follows nested properties and items", () => {
    const schema = {
      type: "object",
      properties: {
        opts: {
          type: "object",
          default: { a: 1, b: [2] },
          properties: { mode: { type: "string", default: "fast" }, depth: { type: "integer" } },
        },
        edits: {
          type: "array",
          items: { type: "object", properties: { all: { type: "boolean", default: false } } },
        },
        tag: { default: null },
      },
    };
    expect(withoutDefaults({ opts: { b: [2], a: 1 }, tag: null }, schema)).toEqual({});
    expect(withoutDefaults({ opts: { mode: "fast", depth: 2 } }, schema)).toEqual({ opts: { depth: 2 } });
    expect(withoutDefaults({ opts: { mode: "slow" } }, schema)).toEqual({ opts: { mode: "slow" } });
    expect(
      withoutDefaults(
        {
          edits: [
            { old: "x", all: false },
            { old: "y", all: true },
          ],
        },
        schema,
      ),
    ).toEqual({ edits: [{ old: "x" }, { old: "y", all: true }] });
  });

  it("leaves values the schema does not describe, and never mutates its input", () => {
    const args = { replace_all: false };
    expect(withoutDefaults("not json", editSchema)).toBe("not json");
    expect(withoutDefaults(args, { type: "object" })).toBe(args);
    expect(withoutDefaults(args, undefined)).toBe(args);
    withoutDefaults(args, editSchema);
    expect(args).toEqual({ replace_all: false });
  });
});
