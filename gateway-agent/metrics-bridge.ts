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
  const turns = new Counter({
    name: BRIDGE_TURNS_METRIC,
    help: "Token-mode turns by token-bridge verdict (extended, template_mismatch, new_chain, compacted, history_rewritten), per harness and model",
    labelNames: ["harness", "model", "verdict"],
    registers: [registry],
    collect() {
      // prom-client calls collect() right before serialising; rebuilding from the snapshot keeps
      // the exported values identical to the proxy's tally.
      this.reset();
      for (const row of rows()) {
        for (const verdict of VERDICTS) {
          const n = row.counts[verdict];
          if (n > 0) this.inc({ harness: row.harness, model: row.model, verdict }, n);
        }
      }
    },
  });
  const flagged = new Counter({
    name: BRIDGE_FLAGS_METRIC,
    help: "Token-mode turns by token-bridge flag (reasoning_dropped: the harness sent the previous reply back without its reasoning; image_prompt_unverified: an image turn whose engine prompt ids are unknown or not the sent ids with image pads expanded), per harness and model",
    labelNames: ["harness", "model", "flag"],
    registers: [registry],
    collect() {
      this.reset();
      for (const row of rows()) {
        for (const flag of BRIDGE_FLAGS) {
          const n = row.flags[flag];
          if (n > 0) this.inc({ harness: row.harness, model: row.model, flag }, n);
        }
      }
    },
  });
  return { turns, flagged };
}
