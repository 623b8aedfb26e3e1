/**
 * The `conversation` trajectory builder: one trace per chain of bridged turns. Sampled tokens are
 * trained (mask 1, their logprobs); bridged tokens (tool results, user turns, template glue, an
 * end-of-turn token the sampler never produced) are context (mask 0, logprob 0.0). Because the
 * bridge built every prompt as the previous prompt + sampled ids + bridged ids, a chain is one
 * sequence with no re-tokenised text anywhere. Image turns are in the engine's space: their
 * `prompt_ids` are the ids SGLang ran, each image pad expanded by its processor; a turn whose ids
 * are not proven (flag `image_prompt_unverified`) makes its trace `token_exact: false`.
 *
 * Pure: turns in, traces out.
 *
 * @module
 */
import {
  CONVERSATION_TRACES,
  type CompletionRecord,
  type JsonObject,
  type RoutedExperts,
  stitchRoutedExperts,
  type Trace,
  type Trajectory,
} from "../../protocol";
import { BRIDGE_FLAGS, type BridgedTurn, type BridgeFlag, emptyFlagCounts } from "../../tokenizer/bridge";
import type { ChatMessage } from "../../tokenizer/chat-tokenizer";
import { recordVersionSegments } from "./per-request";

/** The part of a turn the builder reads (a {@link BridgedTurn}, or one rebuilt from a record). */
export type ConversationTurn = Pick<
  BridgedTurn,
  | "turn_id"
  | "parent_turn_id"
  | "verdict"
  | "reason"
  | "flags"
  | "prompt_ids"
  | "sampled_ids"
  | "sampled_logprobs"
  | "finish_reason"
  | "messages"
  | "tools"
  | "assistant_message"
  | "provenance"
> & {
  /** The call's routed experts (MoE routing replay), when the proxy recorded them. */
  routed_experts?: RoutedExperts;
};

/**
 * The turns cannot form chains: an unknown parent, a parent listed after its child, a prompt that
 * does not extend its parent's prompt + sampled ids, misaligned logprobs, or a record without
 * bridge metadata.
 *
 * @example
 * ```ts
 * try { buildConversationTraces(turns); } catch (e) { e instanceof ConversationBuildError; }
 * ```
 */
export class ConversationBuildError extends Error {
  override readonly name = "ConversationBuildError";
}

function startsWith(ids: readonly number[], prefix: readonly number[]): boolean {
  if (prefix.length > ids.length) return false;
  for (let i = 0; i < prefix.length; i++) if (ids[i] !== prefix[i]) return false;
  return true;
}

function pathTo(leaf: ConversationTurn, byId: Map<string, ConversationTurn>): ConversationTurn[] {
  const path: ConversationTurn[] = [];
  for (let t: ConversationTurn | undefined = leaf; t; ) {
    path.unshift(t);
    if (t.parent_turn_id === null) break;
    const parent = byId.get(t.parent_turn_id);
    if (!parent)
      throw new ConversationBuildError(`${t.turn_id}: parent ${t.parent_turn_id} is not among the turns`);
    t = parent;
  }
  return path;
}

/**
 * One trace per chain (root-to-leaf path of the turn tree), in the order the leaves were
 * committed. `metadata.token_exact` is false when a turn of the chain carries
 * `image_prompt_unverified`. When the session branched (two children of one turn with different
 * prompts), the shared turns appear in both traces but are trained once: in the later trace their
 * sampled tokens have mask 0 (their logprobs are kept). A leaf that a later call of the same
 * request replaced (a retry) is in no trace. Trace metadata lists each turn's provenance and
 * offsets in `response_ids`.
 *
 * @example
 * ```ts
 * const [trace] = buildConversationTraces(bridge.turns());
 * // trace.prompt_ids = first prompt; trace.response_ids = sampled₀ + bridged₁ + sampled₁ + …
 * ```
 */
export function buildConversationTraces(
  turns: readonly ConversationTurn[],
  traces: ConversationTraces = "leaves",
): Trace[] {
  const { byId, hasChild } = indexTurns(turns);
  const retried = retriedTurns(turns, hasChild);
  // Turns already trained in an earlier trace (a branched turn's shared ancestors).
  const trained = new Set<string>();
  const leaves = turns.filter((t) => !hasChild.has(t.turn_id) && !retried.has(t.turn_id));
  if (traces === "per_turn") {
    // Every turn the session went on from or ended with, as its own sample: its whole prompt
    // (the chain so far) as context, its sampled ids as the response.
    return turns
      .filter((t) => !retried.has(t.turn_id))
      .map((t, i) => chainTrace([t], i, trained, pathTo(t, byId)));
  }
  const paths = leaves.map((leaf) => pathTo(leaf, byId));
  if (traces === "longest") {
    // The chain of most turns (of most tokens on a tie; the later one on a second tie).
    const tokens = (p: ConversationTurn[]) => p.at(-1)!.prompt_ids.length + p.at(-1)!.sampled_ids.length;
    const best = paths.reduce<ConversationTurn[] | null>(
      (a, p) => (!a || p.length > a.length || (p.length === a.length && tokens(p) >= tokens(a)) ? p : a),
      null,
    );
    return best ? [chainTrace(best, 0, trained)] : [];
  }
  return paths.map((path, chainIndex) => chainTrace(path, chainIndex, trained));
}

/**
 * Which traces the `conversation` builder emits (its config `traces`):
 * - `leaves` (default): one per chain, root to each leaf; a branched session gives several, their
 *   shared turns trained once;
 * - `longest`: the one chain of most turns;
 * - `per_turn`: one per turn, its whole prompt as context and its sampled ids as the response
 *   (a trainer that wants per-call samples with their prefix).
 * Retried calls' replaced answers are in none.
 */
export type ConversationTraces = (typeof CONVERSATION_TRACES)[number];

/**
 * The leaf turns a later call of the same request replaced: a harness that retries a call (its
 * client timed out, the answer failed to parse) sends the same prompt from the same parent again
 * and goes on from the new answer. The earlier answer was never part of the episode; as a trace of
 * its own it would split the trajectory and train a reply the rest of the session never saw.
 */
function retriedTurns(turns: readonly ConversationTurn[], hasChild: ReadonlySet<string>): Set<string> {
  const retried = new Set<string>();
  const latest = new Map<string, ConversationTurn>();
  for (const t of turns) {
    const key = `${t.parent_turn_id ?? ""}|${t.prompt_ids.join(",")}`;
    const earlier = latest.get(key);
    if (earlier && !hasChild.has(earlier.turn_id)) retried.add(earlier.turn_id);
    latest.set(key, t);
  }
  return retried;
}

/** How a session's turns formed chains (the trajectory's `metadata.tree`). */
export interface TurnTreeCounts {
  turns: number;
  /** Traces built: one per kept leaf. */
  chains: number;
  /** Turns with more than one child: where the session branched (each branch is a chain). */
  branch_points: number;
  /** Answers a later call of the same request replaced, left out of every trace. */
  retries_dropped: number;
  /** Turns that start a chain of their own (no parent): the first, and every break. */
  roots: number;
}

/**
 * Counts the shape of a session's turn tree, as {@link buildConversationTraces} reads it.
 *
 * @example
 * ```ts
 * turnTreeCounts(turns); // { turns: 5, chains: 1, branch_points: 0, retries_dropped: 1, roots: 1 }
 * ```
 */
export function turnTreeCounts(turns: readonly ConversationTurn[]): TurnTreeCounts {
  const { hasChild } = indexTurns(turns);
  const retried = retriedTurns(turns, hasChild);
  const children = new Map<string, number>();
  for (const t of turns)
    if (t.parent_turn_id !== null && !retried.has(t.turn_id))
      children.set(t.parent_turn_id, (children.get(t.parent_turn_id) ?? 0) + 1);
  return {
    turns: turns.length,
    chains: turns.filter((t) => !hasChild.has(t.turn_id) && !retried.has(t.turn_id)).length,
    branch_points: [...children.values()].filter((n) => n > 1).length,
    retries_dropped: retried.size,
    roots: turns.filter((t) => t.parent_turn_id === null && !retried.has(t.turn_id)).length,
  };
}

/** The turns by id and the ids that have a child; a turn listed twice or misaligned logprobs throw. */
function indexTurns(turns: readonly ConversationTurn[]): {
  byId: Map<string, ConversationTurn>;
  hasChild: Set<string>;
} {
  const byId = new Map<string, ConversationTurn>();
  const hasChild = new Set<string>();
  for (const t of turns) {
    if (byId.has(t.turn_id)) throw new ConversationBuildError(`${t.turn_id}: listed twice`);
    if (t.sampled_logprobs.length !== t.sampled_ids.length) {
      throw new ConversationBuildError(
        `${t.turn_id}: ${t.sampled_logprobs.length} logprobs for ${t.sampled_ids.length} ids`,
      );
    }
    byId.set(t.turn_id, t);
    if (t.parent_turn_id !== null) hasChild.add(t.parent_turn_id);
  }
  return { byId, hasChild };
}

/** The response side of one chain's trace, as its turns are appended. */
interface ChainBuild {
  response: number[];
  mask: Array<0 | 1>;
  logprobs: number[];
  /** Per-turn metadata (verdict, flags, offsets in `response`, provenance). */
  meta: JsonObject[];
  /** No turn so far carries `image_prompt_unverified`. */
  exact: boolean;
  /** The sequence so far: the last turn's prompt + its sampled ids. */
  held: number[];
}

/** The trace of one chain (root-to-leaf `path`); marks its turns in `trained`. */
function chainTrace(
  path: ConversationTurn[],
  chainIndex: number,
  trained: Set<string>,
  routePath: ConversationTurn[] = path,
): Trace {
  const root = path[0]!;
  const leaf = path.at(-1)!;
  const build: ChainBuild = {
    response: [],
    mask: [],
    logprobs: [],
    meta: [],
    exact: true,
    held: [...root.prompt_ids],
  };
  for (const [i, t] of path.entries()) appendTurn(build, t, i > 0, trained);
  const rootMessages = root.messages as unknown as JsonObject[];
  const responseMessages = [
    ...(leaf.messages.slice(root.messages.length) as unknown as JsonObject[]),
    leaf.assistant_message as unknown as JsonObject,
  ];
  // Routes only when every call of the chain has its block and they cover every position.
  const blocks = routePath.map((t) => t.routed_experts);
  const routes = blocks.every((b): b is RoutedExperts => b !== undefined)
    ? stitchRoutedExperts(blocks, root.prompt_ids.length + build.response.length - 1)
    : null;
  return {
    prompt_ids: [...root.prompt_ids],
    response_ids: build.response,
    loss_mask: build.mask,
    response_logprobs: build.logprobs,
    prompt_messages: rootMessages,
    response_messages: responseMessages,
    tools: root.tools ? (root.tools as JsonObject[]) : null,
    finish_reason: leaf.finish_reason,
    reward: null,
    metadata: {
      builder: "conversation",
      chain_index: chainIndex,
      token_exact: build.exact,
      turns: build.meta,
    },
    ...(routes ? { routed_experts: routes } : {}),
  };
}

/**
 * Appends one turn: the ids bridged since its parent (context, mask 0) unless it starts the chain,
 * then its sampled ids (trained the first time the turn appears in any trace).
 */
function appendTurn(build: ChainBuild, t: ConversationTurn, hasParent: boolean, trained: Set<string>): void {
  const bridgedStart = build.response.length;
  if (hasParent) {
    if (!startsWith(t.prompt_ids, build.held)) {
      throw new ConversationBuildError(
        `${t.turn_id}: prompt does not extend ${t.parent_turn_id}'s prompt + sampled ids`,
      );
    }
    const bridged = t.prompt_ids.slice(build.held.length);
    build.response.push(...bridged);
    for (const _ of bridged) {
      build.mask.push(0);
      build.logprobs.push(0);
    }
  }
  const first = !trained.has(t.turn_id);
  trained.add(t.turn_id);
  const sampledStart = build.response.length;
  build.response.push(...t.sampled_ids);
  for (const lp of t.sampled_logprobs) {
    build.mask.push(first ? 1 : 0);
    build.logprobs.push(lp);
  }
  build.held = [...t.prompt_ids, ...t.sampled_ids];
  // Not proven to be the sequence the engine ran (images, and no or unaligned engine ids).
  const turnExact = !t.flags.includes("image_prompt_unverified");
  build.exact &&= turnExact;
  build.meta.push({
    turn_id: t.turn_id,
    verdict: t.verdict,
    reason: t.reason,
    flags: t.flags,
    token_exact: turnExact,
    finish_reason: t.finish_reason,
    trained: first,
    bridged_start: bridgedStart,
    sampled_start: sampledStart,
    sampled_len: t.sampled_ids.length,
    ...t.provenance,
  });
}

const isObj = (v: unknown): v is JsonObject => typeof v === "object" && v !== null && !Array.isArray(v);

/**
 * Rebuilds a turn from a completion record written by the proxy's token mode, which keeps the
 * bridge's decision in `metadata.bridge` (`{turn_id, parent_turn_id, verdict, reason}`), the
 * request in its internal chat form in `request` (else `original_request`) and the returned
 * message in `response.choices[0]`.
 *
 * @example
 * ```ts
 * buildConversationTraces(records.map(conversationTurnFromRecord));
 * ```
 */
export function conversationTurnFromRecord(record: CompletionRecord): ConversationTurn {
  const bridge = record.metadata.bridge;
  if (!isObj(bridge) || typeof bridge.turn_id !== "string" || typeof bridge.verdict !== "string") {
    throw new ConversationBuildError(`${record.completion_id}: no metadata.bridge (not a token-mode record)`);
  }
  if (!record.response_logprobs)
    throw new ConversationBuildError(`${record.completion_id}: no response_logprobs`);
  const choices = record.response.choices;
  const message =
    Array.isArray(choices) && isObj(choices[0]) && isObj(choices[0].message) ? choices[0].message : {};
  // The proxy keeps the internal (OpenAI chat) form it rendered from in `request`; the harness's
  // own body (Anthropic, Responses, Gemini shapes) is only a fallback.
  const source = Array.isArray(record.request.messages) ? record.request : record.original_request;
  const messages = source.messages;
  const tools = source.tools;
  const policy = record.policy_version !== undefined ? record.policy_version : record.metadata.policy_version;
  const segments = recordVersionSegments(record);
  return {
    turn_id: bridge.turn_id,
    parent_turn_id: typeof bridge.parent_turn_id === "string" ? bridge.parent_turn_id : null,
    verdict: bridge.verdict as ConversationTurn["verdict"],
    reason: typeof bridge.reason === "string" ? bridge.reason : null,
    // Records written before flags existed have none.
    flags: (Array.isArray(bridge.flags) ? bridge.flags : []).filter((f): f is BridgeFlag =>
      (BRIDGE_FLAGS as readonly unknown[]).includes(f),
    ),
    prompt_ids: record.prompt_ids,
    sampled_ids: record.response_ids,
    sampled_logprobs: record.response_logprobs,
    finish_reason: record.finish_reason,
    messages: Array.isArray(messages) ? (messages as ChatMessage[]) : [],
    tools: Array.isArray(tools) && tools.length > 0 ? tools : null,
    assistant_message: { role: "assistant", ...message } as ChatMessage,
    provenance: {
      completion_id: record.completion_id,
      rid: typeof bridge.rid === "string" ? bridge.rid : null,
      policy_version: typeof policy === "string" || typeof policy === "number" ? String(policy) : null,
      weight_version_start: record.weight_version_start ?? null,
      weight_version: record.weight_version,
      replica: record.replica,
      cached_tokens: record.cached_tokens,
      ...(segments ? { version_segments: segments } : {}),
    },
    ...(record.routed_experts ? { routed_experts: record.routed_experts } : {}),
  };
}

/** What the builder knows about the session (the proxy's `BuildContext`). */
export interface ConversationContext {
  session_id: string;
  task_id: string;
  config: JsonObject;
}

/**
 * The `conversation` builder over completion records: one trace per chain, or an ERROR
 * trajectory "no completions" for an empty session (as `per_request` does).
 *
 * @example
 * ```ts
 * const trajectory = conversationBuilder(proxy.completions("s-1"), { session_id: "s-1", task_id: "t", config: {} });
 * ```
 */
export function conversationBuilder(
  records: readonly CompletionRecord[],
  ctx: ConversationContext,
): Trajectory {
  if (records.length === 0) {
    return {
      status: "ERROR",
      traces: [],
      metadata: { builder: "conversation", session_id: ctx.session_id },
      error: "no completions",
    };
  }
  const turns = records.map(conversationTurnFromRecord);
  const verdicts: Record<string, number> = {};
  for (const t of turns) verdicts[t.verdict] = (verdicts[t.verdict] ?? 0) + 1;
  const flags = emptyFlagCounts();
  for (const t of turns) for (const f of t.flags) flags[f] += 1;
  const mode = CONVERSATION_TRACES.find((m) => m === ctx.config.traces) ?? "leaves";
  return {
    status: "COMPLETED",
    traces: buildConversationTraces(turns, mode),
    metadata: {
      builder: "conversation",
      session_id: ctx.session_id,
      task_id: ctx.task_id,
      verdicts,
      flags,
      tree: { ...turnTreeCounts(turns) },
      traces: mode,
    },
    error: null,
  };
}
