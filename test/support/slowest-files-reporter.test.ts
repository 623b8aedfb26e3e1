import { describe, expect, it } from "vitest";
import { fileSeconds, formatSlowest } from "./slowest-files-reporter";

describe("the slowest files summary", () => {
  it("lists the slowest files first with seconds and their share, at most count of them", () => {
    const lines = formatSlowest(
      [
        { file: "a.test.ts", project: "node", ms: 1_000 },
        { file: "b.test.ts", project: "e2e", ms: 6_000 },
        { file: "c.test.ts", project: "workers", ms: 3_000 },
      ],
      2,
    );
    expect(lines).toEqual([
      "slowest test files (2 of 3, 10.0 s summed over files):",
      "    6.0 s   60%  e2e      b.test.ts",
      "    3.0 s   30%  workers  c.test.ts",
    ]);
  });

  it("says nothing for a run without files", () => {
    expect(formatSlowest([])).toEqual([]);
  });
});

describe("the file-times table for the longest-first sequencer", () => {
  it("keys by project:file, rounds to whole seconds, slowest first, and leaves out files under 3 s", () => {
    const table = fileSeconds([
      { file: "a.test.ts", project: "node", ms: 2_400 },
      { file: "b.test.ts", project: "e2e", ms: 6_600 },
      { file: "c.test.ts", project: "workers", ms: 3_000 },
    ]);
    expect(table).toEqual({ "e2e:b.test.ts": 7, "workers:c.test.ts": 3 });
    expect(Object.keys(table)).toEqual(["e2e:b.test.ts", "workers:c.test.ts"]);
  });
});
