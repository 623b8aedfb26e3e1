/**
 * `promtool check metrics` on a scraped exposition: the format checker and linter of the
 * Prometheus project (Debian's `prometheus` package). Suites using it declare the `promtool` tool
 * (test/support/optional-tools.ts).
 *
 * @module
 */
import { spawnSync } from "node:child_process";

/**
 * Pipes `text` (Prometheus text format) through `promtool check metrics` and returns what it
 * reported: empty when the exposition parses and passes every lint (help text, counter `_total`
 * suffixes, units in names, …), else its messages.
 *
 * @example
 * ```ts
 * expect(promtoolProblems(await (await fetch(`${url}/metrics`)).text())).toBe("");
 * ```
 */
export function promtoolProblems(text: string): string {
  const r = spawnSync("promtool", ["check", "metrics"], { input: text, timeout: 30_000 });
  if (r.error) throw r.error;
  const out = `${r.stdout.toString()}${r.stderr.toString()}`.trim();
  if (r.status === 0) return out;
  return out || `promtool exited with ${r.status}`;
}

/**
 * The samples of family `name` in an exposition, by their label set (labels in the order sent,
 * `{}` when none), e.g. `{'{api="openai_chat",status="200",node_id="n"}': 3}`.
 *
 * @example
 * ```ts
 * sampleValues(text, "polar_proxy_requests_total"); // { '{api="openai_chat",status="200"}': 3 }
 * ```
 */
export function sampleValues(text: string, name: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const line of text.split("\n")) {
    if (!line.startsWith(name)) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})?\s+(\S+)/.exec(line);
    if (!m || m[1] !== name) continue;
    out[m[2] ?? "{}"] = Number(m[3]);
  }
  return out;
}

/**
 * The sum of every sample of family `name` whose labels include each of `match` (`k="v"`).
 *
 * @example
 * ```ts
 * sampleSum(text, "polar_proxy_response_tokens_total"); // 812
 * ```
 */
export function sampleSum(text: string, name: string, match: Record<string, string> = {}): number {
  let sum = 0;
  for (const [labels, v] of Object.entries(sampleValues(text, name))) {
    if (Object.entries(match).every(([k, val]) => labels.includes(`${k}="${val}"`))) sum += v;
  }
  return sum;
}
