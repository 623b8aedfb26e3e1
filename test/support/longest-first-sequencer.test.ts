import { existsSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import {
  compareFiles,
  FILE_SECONDS_PATH,
  type FileToOrder,
  readFileSeconds,
} from "./longest-first-sequencer";

const file = (key: string, expectedMs: number, bytes = 100, groupOrder = 0): FileToOrder => ({
  key,
  expectedMs,
  bytes,
  groupOrder,
});

describe("the longest-first order", () => {
  it("keeps groups in their order and puts the longest expected file of a group first, whatever its project", () => {
    const files = [
      file("node:short.test.ts", 1_000, 9_000),
      file("e2e:late-group.test.ts", 900_000, 100, 2),
      file("workers:long.test.ts", 60_000, 10),
      file("e2e:longest.test.ts", 500_000, 50, 1),
      file("e2e:mid.test.ts", 200_000, 5_000, 1),
    ];
    expect(files.sort(compareFiles).map((f) => f.key)).toEqual([
      "workers:long.test.ts",
      "node:short.test.ts",
      "e2e:longest.test.ts",
      "e2e:mid.test.ts",
      "e2e:late-group.test.ts",
    ]);
  });

  it("orders files of unknown time by size, larger first, then by name", () => {
    const files = [
      file("node:b.test.ts", 0, 10),
      file("node:a.test.ts", 0, 10),
      file("node:c.test.ts", 0, 99),
    ];
    expect(files.sort(compareFiles).map((f) => f.key)).toEqual([
      "node:c.test.ts",
      "node:a.test.ts",
      "node:b.test.ts",
    ]);
  });
});

describe("the committed table", () => {
  it("names files that exist, each with a whole number of seconds", () => {
    const table = readFileSeconds(FILE_SECONDS_PATH);
    expect(Object.keys(table).length).toBeGreaterThan(10);
    for (const [key, seconds] of Object.entries(table)) {
      const [project, path] = key.split(":") as [string, string];
      expect(["workers", "node", "e2e", "browser", "e2e-timed"], key).toContain(project);
      expect(existsSync(join(import.meta.dirname, "..", "..", path)), key).toBe(true);
      expect(Number.isInteger(seconds) && seconds > 0, key).toBe(true);
    }
  });

  it("reads a missing, broken or non-object file as empty, and skips entries that are not numbers", () => {
    const dir = mkdtempSync(join(tmpdir(), "polar-seconds-"));
    expect(readFileSeconds(join(dir, "missing.json"))).toEqual({});
    writeFileSync(join(dir, "broken.json"), "{");
    expect(readFileSeconds(join(dir, "broken.json"))).toEqual({});
    writeFileSync(join(dir, "array.json"), "[1]");
    expect(readFileSeconds(join(dir, "array.json"))).toEqual({});
    writeFileSync(join(dir, "mixed.json"), JSON.stringify({ "e2e:a.test.ts": 5, "e2e:b.test.ts": "5" }));
    expect(readFileSeconds(join(dir, "mixed.json"))).toEqual({ "e2e:a.test.ts": 5 });
  });
});
