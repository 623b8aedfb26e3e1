/**
 * Token-bridge verdicts on the gateway's `/metrics`: `polar_bridge_turns_total{harness,model,verdict}`,
 * read from the proxy's tally (`proxy.status().bridge`) on each scrape. The tally is the source of
 * truth and only grows, so the counter mirrors it instead of being incremented in parallel (which
 * could drift from the proxy's own numbers).
 *
 * @module
 */
import { Counter, type Registry } from "prom-client";
import { VERDICTS, type VerdictRow } from "../tokenizer/bridge";

/** Name of the verdict counter. */
export const BRIDGE_TURNS_METRIC = "polar_bridge_turns_total";

/**
 * Registers the verdict counter on `registry`; `rows` is called on every scrape. Chat engines
 * (no token mode) give no rows, so the metric then has no samples.
 *
 * @example
 * ```ts
 * registerBridgeMetrics(metrics.registry, () => proxy.status().bridge);
 * // polar_bridge_turns_total{harness="codex",model="Qwen/Qwen3-8B",verdict="extended",node_id="gpu-0"} 41
 * ```
 */
export function registerBridgeMetrics(registry: Registry, rows: () => VerdictRow[]): Counter {
  return new Counter({
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
}
