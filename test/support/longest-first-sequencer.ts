/**
 * Test files longest first, so a full run does not end waiting on one long file that started last.
 *
 * Vitest runs a group's files (`sequence.groupOrder`) in the order its sequencer gives, a few at a
 * time (`maxWorkers`). Its default sequencer orders by the durations of the last run kept in its
 * cache, and without a cache (a clean clone: CI) by file size, larger first, project by project.
 * File size says little about time here: `test/e2e/python-package.test.ts` (120 lines, 7 minutes)
 * started 22nd of 33 and ended the run alone. This sequencer orders each group by the time a file
 * took: the cache's when it has one, else the committed table `test/support/file-seconds.json`
 * (seconds per `project:file`, from a full run; files under 3 s left out), else 0; ties by size,
 * larger first. Projects of one group are interleaved: the pool takes any of the group's files.
 * Scheduling the longest job first bounds a group's end at about its longest file or its mean load
 * per worker, whichever is larger.
 *
 * Refresh the table from a full run: `POLAR_TEST_FILE_SECONDS=test/support/file-seconds.json npm test`
 * (the slowest-files reporter writes it).
 *
 * @module
 */
import { readFileSync, statSync } from "node:fs";
import path from "node:path";
import { BaseSequencer, type TestSpecification } from "vitest/node";

/** The committed table: seconds per `project:relative/file.test.ts`. */
export const FILE_SECONDS_PATH = path.join(import.meta.dirname, "file-seconds.json");

/**
 * The table of file times, `{}` when it is missing or not an object of numbers.
 *
 * @example
 * ```ts
 * readFileSeconds()["e2e:test/e2e/harnesses.test.ts"]; // 549
 * ```
 */
export function readFileSeconds(file = FILE_SECONDS_PATH): Record<string, number> {
  try {
    const parsed: unknown = JSON.parse(readFileSync(file, "utf8"));
    if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) return {};
    return Object.fromEntries(
      Object.entries(parsed).filter((e): e is [string, number] => typeof e[1] === "number"),
    );
  } catch {
    return {};
  }
}

/** What the order needs of one file. */
export interface FileToOrder {
  groupOrder: number;
  /** `project:relative/path`, the table's key. */
  key: string;
  /** Expected milliseconds (cache, else table, else 0). */
  expectedMs: number;
  bytes: number;
}

/**
 * Ascending group order; within a group the longest expected first, then the larger file, then by
 * key (a stable, reproducible order).
 *
 * @example
 * ```ts
 * [a, b].sort(compareFiles);
 * ```
 */
export function compareFiles(a: FileToOrder, b: FileToOrder): number {
  return (
    a.groupOrder - b.groupOrder ||
    b.expectedMs - a.expectedMs ||
    b.bytes - a.bytes ||
    a.key.localeCompare(b.key)
  );
}

/**
 * The sequencer (`vitest.config.ts`: `sequence.sequencer`).
 *
 * @example
 * ```ts
 * defineConfig({ test: { sequence: { sequencer: LongestFirstSequencer } } });
 * ```
 */
export class LongestFirstSequencer extends BaseSequencer {
  private readonly table = readFileSeconds();

  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const root = this.ctx.config.root;
    const cache = this.ctx.cache;
    const described = files.map((spec) => {
      const key = `${spec.project.name}:${path.relative(root, spec.moduleId)}`;
      const cached = cache.getFileTestResults(key)?.duration;
      const fromTable = this.table[key];
      const expectedMs = cached ?? (fromTable === undefined ? 0 : fromTable * 1000);
      let bytes = cache.getFileStats(key)?.size;
      if (bytes === undefined) {
        try {
          bytes = statSync(spec.moduleId).size;
        } catch {
          bytes = 0;
        }
      }
      const order: FileToOrder = {
        groupOrder: spec.project.config.sequence.groupOrder ?? 0,
        key,
        expectedMs,
        bytes,
      };
      return { spec, order };
    });
    return described.sort((a, b) => compareFiles(a.order, b.order)).map((d) => d.spec);
  }
}
