/**
 * The `prefix_merging` builder (upstream's "whole conversation" mode): the completions of a session
 * are grouped into chains by prompt-id prefix, and each chain becomes one trace whose response
 * stream interleaves the sampled ids (trainable, real logprobs) with the interstitial ids the next
 * prompt added (tool results, template glue, new user turns: mask 0, logprob 0.0).
 *
 * Only server-tokenised prompts are compared, never sampled ids, so BPE re-tokenisation drift of
 * an assistant turn cannot break a chain; the trained sequence keeps the raw sampled body.
 *
 * @module
 */
import type { CompletionRecord, JsonObject, Trace } from "../../protocol";
import { isObject, objects } from "../json";
import { recordPolicyVersion, type TrajectoryBuilder, traceFromRecord } from "./per-request";

/** Finish reasons that mean the model ended its turn itself (its last token is the end-of-turn token). */
const NATURAL_STOPS = new Set(["stop", "tool_calls", "stop_sequence"]);

const isPrefix = (short: readonly number[], long: readonly number[]): boolean => {
  if (short.length >= long.length) return false;
  for (let i = 0; i < short.length; i++) if (short[i] !== long[i]) return false;
  return true;
};

/**
 * Groups records into chains: a record joins the open chain whose last prompt is a strict token
 * prefix of its own prompt (longest match wins), else it starts a new chain.
 *
 * @example
 * ```ts
 * groupChains(records).length; // 2 for a session with one sub-agent
 * ```
 */
export function groupChains(records: readonly CompletionRecord[]): CompletionRecord[][] {
  const chains: CompletionRecord[][] = [];
  for (const r of records) {
    let best: CompletionRecord[] | null = null;
    let bestLen = -1;
    for (const chain of chains) {
      const last = chain.at(-1)!.prompt_ids;
      if (last.length > bestLen && isPrefix(last, r.prompt_ids)) {
        best = chain;
        bestLen = last.length;
      }
    }
    if (best) best.push(r);
    else chains.push([r]);
  }
  return chains;
}

/**
 * The end-of-turn id: config `end_of_turn_token_id`, else the last sampled token of the first
 * completion that stopped naturally; null when neither exists.
 *
 * @example
 * ```ts
 * detectEndOfTurn(records, {}); // 151645 for Qwen3
 * ```
 */
export function detectEndOfTurn(records: readonly CompletionRecord[], config: JsonObject): number | null {
  const configured = config.end_of_turn_token_id;
  if (typeof configured === "number" && Number.isInteger(configured)) return configured;
  for (const r of records) {
    if (r.finish_reason && NATURAL_STOPS.has(r.finish_reason) && r.response_ids.length > 0)
      return r.response_ids.at(-1)!;
  }
  return null;
}

interface ChainResult {
  trace: Trace;
  used: number;
  truncated: boolean;
}

function mergeChain(chain: CompletionRecord[], eot: number | null): ChainResult {
  const first = chain[0]!;
  const ids = [...first.response_ids];
  const mask: Array<0 | 1> = first.response_ids.map(() => 1);
  const lps: number[] = first.response_logprobs ? [...first.response_logprobs] : [];
  let logprobsOk = first.response_logprobs !== null;
  let used = 1;
  let truncated = false;
  for (let k = 1; k < chain.length; k++) {
    const prev = chain[k - 1]!;
    const cur = chain[k]!;
    const tail = cur.prompt_ids.slice(prev.prompt_ids.length);
    // The tail opens with the canonical re-encoding of the previous assistant turn; it ends at its
    // first end-of-turn token. No such token: the history is not an extension, the chain ends here.
    const at = eot === null ? -1 : tail.indexOf(eot);
    if (at === -1) {
      truncated = true;
      break;
    }
    // A naturally stopped turn already holds its end-of-turn token; a cut-off one needs the canonical one.
    const endedWithEot = prev.response_ids.at(-1) === eot;
    const interstitial = tail.slice(endedWithEot ? at + 1 : at);
    for (const id of interstitial) {
      ids.push(id);
      mask.push(0);
      lps.push(0.0);
    }
    ids.push(...cur.response_ids);
    for (const _ of cur.response_ids) mask.push(1);
    if (cur.response_logprobs) lps.push(...cur.response_logprobs);
    else logprobsOk = false;
    used++;
  }
  const last = chain[used - 1]!;
  const base = traceFromRecord(first);
  const firstMessages = objects(first.request.messages);
  const lastMessages = objects(last.request.messages);
  const lastChoice = objects(last.response.choices)[0];
  const lastMessage = lastChoice && isObject(lastChoice.message) ? [lastChoice.message] : [];
  const included = chain.slice(0, used);
  return {
    used,
    truncated,
    trace: {
      ...base,
      response_ids: ids,
      loss_mask: mask,
      response_logprobs: logprobsOk ? lps : null,
      response_messages:
        used === 1 ? base.response_messages : [...lastMessages.slice(firstMessages.length), ...lastMessage],
      finish_reason: last.finish_reason,
      metadata: {
        completion_ids: included.map((r) => r.completion_id),
        weight_versions: included.map((r) => r.weight_version),
        weight_version_starts: included.map((r) => r.weight_version_start ?? null),
        policy_versions: included.map(recordPolicyVersion),
        replicas: [...new Set(included.map((r) => r.replica))],
        completion_count: used,
        truncated,
        dropped_completions: chain.length - used,
      },
    },
  };
}

/**
 * `prefix_merging`: one trace per chain. Config: `end_of_turn_token_id` (optional). An empty
 * session is an ERROR trajectory with error "no completions" (upstream behaviour).
 *
 * @example
 * ```ts
 * const t = buildPrefixMerging(records, { session_id: "s", task_id: "t", config: {} });
 * t.metadata.truncated_chains; // 0
 * ```
 */
export const buildPrefixMerging: TrajectoryBuilder = (records, ctx) => {
  const eot = detectEndOfTurn(records, ctx.config);
  const chains = groupChains(records);
  const results = chains.map((c) => mergeChain(c, eot));
  const metadata = {
    builder: "prefix_merging",
    session_id: ctx.session_id,
    task_id: ctx.task_id,
    record_count: records.length,
    trace_count: results.length,
    chain_count: chains.length,
    full_chains: results.filter((r) => !r.truncated).length,
    truncated_chains: results.filter((r) => r.truncated).length,
    merged_completions: results.reduce((n, r) => n + r.used, 0),
    dropped_completions: results.reduce((n, r) => n + (r.trace.metadata.dropped_completions as number), 0),
    end_of_turn_token_id: eot,
  };
  if (records.length === 0) return { status: "ERROR", traces: [], metadata, error: "no completions" };
  return { status: "COMPLETED", traces: results.map((r) => r.trace), metadata, error: null };
};
