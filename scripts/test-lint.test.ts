import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { testLint } from "./test-lint";

const scratch = mkdtempSync(path.join(tmpdir(), "polar-test-lint-"));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

describe("testLint", () => {
  it("finds un-awaited promises and promise-valued assertions in test files, and passes handled ones", () => {
    mkdirSync(path.join(scratch, "src"), { recursive: true });
    writeFileSync(
      path.join(scratch, "tsconfig.json"),
      JSON.stringify({
        compilerOptions: {
          target: "ES2022",
          module: "ESNext",
          moduleResolution: "Bundler",
          strict: true,
          noEmit: true,
        },
        include: ["src"],
      }),
    );
    const assertion =
      "interface Chain { toThrow(m: string): Promise<void> }\n" +
      "declare function expectRejects(p: Promise<unknown>): Chain;\n";
    writeFileSync(
      path.join(scratch, "src", "a.test.ts"),
      `${assertion}async function step(): Promise<number> { return 1; }\n` +
        "export async function body() {\n" +
        '  expectRejects(Promise.reject(new Error("x"))).toThrow("x");\n' + // line 5: floating
        "  step();\n" + // line 6: floating
        "  await step();\n" +
        "  void step();\n" +
        "  step().catch(() => {});\n" +
        "  step().then(() => {}, () => {});\n" +
        "  step().then(() => {});\n" + // line 11: no rejection handler
        "  const kept = step();\n" +
        "  await kept;\n" +
        "}\n",
    );
    writeFileSync(path.join(scratch, "src", "b.ts"), "export async function f() {}\nf();\n");
    const { floatingPromises } = testLint(["tsconfig.json"], scratch);
    expect(floatingPromises.map(({ file, line }) => `${file}:${line}`)).toEqual([
      "src/a.test.ts:5",
      "src/a.test.ts:6",
      "src/a.test.ts:11",
    ]);
  });

  it("finds an expect with no matcher and a matcher named but not called, and passes finished ones", () => {
    const dir = path.join(scratch, "expects");
    mkdirSync(path.join(dir, "src"), { recursive: true });
    writeFileSync(
      path.join(dir, "tsconfig.json"),
      JSON.stringify({ compilerOptions: { strict: true, noEmit: true, target: "ES2022" }, include: ["src"] }),
    );
    writeFileSync(
      path.join(dir, "src", "c.test.ts"),
      "interface M { toBe(v: unknown): void; toBeTruthy(): void; not: M }\n" +
        "declare const expect: ((v: unknown) => M) & { soft(v: unknown): M; assertions(n: number): void };\n" +
        "expect(1);\n" + // line 3
        "expect(1).toBeTruthy;\n" + // line 4
        "expect(1).not.toBe;\n" + // line 5
        "expect.soft(2);\n" + // line 6
        "expect(1).toBe(1);\n" +
        "expect(1).not.toBe(2);\n" +
        "expect.soft(2).toBeTruthy();\n" +
        "expect.assertions(1);\n",
    );
    const { unfinishedExpects } = testLint(["tsconfig.json"], dir);
    expect(unfinishedExpects.map(({ file, line }) => `${file}:${line}`)).toEqual([
      "src/c.test.ts:3",
      "src/c.test.ts:4",
      "src/c.test.ts:5",
      "src/c.test.ts:6",
    ]);
  });
});
