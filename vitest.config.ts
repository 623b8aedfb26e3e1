import { cloudflareTest } from "@cloudflare/vitest-pool-workers";
import { defineConfig } from "vitest/config";

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
    reporters: ["default", "./test/support/optional-tools-reporter.ts"],
    projects: [
      {
        plugins: [
          cloudflareTest({
            wrangler: { configPath: "./wrangler.toml" },
            miniflare: {
              bindings: {
                POLAR_TRAINER_TOKEN: "test-trainer-token",
                POLAR_GATEWAY_TOKEN: "test-gateway-token",
                POLAR_ADMIN_TOKEN: "test-admin-token",
                // Queues named sharded-… have 4 shards (control-plane/queue/shards.test.ts).
                POLAR_QUEUE_SHARDS: "sharded-*=4",
              },
            },
          }),
        ],
        test: { name: "workers", include: ["control-plane/**/*.test.ts"] },
      },
      {
        test: {
          name: "node",
          environment: "node",
          include: ["{protocol,proxy,gateway-agent,sim,tokenizer,cli,examples,scripts}/**/*.test.ts"],
        },
      },
      {
        test: {
          name: "e2e",
          environment: "node",
          include: ["test/**/*.test.ts"],
          fileParallelism: false,
          testTimeout: 180_000,
          hookTimeout: 120_000,
        },
      },
    ],
  },
});
