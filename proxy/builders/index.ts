/**
 * Registry of trajectory builders: strategy name → builder.
 *
 * @module
 */
import { UnknownBuilderError } from "../errors";
import { buildPerRequest, type TrajectoryBuilder } from "./per-request";

export { type BuildContext, buildPerRequest, type TrajectoryBuilder, traceFromRecord } from "./per-request";

const BUILDERS: ReadonlyMap<string, TrajectoryBuilder> = new Map([["per_request", buildPerRequest]]);

/** Names of the registered builders. */
export const BUILDER_NAMES: readonly string[] = [...BUILDERS.keys()];

/**
 * The builder of a strategy; throws {@link UnknownBuilderError} for an unknown name.
 *
 * @example
 * ```ts
 * const build = getBuilder(task.builder.strategy);
 * const trajectory = build(proxy.completions(sessionId), { session_id, task_id, config: task.builder.config });
 * ```
 */
export function getBuilder(strategy: string): TrajectoryBuilder {
  const builder = BUILDERS.get(strategy);
  if (!builder) throw new UnknownBuilderError(strategy, BUILDER_NAMES);
  return builder;
}
