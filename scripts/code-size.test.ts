import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { MAX_FUNCTION_LINES, MAX_MODULE_LINES, oversize } from "./code-size";

const scratch = mkdtempSync(path.join(tmpdir(), "polar-code-size-"));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** A function whose declaration spans exactly `lines` lines. */
const fn = (name: string, lines: number) =>
  `export function ${name}() {\n${"  void 0;\n".repeat(lines - 2)}}\n`;

describe("oversize", () => {
  it("finds a function one line over the limit, by name and line, and passes one at the limit", () => {
    const dir = path.join(scratch, "functions");
    mkdirSync(dir, { recursive: true });
    writeFileSync(
      path.join(dir, "a.ts"),
      `${fn("atLimit", MAX_FUNCTION_LINES)}${fn("over", MAX_FUNCTION_LINES + 1)}`,
    );
    writeFileSync(
      path.join(dir, "b.tsx"),
      `export const View = () => {\n${"  void 0;\n".repeat(MAX_FUNCTION_LINES)}  return null;\n};\n`,
    );
    writeFileSync(path.join(dir, "c.test.ts"), fn("longTest", MAX_FUNCTION_LINES * 2));
    expect(oversize(dir, dir)).toEqual([
      {
        file: "a.ts",
        kind: "function",
        name: "over",
        line: MAX_FUNCTION_LINES + 1,
        lines: MAX_FUNCTION_LINES + 1,
      },
      { file: "b.tsx", kind: "function", name: "View", line: 1, lines: MAX_FUNCTION_LINES + 3 },
    ]);
  });

  it("finds a module over the limit and passes one at it", () => {
    const dir = path.join(scratch, "modules");
    mkdirSync(dir, { recursive: true });
    writeFileSync(path.join(dir, "at.ts"), "export const x = 1;\n".repeat(MAX_MODULE_LINES));
    writeFileSync(path.join(dir, "over.ts"), "export const x = 1;\n".repeat(MAX_MODULE_LINES + 1));
    expect(oversize(dir, dir)).toEqual([
      { file: "over.ts", kind: "module", name: "over.ts", line: 1, lines: MAX_MODULE_LINES + 1 },
    ]);
  });

  it.each(["control-plane", "proxy", "gateway-agent", "web/src"])(
    "%s/ has no module over 500 lines and no function over 80",
    (dir) => {
      expect(oversize(dir)).toEqual([]);
    },
  );
});
