import { mkdtempSync, rmSync } from "node:fs";
import { availableParallelism, tmpdir } from "node:os";
import { join } from "node:path";
import { cloudflareTest } from "@cloudflare/vitest-pool-workers";
import { defineConfig } from "vitest/config";
import { ensureWebBuild } from "./cli/web-build.ts";
import { LongestFirstSequencer } from "./test/support/longest-first-sequencer.ts";
import { workersTestBindings } from "./test/support/workers-bindings.ts";

// The workers pool reads wrangler.toml, whose `[assets]` folder (the dashboard's build) must exist.
await ensureWebBuild();

// The tools a suite needs are probed once per run, not once per file (test/support/optional-tools.ts
// `probe`): the test files' processes inherit this folder, where a working tool is noted.
if (!process.env.POLAR_TEST_PROBE_CACHE) {
  const dir = mkdtempSync(join(tmpdir(), "polar-probes-"));
  process.env.POLAR_TEST_PROBE_CACHE = dir;
  process.on("exit", () => rmSync(dir, { recursive: true, force: true }));
}

/**
 * End-to-end files whose assertions bound how long something takes (a silent socket closed at
 * 3 pings, a reconnect within one dial timeout, a kill landing mid-batch, a queue wait past
 * `timeout_seconds`, a fence drain): they run one at a time, after the others, so a second stack
 * starting beside them cannot stretch what they measure.
 */
const TIMED_E2E = [
  "test/e2e/flaky-link.test.ts",
  "test/e2e/fence.test.ts",
  "test/e2e/control-plane-recovery.test.ts",
  "test/e2e/fleet-overflow.test.ts",
  "test/e2e/launcher-lifetime.test.ts",
];

/**
 * Test files run at a time. Vitest's default on an N-core machine is N−1 (one on two cores), but
 * most of a test's time here is spent waiting on child processes (workerd, the gateway, harness
 * CLIs, pytest): with two files at a time a two-core machine was busy only about 55% of the run
 * (user+sys over wall), so three at a time. The timing-bound files still run alone
 * (`e2e-timed`). `--maxWorkers` on the command line overrides.
 */
const PARALLEL = Math.max(3, availableParallelism() - 1);

/**
 * `expect.poll` waits for a state the code reaches on its own time; vitest's default gives up
 * after 1 s, which a loaded two-core machine passes (a cold Durable Object, a child process's
 * start). Waiting longer only delays a failure, never hides one: a poll passes only once its
 * condition holds. A test whose subject is a deadline sets its own `timeout`.
 */
const EXPECT = { poll: { timeout: 10_000, interval: 50 } };

/**
 * Three layers, each on its real runtime:
 * - `workers`: the control plane's Worker and Durable Objects inside workerd (vitest pool).
 * - `node`: unit tests of the Node parts (protocol, proxy, gateway agent, sim engine, CLI).
 * - `e2e`: whole-system tests that start `wrangler dev`, the sim engine and a gateway as processes.
 *
 * Suites that need optional system tools declare them with `describeWith` / `itWith`
 * (test/support/optional-tools.ts); the second reporter ends the run with one line per missing
 * tool. `POLAR_TEST_REQUIRE_ALL=1` (CI) turns each such skip into a failure.
 */
export default defineConfig({
  test: {
    reporters: [
      "default",
      "./test/support/optional-tools-reporter.ts",
      "./test/support/slowest-files-reporter.ts",
    ],
    maxWorkers: PARALLEL,
    // Each group's longest files first (a clean clone has no vitest cache to order by).
    sequence: { sequencer: LongestFirstSequencer },
    projects: [
      {
        plugins: [
          cloudflareTest({
            wrangler: { configPath: "./wrangler.toml" },
            miniflare: { bindings: workersTestBindings() },
          }),
        ],
        test: {
          name: "workers",
          expect: EXPECT,
          include: ["control-plane/**/*.test.ts"],
          // A cold Durable Object's first request (its migrations) can pass 5 s on a loaded machine.
          testTimeout: 30_000,
        },
      },
      {
        test: {
          name: "node",
          expect: EXPECT,
          environment: "node",
          include: [
            "{protocol,proxy,gateway-agent,sim,tokenizer,cli,examples,scripts,clients,web}/**/*.test.ts",
          ],
          // Real tokenizers, sockets and child processes on a shared machine: 5 s is too tight.
          testTimeout: 30_000,
          // The files of a worker share one process and its loaded modules (the tokenizer, the
          // proxy, the gateway's sources) instead of each starting a fresh one: on a two-core
          // machine this layer took 323 s of CPU isolated and 196 to 209 s without (2026-12-06,
          // 146 to 150 files; summed import time 214 s → 31 to 65 s). Files that swap a module
          // for a test double re-import what they test (`vi.resetModules()`, journal.test.ts) or
          // patch the builtin's exports for every importer (report-channel.test.ts); the mutation
          // runs (vitest.mutation.config.ts) have run this layer without isolation since they began.
          isolate: false,
        },
      },
      {
        test: {
          name: "e2e",
          expect: EXPECT,
          environment: "node",
          include: ["test/**/*.test.ts"],
          exclude: [...TIMED_E2E, "test/browser/**"],
          // After the unit layers (their files would otherwise share the workers with stacks).
          sequence: { groupOrder: 1 },
          testTimeout: 180_000,
          hookTimeout: 120_000,
        },
      },
      {
        test: {
          // The dashboard in a real browser (playwright-core driving the system's chromium) against
          // a real local stack.
          name: "browser",
          expect: EXPECT,
          environment: "node",
          include: ["test/browser/**/*.test.ts"],
          sequence: { groupOrder: 1 },
          testTimeout: 180_000,
          hookTimeout: 120_000,
        },
      },
      {
        test: {
          name: "e2e-timed",
          expect: EXPECT,
          environment: "node",
          include: TIMED_E2E,
          fileParallelism: false,
          sequence: { groupOrder: 2 },
          testTimeout: 180_000,
          hookTimeout: 120_000,
        },
      },
    ],
  },
});
