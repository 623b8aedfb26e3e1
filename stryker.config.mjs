// @ts-check
/**
 * Mutation testing (StrykerJS with its vitest runner): what is mutated and which tests run are set
 * per group by `scripts/mutation.ts` (`npm run test:mutation -- GROUP`); this file holds what every
 * group shares. docs/testing.md ("Mutation testing") says how to run it and what it found.
 *
 * @type {import("@stryker-mutator/api/core").PartialStrykerOptions}
 */
const config = {
  testRunner: "vitest",
  plugins: ["@stryker-mutator/vitest-runner", "./scripts/mutation-log-reporter.mjs"],
  vitest: { configFile: "vitest.mutation.config.ts", related: false },
  // Which tests cover which mutant is recorded in the first (dry) run; each mutant then runs only
  // the tests that reached it. `scripts/mutation.ts` turns this off for the workers project.
  coverageAnalysis: "perTest",
  // A two-core machine shared with other work: one test runner, generous timeouts (a mutant that
  // loops is caught by the timeout, a slow machine should not be).
  concurrency: 1,
  timeoutFactor: 3,
  timeoutMS: 20_000,
  dryRunTimeoutMinutes: 20,
  // The sandbox (a copy of the repository, node_modules linked) and the reports stay out of git.
  tempDirName: ".stryker-tmp",
  ignorePatterns: [
    "reports",
    ".polar",
    ".polar-cli",
    ".wrangler",
    "bench/report.json",
    "clients/python/build",
    "**/__pycache__",
  ],
  reporters: ["progress", "clear-text", "json", "html", "mutant-log"],
  clearTextReporter: { allowColor: false, logTests: false, reportScoreTable: true },
  thresholds: { high: 85, low: 70, break: null },
  // Mutants of module-level code (constants, tables) would need every test file reloaded for
  // each; they are left out (counted as "Ignored"). scripts/mutation.ts turns this off when
  // coverage analysis is off (Stryker allows it only with "perTest").
  ignoreStatic: true,
};

export default config;
