// A custom evaluator (loaded by module path in the tests) that returns a reward no trainer may
// see: `config.reward` "NaN" / "Infinity" become those numbers, anything else is returned as is.
export async function evaluate(ctx) {
  const r = ctx.config.reward;
  const outcome = r === "NaN" ? Number.NaN : r === "Infinity" ? Number.POSITIVE_INFINITY : r;
  return { outcome_reward: outcome, metadata: { asked: r } };
}
