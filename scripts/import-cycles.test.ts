import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { importCycles } from "./import-cycles";

const scratch = mkdtempSync(path.join(tmpdir(), "polar-import-cycles-"));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** A folder of modules, `name -> source`. */
function part(name: string, files: Record<string, string>): string {
  const dir = path.join(scratch, name);
  for (const [file, source] of Object.entries(files)) {
    mkdirSync(path.dirname(path.join(dir, file)), { recursive: true });
    writeFileSync(path.join(dir, file), source);
  }
  return dir;
}

describe("importCycles", () => {
  it("finds a cycle through a type-only import, an index and a .js specifier", () => {
    const dir = part("cyclic", {
      "a.ts": 'import { b } from "./sub";\nexport const a = b;\n',
      "sub/index.ts": 'export { b } from "./b.js";\n',
      "sub/b.ts": 'import type { C } from "../c";\nexport const b: C = 1;\n',
      "c.ts": 'import { a } from "./a";\nexport type C = typeof a;\n',
      "leaf.ts": 'import { a } from "./a";\nexport const leaf = a;\n',
      "a.test.ts": 'import { leaf } from "./leaf";\nimport { a } from "./a";\n',
    });
    expect(importCycles(dir)).toEqual([["a.ts", "c.ts", "sub/b.ts", "sub/index.ts"]]);
  });

  it("finds none in a graph without one, and ignores imports from outside the folder", () => {
    const dir = part("acyclic", {
      "a.ts": 'import { b } from "./b";\nimport { z } from "zod";\nimport { x } from "../cyclic/a";\n',
      "b.ts": "export const b = 1;\n",
    });
    expect(importCycles(dir)).toEqual([]);
  });

  it.each(["control-plane", "gateway-agent", "proxy", "tokenizer", "protocol", "sim", "cli"])(
    "%s/ has no import cycle between its modules",
    (dir) => {
      expect(importCycles(dir)).toEqual([]);
    },
  );
});
