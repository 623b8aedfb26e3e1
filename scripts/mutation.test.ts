import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { describe, expect, it } from "vitest";
import {
  formatTable,
  GROUPS,
  type MutantResult,
  moduleTable,
  parseMutationArgs,
  reportMutants,
  survivors,
} from "./mutation";

/** The wrapper of `npm run test:mutation` (scripts/mutation.ts): its arguments and its table; Stryker itself is not run here. */
const mutant = (fileName: string, status: string, line = 1): MutantResult => ({
  fileName,
  mutatorName: "ConditionalExpression",
  replacement: "true",
  status,
  location: { start: { line, column: 3 } },
});

describe("scripts/mutation", () => {
  it("counts each module's mutants and scores detected over valid, errors left out", () => {
    const rows = moduleTable(
      [
        mutant("/r/a.ts", "Killed"),
        mutant("/r/a.ts", "Timeout"),
        mutant("/r/a.ts", "Survived"),
        mutant("/r/a.ts", "NoCoverage"),
        mutant("/r/b.ts", "Killed"),
        mutant("/r/b.ts", "CompileError"),
      ],
      "/r",
    );
    expect(
      rows.map((r) => [r.module, r.mutants, r.killed, r.survived, r.noCoverage, r.timeout, r.other]),
    ).toEqual([
      ["a.ts", 4, 1, 1, 1, 1, 0],
      ["b.ts", 2, 1, 0, 0, 0, 1],
      ["total", 6, 2, 1, 1, 1, 1],
    ]);
    expect(rows.map((r) => r.score)).toEqual([50, 100, 60]);
    expect(formatTable(rows).split("\n")[2]).toBe("| a.ts | 4 | 1 | 1 | 1 | 1 | 0 | 50.0% |");
  });

  it("lists survivors by file and line, and reads a JSON report", () => {
    const report = {
      files: {
        "/r/b.ts": { mutants: [{ ...mutant("", "Survived", 9), fileName: undefined }] },
        "/r/a.ts": [mutant("", "Killed", 1), mutant("", "NoCoverage", 4)].reduce(
          (f, m) => ({ mutants: [...f.mutants, m] }),
          { mutants: [] as MutantResult[] },
        ),
      },
    };
    const mutants = reportMutants(report as never);
    expect(survivors(mutants, "/r")).toEqual([
      'a.ts:4:3 ConditionalExpression → "true" [NoCoverage]',
      'b.ts:9:3 ConditionalExpression → "true" [Survived]',
    ]);
  });

  it("takes groups by name, narrows one with --mutate, and makes one of a bare --mutate", () => {
    expect(parseMutationArgs(["proxy-builders", "--incremental"]).groups.map((g) => g.name)).toEqual([
      "proxy-builders",
    ]);
    const narrowed = parseMutationArgs(["tokenizer-bridge", "--mutate", "tokenizer/bridge/verdicts.ts"]);
    expect(narrowed.groups[0]!.mutate).toEqual(["tokenizer/bridge/verdicts.ts"]);
    expect(narrowed.groups[0]!.testFiles).toEqual(
      GROUPS.find((g) => g.name === "tokenizer-bridge")!.testFiles,
    );
    const custom = parseMutationArgs(["--mutate", "proxy/builders/**/*.ts"]).groups[0]!;
    expect(custom).toMatchObject({
      name: "custom",
      project: "node",
      testFiles: ["proxy/builders/**/*.test.ts"],
    });
    expect(() => parseMutationArgs(["nope"])).toThrow(/unknown group/);
    expect(parseMutationArgs(["--mutate", "a.ts,b/{c,d}.ts"]).groups[0]!.mutate).toEqual([
      "a.ts",
      "b/{c,d}.ts",
    ]);
  });

  it("every group names source and test files that exist", () => {
    for (const g of GROUPS) {
      for (const glob of [...g.mutate, ...g.testFiles].filter((x) => !x.startsWith("!"))) {
        const wild = glob.search(/[*{]/);
        const fixed = wild < 0 ? glob : glob.slice(0, glob.lastIndexOf("/", wild));
        expect(existsSync(fixed), `${g.name}: ${glob}`).toBe(true);
      }
    }
  });

  it("the Python scheduler's hand-made mutants (scripts/mutation-python.py) still apply to its sources", () => {
    const out = execFileSync("python3", ["scripts/mutation-python.py", "--check"], { encoding: "utf8" });
    expect(out).toMatch(/^(\d+) of \1 mutants apply$/m);
  });
});
