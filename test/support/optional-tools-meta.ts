/**
 * What a suite that needs optional tools records on its vitest task (`meta.optionalTools`), shared
 * by `optional-tools.ts` (which writes it in the worker) and `optional-tools-reporter.ts` (which
 * reads it in the main process). No runtime imports: `vitest.config.ts` loads the reporter.
 *
 * @module
 */

/**
 * The environment variable under which a missing tool fails its suites instead of skipping them.
 *
 * @example
 * ```ts
 * const strict = process.env[STRICT_ENV] === "1";
 * ```
 */
export const STRICT_ENV = "POLAR_TEST_REQUIRE_ALL";

/** A tool found missing, as recorded on the suite. */
export interface MissingTool {
  tool: string;
  install: string;
  reason: string;
  /** For a preferred tool: what the suite does without it. */
  without?: string;
}

/** What a suite's `meta.optionalTools` says. */
export interface OptionalToolsMeta {
  /** skipped: not run; failed: strict mode; degraded: ran without a preferred tool. */
  state: "skipped" | "failed" | "degraded";
  /** The suite's or test's own name (its children inherit the meta; the reporter dedupes by it). */
  label: string;
  missing: MissingTool[];
}

declare module "@vitest/runner" {
  interface TaskMeta {
    optionalTools?: OptionalToolsMeta;
  }
}
