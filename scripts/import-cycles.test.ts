import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { importCycles, partArrows } from "./import-cycles";

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

  it("partArrows lists the parts a part imports from, by the longest folder holding the target", () => {
    const root = part("layers", {
      "low/a.ts": "export const a = 1;\n",
      "high/b.ts": 'import { a } from "../low/a";\nexport const b = a;\n',
      "high/view.tsx":
        'import { b } from "./b";\nimport { c } from "../low/inner/c";\nexport const v = b + c;\n',
      "low/inner/c.ts": "export const c = 2;\n",
      "low/a.test.ts": 'import { b } from "../high/b";\n',
    });
    const parts = ["high", "low", "low/inner"].map((p) => path.join(root, p));
    const arrows = partArrows(parts).map((a) => a.replaceAll(`${root}${path.sep}`, ""));
    expect(arrows).toEqual(["high -> low", "high -> low/inner"]);
  });
});

/**
 * The arrows allowed between the repository's parts: `protocol/` (the wire's types) is imported by
 * every part and imports none; the tokenizer serves the proxy, the simulator and the gateway and
 * knows nothing of them; the dashboard speaks to the control plane only through the generated
 * client's types. A new arrow is a design change: add it here, and to docs/ARCHITECTURE.md.
 */
const ALLOWED_ARROWS = new Set([
  "cli -> clients/typescript/src",
  "cli -> gateway-agent",
  "cli -> protocol",
  "cli -> proxy",
  "cli -> sim",
  "cli -> tokenizer",
  "control-plane -> protocol",
  "gateway-agent -> protocol",
  "gateway-agent -> proxy",
  "gateway-agent -> tokenizer",
  "proxy -> protocol",
  "proxy -> tokenizer",
  "sim -> protocol",
  "sim -> tokenizer",
  "web/src -> clients/typescript/src",
]);

describe("the arrows between the repository's parts", () => {
  const parts = [
    "cli",
    "clients/typescript/src",
    "control-plane",
    "gateway-agent",
    "protocol",
    "proxy",
    "sim",
    "tokenizer",
    "web/src",
  ];
  it("run only the allowed way: nothing imports upward into the proxy, the gateway or the control plane", () => {
    const unexpected = partArrows(parts).filter((arrow) => !ALLOWED_ARROWS.has(arrow));
    expect(unexpected).toEqual([]);
    expect(partArrows(parts)).toContain("proxy -> tokenizer");
  });
});
