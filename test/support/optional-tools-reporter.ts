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

/** A suite recorded for a tool: where it is, and (for a preferred tool) what it did without it. */
export interface SuiteRef {
  file: string;
  label: string;
  without?: string;
}

/** Everything the run recorded for one tool. */
export interface ToolSummary {
  tool: string;
  install: string;
  reasons: string[];
  skipped: SuiteRef[];
  failed: SuiteRef[];
  degraded: SuiteRef[];
}

/** One recorded suite: the file it is in (relative to the root) and its meta. */
export interface RecordedSuite {
  file: string;
  meta: OptionalToolsMeta;
}

/**
 * Groups recorded suites by tool (a suite's children inherit its meta, hence one per file and label).
 *
 * @example
 * ```ts
 * summarizeTools([{ file: "a.test.ts", meta }])[0].skipped; // [{ file: "a.test.ts", label: "the suite" }]
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
      s[meta.state].push({ file, label: meta.label, ...(m.without ? { without: m.without } : {}) });
    }
  }
  const tools = [...byTool.values()].sort((a, b) => a.tool.localeCompare(b.tool));
  const order = (a: SuiteRef, b: SuiteRef) => a.file.localeCompare(b.file) || a.label.localeCompare(b.label);
  for (const t of tools) for (const list of [t.skipped, t.failed, t.degraded]) list.sort(order);
  return tools;
}

/** `file "a", "b" (without); file2 "c"`: the suites of one state, grouped by file. */
function suites(refs: SuiteRef[]): string {
  const groups = new Map<string, SuiteRef[]>();
  for (const r of refs) {
    const key = `${r.file}\0${r.without ?? ""}`;
    groups.set(key, [...(groups.get(key) ?? []), r]);
  }
  return [...groups.values()]
    .map((g) => {
      const without = g[0]!.without ? ` (${g[0]!.without})` : "";
      return `${g[0]!.file} ${g.map((r) => `"${r.label}"`).join(", ")}${without}`;
    })
    .join("; ");
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
      t.failed.length ? `FAILED ${t.failed.length}: ${suites(t.failed)}` : "",
      t.skipped.length ? `skipped ${t.skipped.length}: ${suites(t.skipped)}` : "",
      t.degraded.length ? `ran without it ${t.degraded.length}: ${suites(t.degraded)}` : "",
    ].filter(Boolean);
    return `  ${t.tool} — ${parts.join(" | ")} — ${t.reasons.join("; ")} — install: ${t.install}`;
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
