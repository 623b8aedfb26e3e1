/**
 * Registry of trajectory builders: strategy name → builder. Built-ins are `per_request`,
 * `prefix_merging` and `conversation` (token-mode records); custom builders are registered in code ({@link registerBuilder}) or loaded by
 * module path (`path/to/module.js:exportName`, upstream's `module:Class` convention) with
 * {@link loadBuilder}.
 *
 * @module
 */
import path from "node:path";
import { pathToFileURL } from "node:url";
import { BUILDER_STRATEGIES, type BuilderStrategy, isModulePath, type JsonObject } from "../../protocol";
import { UnknownBuilderError } from "../errors";
import { conversationBuilder } from "./conversation";
import { type BuildContext, buildPerRequest, type TrajectoryBuilder } from "./per-request";
import { buildPrefixMerging } from "./prefix-merging";

export { type BuildContext, buildPerRequest, type TrajectoryBuilder, traceFromRecord } from "./per-request";
export { buildPrefixMerging, detectEndOfTurn, groupChains } from "./prefix-merging";

// Typed against the shared list of `protocol/names.ts`: every strategy a task may name has a builder.
const BUILTIN: Record<BuilderStrategy, TrajectoryBuilder> = {
  per_request: buildPerRequest,
  prefix_merging: buildPrefixMerging,
  // Token mode (engine `sglang`): one trace per bridged chain, see docs/token-mode.md.
  conversation: conversationBuilder,
};
const BUILDERS = new Map<string, TrajectoryBuilder>(Object.entries(BUILTIN));

/** Names of the built-in builders. */
export const BUILDER_NAMES: readonly string[] = BUILDER_STRATEGIES;

/**
 * The builder for records of an engine when nobody named one: `conversation` in token mode
 * (`sglang`: each turn is bridged onto the previous one's exact ids, so a session is one trace per
 * chain), `per_request` with a chat-completions engine (`sglang-openai`, `vllm`: the engine
 * re-renders the history, there is no chain to follow).
 *
 * @example
 * ```ts
 * defaultBuilderFor("sglang"); // "conversation"
 * defaultBuilderFor("vllm"); // "per_request"
 * ```
 */
export function defaultBuilderFor(engine: string): string {
  return engine === "sglang" ? "conversation" : "per_request";
}

/**
 * The builder of a strategy (built-in, registered or loaded before); throws
 * {@link UnknownBuilderError} for an unknown name.
 *
 * @example
 * ```ts
 * const build = getBuilder(task.builder.strategy);
 * const trajectory = build(proxy.completions(sessionId), { session_id, task_id, config: task.builder.config });
 * ```
 */
export function getBuilder(strategy: string): TrajectoryBuilder {
  const builder = BUILDERS.get(strategy);
  if (!builder) throw new UnknownBuilderError(strategy, [...BUILDERS.keys()]);
  return builder;
}

/**
 * Registers a custom builder under a name, for in-process use (the proxy's own build route, tests).
 * A task submitted to the control plane must name a built-in or a module path.
 *
 * @example
 * ```ts
 * registerBuilder("last_only", (records, ctx) => buildPerRequest(records.slice(-1), ctx));
 * ```
 */
export function registerBuilder(name: string, builder: TrajectoryBuilder): void {
  BUILDERS.set(name, builder);
}

/** A class-style builder, as upstream's: constructed with the config, then `build(records, ctx)`. */
type BuilderClass = new (config: JsonObject) => { build: TrajectoryBuilder };

/**
 * The builder of a strategy, loading `module:export` specs on first use (relative module paths are
 * resolved from the working directory). The export is a builder function, an object with a
 * `build` method, or a class constructed with the task's config that has one.
 *
 * @example
 * ```ts
 * const build = await loadBuilder("./my-builders.ts:lastTurnOnly");
 * ```
 */
export async function loadBuilder(strategy: string): Promise<TrajectoryBuilder> {
  const known = BUILDERS.get(strategy);
  if (known) return known;
  if (!isModulePath(strategy)) throw new UnknownBuilderError(strategy, [...BUILDERS.keys()]);
  // `file.mjs:export`, or a bare `./file.mjs` for its default export.
  const at = strategy.lastIndexOf(":");
  const modulePath = at > 0 ? strategy.slice(0, at) : strategy;
  const exportName = (at > 0 ? strategy.slice(at + 1) : "") || "default";
  const specifier =
    modulePath.startsWith(".") || path.isAbsolute(modulePath)
      ? pathToFileURL(path.resolve(modulePath)).href
      : modulePath;
  const mod = (await import(specifier)) as Record<string, unknown>;
  const exported = mod[exportName];
  let builder: TrajectoryBuilder;
  if (
    typeof exported === "function" &&
    typeof (exported as { prototype?: { build?: unknown } }).prototype?.build === "function"
  ) {
    const Cls = exported as BuilderClass;
    builder = (records, ctx: BuildContext) => new Cls(ctx.config).build(records, ctx);
  } else if (typeof exported === "function") {
    builder = exported as TrajectoryBuilder;
  } else if (exported && typeof (exported as { build?: unknown }).build === "function") {
    const obj = exported as { build: TrajectoryBuilder };
    builder = (records, ctx) => obj.build(records, ctx);
  } else {
    throw new UnknownBuilderError(strategy, [...BUILDERS.keys()]);
  }
  BUILDERS.set(strategy, builder);
  return builder;
}
