import { cloudflareTest } from "@cloudflare/vitest-pool-workers";
import { defineConfig } from "vitest/config";
import { workersTestBindings } from "./test/support/workers-bindings.ts";

/**
 * The vitest configuration Stryker runs the tests with (`stryker.config.mjs`, `npm run
 * test:mutation`): the `node` and `workers` projects of `vitest.config.ts` without its reporters,
 * its probe cache and its web build (Stryker runs in a copy of the repository, `.stryker-tmp/`,
 * where the dashboard's build is copied with the rest: the workers project needs `web/dist` to
 * exist, so run `npm run build:web` once before mutating control-plane modules).
 *
 * Which test files run is chosen per group by `scripts/mutation.ts` (Stryker's `testFiles`).
 */
export default defineConfig({
  test: {
    projects: [
      {
        plugins: [
          cloudflareTest({
            wrangler: { configPath: "./wrangler.toml" },
            miniflare: { bindings: workersTestBindings() },
          }),
        ],
        test: { name: "workers", include: ["control-plane/**/*.test.ts"], testTimeout: 60_000 },
      },
      {
        test: {
          name: "node",
          environment: "node",
          include: [
            "{protocol,proxy,gateway-agent,sim,tokenizer,cli,examples,scripts,clients,web}/**/*.test.ts",
          ],
          testTimeout: 60_000,
          // Stryker runs a group's tests once per mutant in one worker: without isolation the
          // modules a file imports (the tokenizer and its vocabulary, a few seconds to load on a
          // busy machine) are loaded once per run instead of once per mutant. Mutants are switched
          // on at run time (a global the instrumented code reads), so nothing needs reloading.
          isolate: false,
        },
      },
    ],
  },
});
