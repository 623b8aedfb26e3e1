/**
 * The vitest reporter that ends a run with one line per missing optional tool: which suites were
 * skipped for it (or failed, under `POLAR_TEST_REQUIRE_ALL=1`, or ran without it), why, and the
 * command that installs it. It reads `meta.optionalTools`, which `describeWith` / `itWith` put on
 * the tasks they declare (see `optional-tools.ts`); vitest brings that meta from every worker
 * process and pool to the main process, so nothing else is shared. Used beside the default reporter.
 *
 * @module
 */
import path from "node:path";
import type { Reporter, TestModule, Vitest } from "vitest/node";
import { type OptionalToolsMeta, STRICT_ENV } from "./optional-tools-meta";

/** Everything the run recorded for one tool. */
export interface ToolSummary {
  tool: string;
  install: string;
  reasons: string[];
  skipped: string[];
  failed: string[];
  degraded: string[];
}

/** One recorded suite: the file it is in (relative to the root) and its meta. */
export interface RecordedSuite {
  file: string;
  meta: OptionalToolsMeta;
}

/**
 * Groups recorded suites by tool (a tool's children inherit the meta, hence one per file and label).
 *
 * @example
 * ```ts
 * summarizeTools([{ file: "a.test.ts", meta }])[0].skipped; // ['a.test.ts "the suite"']
 * ```
 */
export function summarizeTools(recorded: RecordedSuite[]): ToolSummary[] {
  const byTool = new Map<string, ToolSummary>();
  const seen = new Set<string>();
  for (const { file, meta } of recorded) {
    for (const m of meta.missing) {
      const key = `${m.tool}\0${file}\0${meta.label}\0${meta.state}`;
      if (seen.has(key)) continue;
      seen.add(key);
      let s = byTool.get(m.tool);
      if (!s) {
        s = { tool: m.tool, install: m.install, reasons: [], skipped: [], failed: [], degraded: [] };
        byTool.set(m.tool, s);
      }
      if (!s.reasons.includes(m.reason)) s.reasons.push(m.reason);
      const where = `${file} "${meta.label}"${m.without ? ` (${m.without})` : ""}`;
      s[meta.state].push(where);
    }
  }
  return [...byTool.values()].sort((a, b) => a.tool.localeCompare(b.tool));
}

/**
 * The summary lines: a header, then one line per tool (empty when nothing was missing).
 *
 * @example
 * ```ts
 * formatSummary(summarizeTools(recorded)).join("\n");
 * ```
 */
export function formatSummary(tools: ToolSummary[]): string[] {
  if (tools.length === 0) return [];
  const strict = tools.some((t) => t.failed.length > 0);
  const header = strict
    ? `Optional tools REQUIRED by ${STRICT_ENV}=1 but missing (${tools.length}):`
    : `Optional tools missing (${tools.length}): suites skipped or run without them (${STRICT_ENV}=1 makes this a failure):`;
  const lines = tools.map((t) => {
    const parts = [
      t.failed.length ? `FAILED ${t.failed.length}: ${t.failed.join(", ")}` : "",
      t.skipped.length ? `skipped ${t.skipped.length}: ${t.skipped.join(", ")}` : "",
      t.degraded.length ? `ran without it ${t.degraded.length}: ${t.degraded.join(", ")}` : "",
    ].filter(Boolean);
    return `  ${t.tool} — ${parts.join("; ")} — ${t.reasons.join("; ")} — install: ${t.install}`;
  });
  return [header, ...lines];
}

/**
 * Prints the optional-tools summary after the run. Wired by path in `vitest.config.ts` (vitest
 * loads it, so the config itself imports nothing of the repository).
 *
 * @example
 * ```ts
 * defineConfig({ test: { reporters: ["default", "./test/support/optional-tools-reporter.ts"] } });
 * ```
 */
export default class OptionalToolsReporter implements Reporter {
  private vitest: Vitest | undefined;

  onInit(vitest: Vitest): void {
    this.vitest = vitest;
  }

  onTestRunEnd(testModules: ReadonlyArray<TestModule>): void {
    const root = this.vitest?.config.root ?? process.cwd();
    const recorded: RecordedSuite[] = [];
    for (const mod of testModules) {
      const file = path.relative(root, mod.moduleId);
      for (const task of [...mod.children.allSuites(), ...mod.children.allTests()]) {
        const meta = task.meta().optionalTools;
        if (meta) recorded.push({ file, meta });
      }
    }
    const lines = formatSummary(summarizeTools(recorded));
    if (lines.length === 0) return;
    const log = (line: string) => (this.vitest ? this.vitest.logger.log(line) : console.log(line));
    log("");
    for (const line of lines) log(line);
  }
}
