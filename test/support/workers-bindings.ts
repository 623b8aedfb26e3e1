/**
 * The Worker bindings the control plane's tests run with in workerd, shared by `vitest.config.ts`
 * and the mutation-testing config (`vitest.mutation.config.ts`) so the two cannot drift apart.
 *
 * @example
 * ```ts
 * cloudflareTest({ wrangler: { configPath: "./wrangler.toml" }, miniflare: { bindings: workersTestBindings() } });
 * ```
 */
export function workersTestBindings(): Record<string, string> {
  return {
    POLAR_TRAINER_TOKEN: "test-trainer-token",
    POLAR_GATEWAY_TOKEN: "test-gateway-token",
    POLAR_ADMIN_TOKEN: "test-admin-token",
    POLAR_VIEWER_TOKEN: "test-viewer-token",
    // Queues named sharded-… have 4 shards (control-plane/queue/shards.test.ts).
    POLAR_QUEUE_SHARDS: "sharded-*=4",
    // Cases and seed of the fuzz tests (control-plane/fuzz/; npm run test:fuzz).
    POLAR_FUZZ_RUNS: process.env.POLAR_FUZZ_RUNS ?? "",
    POLAR_FUZZ_SEED: process.env.POLAR_FUZZ_SEED ?? "",
  };
}
