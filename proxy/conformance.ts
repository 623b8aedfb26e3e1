/**
 * The conformance report of a harness run in token mode: from the session's records, per-turn
 * verdicts and whether the harness honours sampling parameters, streams, rewrites or compacts its
 * history — is it safe to train on? Pure; `polar conformance` runs the harness and prints it.
 *
 * @module
 */
import type { CompletionRecord, JsonObject } from "../protocol";
import { BRIDGE_FLAGS } from "../tokenizer/bridge";
import { conversationTurnFromRecord, type TurnTreeCounts, turnTreeCounts } from "./builders/conversation";

/** Sampling parameters the task asked the harness to send. */
export interface ExpectedSampling {
  temperature?: number;
  top_p?: number;
  top_k?: number;
  max_tokens?: number;
}

/** One turn of the report. */
export interface ConformanceTurn {
  turn: number;
  turn_id: string;
  api: string;
  streamed: boolean;
  verdict: string;
  reason: string | null;
  /** Bridge flags of the turn (`reasoning_dropped`). */
  flags: string[];
  messages: number;
  prompt_tokens: number;
  sampled_tokens: number;
  /** Sampling the harness sent (only the fields it set). */
  sent: JsonObject;
  /** Sampling the engine was asked for: `sent` with the task's policy over it. */
  applied: JsonObject;
  /** Fields the task's sampling policy changed on this turn. */
  overridden: string[];
}

/** The whole report. */
export interface ConformanceReport {
  harness: string;
  /** The model family whose template and parsers the proxy used (token mode's `--model-family`). */
  model_family: string;
  turns: ConformanceTurn[];
  verdicts: Record<string, number>;
  /** Turns per bridge flag (`reasoning_dropped`), zero counts included. */
  flags: Record<string, number>;
  /**
   * The harness sent at least one reply back without the reasoning the proxy returned with it. The
   * bridge kept the sampled ids, so the model still saw its own reasoning; the harness's history
   * (and a chat server re-rendering it) did not hold it.
   */
  drops_reasoning: boolean;
  /** True when every turn sent the expected sampling values; null when none were expected. */
  honours_sampling: boolean | null;
  sampling_mismatches: string[];
  /**
   * Fields the task's sampling policy set over the harness's value on some turn (a harness sending
   * temperature 0 under a policy of 1 samples at 1: the turn trains as sampled).
   */
  sampling_overridden: string[];
  /** True when every turn was sampled with the expected values; null when none were expected. */
  samples_as_expected: boolean | null;
  streams: "always" | "sometimes" | "never";
  rewrites_history: boolean;
  compacts_history: boolean;
  /** Chains (turns that start a sequence of their own: the first, and every break). */
  chains: number;
  /**
   * The turn tree as the `conversation` builder reads it: traces, branch points, retried calls
   * whose replaced answer no trace holds (null when the records are not token-mode records).
   */
  tree: TurnTreeCounts | null;
  /**
   * One chain (the harness never rewrote, compacted or restarted its history) and sampled as
   * expected (by the harness or by the task's policy over it): every sampled token trains in the context the model saw. `template_mismatch` turns
   * do not count against it: they are the template's doing, and the bridge keeps them in the chain.
   */
  safe_to_train: boolean;
}

const SAMPLING_KEYS = ["temperature", "top_p", "top_k", "max_tokens", "max_completion_tokens"] as const;

/**
 * Builds the report from a token-mode session's records (in completion order).
 *
 * @example
 * ```ts
 * const report = conformanceReport("shell", proxy.completions(id), { temperature: 0.6 });
 * report.safe_to_train; // true for an append-only harness that sends temperature 0.6
 * ```
 */
export function conformanceReport(
  harness: string,
  records: readonly CompletionRecord[],
  expected: ExpectedSampling = {},
  modelFamily = "qwen3",
): ConformanceReport {
  const turns = records.map(conformanceTurn);
  const verdicts: Record<string, number> = {};
  for (const t of turns) verdicts[t.verdict] = (verdicts[t.verdict] ?? 0) + 1;
  const flags: Record<string, number> = Object.fromEntries(BRIDGE_FLAGS.map((f) => [f, 0]));
  for (const t of turns) for (const f of t.flags) flags[f] = (flags[f] ?? 0) + 1;
  const wanted = Object.entries(expected).filter(([, v]) => v !== undefined);
  const mismatches = samplingMismatches(turns, wanted, "sent");
  const appliedMismatches = samplingMismatches(turns, wanted, "applied");
  const overridden = [...new Set(turns.flatMap((t) => t.overridden))].sort();
  const streamed = turns.filter((t) => t.streamed).length;
  const tree = treeOf(records);
  // A chain starts at every turn that is not bridged from an earlier one (a retried call, whose
  // answer the builder drops, starts none).
  const chains =
    tree?.roots ??
    records.filter((r) => {
      const b = (r.metadata.bridge ?? {}) as JsonObject;
      return b.parent_turn_id === null || b.parent_turn_id === undefined;
    }).length;
  const honours = wanted.length === 0 ? null : mismatches.length === 0;
  const asExpected = wanted.length === 0 ? null : appliedMismatches.length === 0;
  const rewrites = (verdicts.history_rewritten ?? 0) > 0;
  const compacts = (verdicts.compacted ?? 0) > 0;
  return {
    harness,
    model_family: modelFamily,
    turns,
    verdicts,
    flags,
    drops_reasoning: (flags.reasoning_dropped ?? 0) > 0,
    honours_sampling: honours,
    sampling_mismatches: mismatches,
    sampling_overridden: overridden,
    samples_as_expected: asExpected,
    streams: streamed === 0 ? "never" : streamed === turns.length ? "always" : "sometimes",
    rewrites_history: rewrites,
    compacts_history: compacts,
    chains,
    tree,
    safe_to_train: turns.length > 0 && chains === 1 && asExpected !== false,
  };
}

/** The session's turn tree as the `conversation` builder reads it; null for records it cannot read. */
function treeOf(records: readonly CompletionRecord[]): TurnTreeCounts | null {
  try {
    return turnTreeCounts(records.map(conversationTurnFromRecord));
  } catch {
    return null;
  }
}

/** One turn of the report from its record (the `i`-th of the session). */
function conformanceTurn(r: CompletionRecord, i: number): ConformanceTurn {
  const bridge = (r.metadata.bridge ?? {}) as JsonObject;
  // The internal chat form: every family's sampling fields under their OpenAI names.
  const applied: JsonObject = {};
  for (const k of SAMPLING_KEYS) if (r.request[k] !== undefined) applied[k] = r.request[k];
  // `request` is what the engine got; the policy's record says what the harness had sent.
  const policy = (r.metadata.sampling ?? null) as { requested?: JsonObject; overridden?: string[] } | null;
  const sent: JsonObject = { ...applied };
  for (const k of policy?.overridden ?? []) {
    if (policy?.requested?.[k] === undefined) delete sent[k];
    else sent[k] = policy.requested[k];
  }
  return {
    turn: i + 1,
    turn_id: String(bridge.turn_id ?? "?"),
    api: r.api_type,
    streamed: r.metadata.client_stream === true,
    verdict: typeof bridge.verdict === "string" ? bridge.verdict : "(not token mode)",
    reason: typeof bridge.reason === "string" ? bridge.reason : null,
    flags: Array.isArray(bridge.flags) ? bridge.flags.map(String) : [],
    messages: Array.isArray(r.request.messages) ? r.request.messages.length : 0,
    prompt_tokens: r.prompt_ids.length,
    sampled_tokens: r.response_ids.length,
    sent,
    applied,
    overridden: policy?.overridden ?? [],
  };
}

/** Every turn's value of an expected sampling field that differs, on the `sent` or `applied` side. */
function samplingMismatches(
  turns: readonly ConformanceTurn[],
  wanted: ReadonlyArray<[string, number | undefined]>,
  side: "sent" | "applied",
): string[] {
  const out: string[] = [];
  for (const t of turns) {
    const got = t[side];
    for (const [k, v] of wanted) {
      const value = k === "max_tokens" ? (got.max_tokens ?? got.max_completion_tokens) : got[k];
      if (value !== v)
        out.push(
          `turn ${t.turn}: ${k} ${value === undefined ? "not sent" : `= ${JSON.stringify(value)}`}, expected ${v}`,
        );
    }
  }
  return out;
}

/**
 * The report as a Markdown table plus a summary block.
 *
 * @example
 * ```ts
 * console.log(formatConformance(report));
 * ```
 */
export function formatConformance(r: ConformanceReport): string {
  const lines = [
    `conformance of harness '${r.harness}' (token mode, simulated engine)`,
    "",
    "| turn | api | streamed | messages | prompt tokens | sampled | sent sampling | verdict | flags | reason |",
    "|---|---|---|---|---|---|---|---|---|---|",
    ...r.turns.map(
      (t) =>
        `| ${t.turn} | ${t.api} | ${t.streamed ? "yes" : "no"} | ${t.messages} | ${t.prompt_tokens} | ${t.sampled_tokens} | ${
          (Object.entries(t.sent)
            .map(([k, v]) => `${k}=${JSON.stringify(v)}`)
            .join(" ") || "-") +
          (t.overridden.length
            ? ` (applied ${t.overridden.map((k) => `${k}=${JSON.stringify(t.applied[k])}`).join(" ")})`
            : "")
        } | ${t.verdict} | ${t.flags.join(" ")} | ${t.reason ?? ""} |`,
    ),
    "",
    "| check | result |",
    "|---|---|",
    `| model family | ${r.model_family} |`,
    `| turns | ${r.turns.length} (${Object.entries(r.verdicts)
      .map(([v, n]) => `${v} ${n}`)
      .join(", ")}) |`,
    `| chains | ${r.chains} |`,
    `| turn tree | ${r.tree ? `${r.tree.chains} trace(s), ${r.tree.branch_points} branch point(s), ${r.tree.retries_dropped} retried call(s) dropped` : "not read"} |`,
    `| honours sampling parameters | ${r.honours_sampling === null ? "not checked" : r.honours_sampling ? "yes" : `no: ${r.sampling_mismatches.slice(0, 3).join("; ")}`} |`,
    `| task's sampling policy applied over | ${r.sampling_overridden.length ? r.sampling_overridden.join(", ") : "nothing"} |`,
    `| streams | ${r.streams} |`,
    `| rewrites history | ${r.rewrites_history ? "yes" : "no"} |`,
    `| compacts history | ${r.compacts_history ? "yes" : "no"} |`,
    `| drops reasoning | ${r.drops_reasoning ? `yes: ${r.flags.reasoning_dropped} of ${r.turns.length} turns sent the previous reply back without it (the prompt kept the sampled reasoning)` : "no"} |`,
    `| safe to train on | ${r.safe_to_train ? "yes" : "no"} |`,
  ];
  return lines.join("\n");
}
