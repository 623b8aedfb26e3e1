/**
 * Which trajectory builder a session gets. A task that names one (`builder: {strategy, config}`)
 * gets it; a task that leaves it unset gets the default of the gateway's engine: `conversation` in
 * token mode (`sglang`: every turn is bridged onto the previous one's exact ids, so a session is one
 * trace per chain), `per_request` with a chat-completions engine (`sglang-openai`, `vllm`: the
 * engine re-renders the history, so there is no chain to follow). The control plane cannot make
 * this choice: it does not know which engine the gateway that takes the session runs.
 *
 * @module
 */
import type { StrategySpec } from "../protocol";
import { defaultBuilderFor } from "../proxy";

/** What the trajectory's `metadata.builder_choice` records: the builder that ran and why. */
export interface BuilderChoice {
  strategy: string;
  /** `task`: the task named it; `engine_default`: the task left it unset. */
  source: "task" | "engine_default";
  /** The gateway's engine (the reason for an `engine_default`). */
  engine: string;
}

/**
 * The task's builder when it names one, else the engine's default, with the reason.
 *
 * @example
 * ```ts
 * chooseBuilder(null, "sglang");
 * // { spec: { strategy: "conversation", config: {} },
 * //   choice: { strategy: "conversation", source: "engine_default", engine: "sglang" } }
 * ```
 */
export function chooseBuilder(
  task: StrategySpec | null,
  engine: string,
): { spec: StrategySpec; choice: BuilderChoice } {
  const spec = task ?? { strategy: defaultBuilderFor(engine), config: {} };
  return { spec, choice: { strategy: spec.strategy, source: task ? "task" : "engine_default", engine } };
}
