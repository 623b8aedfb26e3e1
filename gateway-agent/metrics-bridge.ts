/**
 * Token-bridge verdicts and flags on the gateway's `/metrics`:
 * `polar_bridge_turns_total{harness,model,verdict}` and
 * `polar_bridge_flagged_turns_total{harness,model,flag}` (`reasoning_dropped`: turns whose request
 * sent the previous reply back without the reasoning the proxy returned), read from the proxy's
 * tally (`proxy.status().bridge`) on each scrape. The tally is the source of truth and only grows,
 * so the counters mirror it instead of being incremented in parallel (which could drift from the
 * proxy's own numbers).
 *
 * @module
 */
import { Counter, type Registry } from "prom-client";
import { BRIDGE_FLAGS, VERDICTS, type VerdictRow } from "../tokenizer/bridge";

/** Name of the verdict counter. */
export const BRIDGE_TURNS_METRIC = "polar_bridge_turns_total";
/** Name of the flag counter. */
export const BRIDGE_FLAGS_METRIC = "polar_bridge_flagged_turns_total";

/**
 * A counter whose samples are rebuilt from `rows()` on every scrape: one per row and key of
 * `keys` with a count above zero, labelled with the row's harness and model and the key.
 */
function tallyCounter<K extends string>(
  registry: Registry,
  rows: () => VerdictRow[],
  o: {
    name: string;
    help: string;
    label: string;
    keys: readonly K[];
    counts(row: VerdictRow): Record<K, number>;
  },
): Counter {
  return new Counter({
    name: o.name,
    help: o.help,
    labelNames: ["harness", "model", o.label],
    registers: [registry],
    collect() {
      // prom-client calls collect() right before serialising; rebuilding from the snapshot keeps
      // the exported values identical to the proxy's tally.
      this.reset();
      for (const row of rows()) {
        const counts = o.counts(row);
        for (const key of o.keys) {
          const n = counts[key];
          if (n > 0) this.inc({ harness: row.harness, model: row.model, [o.label]: key }, n);
        }
      }
    },
  });
}

/**
 * Registers the verdict and flag counters on `registry`; `rows` is called on every scrape. Chat
 * engines (no token mode) give no rows, so the metrics then have no samples.
 *
 * @example
 * ```ts
 * registerBridgeMetrics(metrics.registry, () => proxy.status().bridge);
 * // polar_bridge_turns_total{harness="codex",model="Qwen/Qwen3-8B",verdict="extended",node_id="gpu-0"} 41
 * // polar_bridge_flagged_turns_total{harness="my-agent",model="Qwen/Qwen3-8B",flag="reasoning_dropped",node_id="gpu-0"} 3
 * ```
 */
export function registerBridgeMetrics(
  registry: Registry,
  rows: () => VerdictRow[],
): { turns: Counter; flagged: Counter } {
  const turns = tallyCounter(registry, rows, {
    name: BRIDGE_TURNS_METRIC,
    help: "Token-mode turns by token-bridge verdict (extended, template_mismatch, new_chain, compacted, history_rewritten), per harness and model",
    label: "verdict",
    keys: VERDICTS,
    counts: (row) => row.counts,
  });
  const flagged = tallyCounter(registry, rows, {
    name: BRIDGE_FLAGS_METRIC,
    help: "Token-mode turns by token-bridge flag (reasoning_dropped: the harness sent the previous reply back without its reasoning; image_prompt_unverified: an image turn whose engine prompt ids are unknown or not the sent ids with image pads expanded), per harness and model",
    label: "flag",
    keys: BRIDGE_FLAGS,
    counts: (row) => row.flags,
  });
  return { turns, flagged };
}
