/**
 * A vitest reporter that ends the run with its ten slowest test files (wall time of each file,
 * its project), so a run's cost is visible where it ends and a file that grew stands out
 * (docs/testing.md keeps the figures of a full run).
 *
 * @module
 */
import { writeFileSync } from "node:fs";
import path from "node:path";
import type { Reporter, TestModule, Vitest } from "vitest/node";

/** One test file's time, as the summary lists it. */
export interface FileTime {
  file: string;
  project: string;
  ms: number;
}

/**
 * The summary's lines: a heading and the `count` slowest files, slowest first, with seconds and
 * their share of the summed file time. Empty for no files.
 *
 * @example
 * ```ts
 * formatSlowest([{ file: "a.test.ts", project: "e2e", ms: 1500 }]);
 * // ["slowest test files (1 of 1, 1.5 s summed over files):", "    1.5 s  100%  e2e  a.test.ts"]
 * ```
 */
export function formatSlowest(files: FileTime[], count = 10): string[] {
  if (files.length === 0) return [];
  const total = files.reduce((sum, f) => sum + f.ms, 0);
  const slowest = [...files].sort((a, b) => b.ms - a.ms || a.file.localeCompare(b.file)).slice(0, count);
  const width = Math.max(...slowest.map((f) => f.project.length));
  return [
    `slowest test files (${slowest.length} of ${files.length}, ${(total / 1000).toFixed(1)} s summed over files):`,
    ...slowest.map(
      (f) =>
        `${`${(f.ms / 1000).toFixed(1)} s`.padStart(9)}  ${`${Math.round((100 * f.ms) / Math.max(total, 1))}%`.padStart(4)}  ${f.project.padEnd(width)}  ${f.file}`,
    ),
  ];
}

/**
 * The table the longest-first sequencer reads (`test/support/file-seconds.json`): whole seconds per
 * `project:file`, slowest first, files under `minSeconds` left out (their order hardly matters).
 *
 * @example
 * ```ts
 * fileSeconds([{ file: "a.test.ts", project: "e2e", ms: 4_400 }]); // { "e2e:a.test.ts": 4 }
 * ```
 */
export function fileSeconds(files: FileTime[], minSeconds = 3): Record<string, number> {
  return Object.fromEntries(
    [...files]
      .sort((a, b) => b.ms - a.ms || a.file.localeCompare(b.file))
      .map((f) => [`${f.project}:${f.file}`, Math.round(f.ms / 1000)] as const)
      .filter(([, seconds]) => seconds >= minSeconds),
  );
}

/**
 * The reporter (`vitest.config.ts` names it beside the default one). With
 * `POLAR_TEST_FILE_SECONDS=FILE` it also writes {@link fileSeconds} of the run to FILE.
 *
 * @example
 * ```ts
 * defineConfig({ test: { reporters: ["default", "./test/support/slowest-files-reporter.ts"] } });
 * ```
 */
export default class SlowestFilesReporter implements Reporter {
  private vitest: Vitest | undefined;

  onInit(vitest: Vitest): void {
    this.vitest = vitest;
  }

  onTestRunEnd(testModules: ReadonlyArray<TestModule>): void {
    const root = this.vitest?.config.root ?? process.cwd();
    const files = testModules.map((mod) => ({
      file: path.relative(root, mod.moduleId),
      project: mod.project.name,
      ms: mod.diagnostic().duration,
    }));
    const log = (line: string) => (this.vitest ? this.vitest.logger.log(line) : console.log(line));
    const out = process.env.POLAR_TEST_FILE_SECONDS;
    if (out) {
      writeFileSync(out, `${JSON.stringify(fileSeconds(files), null, 2)}\n`);
      log(`file times written to ${out}`);
    }
    const lines = formatSlowest(files);
    if (lines.length === 0) return;
    log("");
    for (const line of lines) log(line);
  }
}
