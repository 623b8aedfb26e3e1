/**
 * Per-turn bridge verdicts and their tallies (with the per-turn flags of `reasoning.ts`).
 *
 * @module
 */
import { type BridgeFlag, emptyFlagCounts } from "./flags";

/**
 * How a turn's prompt relates to the session's earlier turns.
 *
 * - `extended`: the request is an earlier turn's messages + the assistant message the proxy
 *   returned + new messages, and the chat template renders it as a pure text extension of that
 *   turn's prompt plus the sampled text. The prompt is the earlier prompt ids + sampled ids + the
 *   tokens of the new suffix only.
 * - `template_mismatch`: the history was append-only, but the template renders it differently
 *   from what the model saw (Qwen3 drops `<think>` blocks of earlier turns; a sampled turn the
 *   template would print differently). The prompt is still bridged from the sampled ids.
 * - `new_chain`: no earlier turn in common (first turn, a sub-agent, a fresh conversation).
 * - `compacted`: the history shares a start with an earlier turn but is shorter (summarised,
 *   truncated): a new chain starts.
 * - `history_rewritten`: the history shares a start with an earlier turn but was edited (a
 *   changed message, changed tools or template kwargs): a new chain starts.
 */
export const VERDICTS = [
  "extended",
  "template_mismatch",
  "new_chain",
  "compacted",
  "history_rewritten",
] as const;
export type Verdict = (typeof VERDICTS)[number];

/** Zero counts for every verdict. */
export function emptyVerdictCounts(): Record<Verdict, number> {
  return { extended: 0, template_mismatch: 0, new_chain: 0, compacted: 0, history_rewritten: 0 };
}

/** One row of {@link VerdictTally.snapshot}. */
export interface VerdictRow {
  harness: string;
  model: string;
  counts: Record<Verdict, number>;
  /** Turns carrying each flag (`reasoning_dropped`); a turn has one verdict and any number of flags. */
  flags: Record<BridgeFlag, number>;
}

/**
 * Verdict counts per (harness, model), shared by every session of a proxy: the numbers that tell
 * whether a harness is safe to train on with a given model's template.
 *
 * @example
 * ```ts
 * const tally = new VerdictTally();
 * tally.add("codex", "Qwen3-8B", "extended", ["reasoning_dropped"]);
 * tally.snapshot(); // [{ harness: "codex", model: "Qwen3-8B", counts: { extended: 1, ... }, flags: { reasoning_dropped: 1 } }]
 * ```
 */
export class VerdictTally {
  private readonly rows = new Map<string, VerdictRow>();

  /** Counts one turn: its verdict and each of its flags. */
  add(harness: string, model: string, verdict: Verdict, flags: readonly BridgeFlag[] = []): void {
    const id = JSON.stringify([harness, model]);
    let row = this.rows.get(id);
    if (!row) {
      row = { harness, model, counts: emptyVerdictCounts(), flags: emptyFlagCounts() };
      this.rows.set(id, row);
    }
    row.counts[verdict] += 1;
    for (const f of flags) row.flags[f] += 1;
  }

  /** Counts for one pair (zeros when unseen). */
  counts(harness: string, model: string): Record<Verdict, number> {
    return { ...(this.rows.get(JSON.stringify([harness, model]))?.counts ?? emptyVerdictCounts()) };
  }

  /** Flag counts for one pair (zeros when unseen). */
  flagCounts(harness: string, model: string): Record<BridgeFlag, number> {
    return { ...(this.rows.get(JSON.stringify([harness, model]))?.flags ?? emptyFlagCounts()) };
  }

  /** All pairs, copied. */
  snapshot(): VerdictRow[] {
    return [...this.rows.values()].map((r) => ({ ...r, counts: { ...r.counts }, flags: { ...r.flags } }));
  }
}
