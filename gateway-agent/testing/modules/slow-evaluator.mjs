// A custom evaluator (loaded by module path in the tests): waits `config.delay_ms`, then gives
// reward 0.5, and per-trace rewards when `config.trace_rewards` is set.
export async function evaluate(ctx) {
  await new Promise((resolve) => setTimeout(resolve, ctx.config.delay_ms ?? 0));
  return {
    outcome_reward: 0.5,
    ...(ctx.config.trace_rewards ? { trace_rewards: ctx.config.trace_rewards } : {}),
    metadata: { waited_ms: ctx.config.delay_ms ?? 0, saw_runtime: ctx.runtime !== null },
  };
}
