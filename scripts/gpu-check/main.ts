/**
 * `scripts/gpu-check.sh`: the contract checks a GPU host runs on its first day, against an SGLang
 * (and optionally a vLLM) server that is already running. It starts no engine: it calls the
 * engine directly, then through an in-process recording proxy (the code the gateway runs), prints
 * one row per check and the measured figures, and exits 1 when a check failed.
 *
 * @module
 */
import { Command, InvalidArgumentError } from "commander";
import { loadChatTokenizer } from "../../tokenizer/chat-tokenizer";
import { measureBridgeCost } from "./bridge-cost";
import { formatReport, Report } from "./report";
import { checkSglang } from "./sglang";
import { checkTokenMode } from "./token-mode";
import { checkVllm } from "./vllm";

/** Options of {@link runGpuCheck}. */
export interface GpuCheckOptions {
  sglang?: string;
  vllm?: string;
  /** Folder of the served model's `tokenizer.json` + `tokenizer_config.json`; default the bundled Qwen3. */
  tokenizerPath?: string;
  /** The served model's context window, when the engine does not report it. */
  contextLength?: number;
  /** The vLLM model name, when `/v1/models` should not decide. */
  model?: string;
  /** Run the image turn (`true`), never (`false`), or when `/model_info` says the model takes images (null). */
  images: boolean | null;
  /** One-token calls timed for the proxy's added latency. */
  latencyCalls: number;
  /** History sizes (tokens) at which the bridge's per-turn cost is measured. */
  bridgeTokens: number[];
  json: boolean;
}

/**
 * Runs every check and returns the report (printing rows as they finish unless `json`).
 *
 * @example
 * ```ts
 * const report = await runGpuCheck({ sglang: "http://127.0.0.1:30000", images: null, latencyCalls: 10, bridgeTokens: [8000], json: false });
 * report.passed; // true
 * ```
 */
export async function runGpuCheck(opts: GpuCheckOptions): Promise<Report> {
  const report = new Report((row) => {
    if (!opts.json) console.error(`  ${row.status.padEnd(4)} ${row.engine} ${row.check}`);
  });
  const tok = await loadChatTokenizer(opts.tokenizerPath);
  if (opts.sglang) {
    const url = opts.sglang.replace(/\/+$/, "");
    const facts = await checkSglang(report, url, tok, { contextLength: opts.contextLength ?? null });
    if (report.rows[0]?.status !== "FAIL") {
      await checkTokenMode(report, facts, tok, {
        ...(opts.tokenizerPath ? { tokenizerPath: opts.tokenizerPath } : {}),
        latencyCalls: opts.latencyCalls,
        images: opts.images,
      });
    }
  }
  if (opts.vllm) await checkVllm(report, opts.vllm.replace(/\/+$/, ""), { model: opts.model ?? null });
  if (opts.bridgeTokens.length > 0) {
    await report.run("bridge", "per-turn cost", async () => {
      const costs = measureBridgeCost(tok, opts.bridgeTokens);
      for (const c of costs)
        report.figure({
          engine: "bridge",
          name: `per-turn prepare + commit at ${Math.round(c.historyTokens / 1000)}k tokens`,
          value: c.perTurnMs,
          unit: "ms",
          note: `tokenizer ${opts.tokenizerPath ?? "bundled Qwen3"}, median of the last 5 of ${c.turns} turns`,
        });
      return costs.map((c) => `${c.perTurnMs.toFixed(2)} ms at ${c.historyTokens} tokens`).join(", ");
    });
  }
  return report;
}

const positiveInt = (name: string) => (v: string) => {
  const n = Number(v);
  if (!Number.isInteger(n) || n < 1) throw new InvalidArgumentError(`${name} must be a positive integer`);
  return n;
};

/** The command line of `scripts/gpu-check.sh`. */
export function gpuCheckCommand(): Command {
  return new Command("gpu-check.sh")
    .description(
      "Checks a running SGLang (and optionally vLLM) server against the contracts Polar-TS relies on: " +
        "/generate ids and logprobs, return_prompt_token_ids, SamplingParams validation, the context-limit rule, " +
        "abort by rid, pause and continue, the weight version; then token mode through an in-process recording " +
        "proxy (a multi-turn session bridged token for token, a tool turn, an image turn when the model takes " +
        "images) and the proxy's added latency per call, and the token bridge's per-turn cost at the model's " +
        "vocabulary. It starts no engine. Run it on an idle engine: it pauses generation for about a second, " +
        "relabels the weight version and puts it back, and aborts one request it sent. Exit 0 when no check " +
        "failed, 1 otherwise, 2 on bad flags. See docs/engines.md.",
    )
    .option("--sglang <url>", "base URL of a running SGLang server, e.g. http://127.0.0.1:30000")
    .option("--vllm <url>", "base URL of a running vLLM server, e.g. http://127.0.0.1:8000")
    .option(
      "--tokenizer-path <dir>",
      "the served model's folder (tokenizer.json, tokenizer_config.json); default the bundled Qwen3",
    )
    .option(
      "--context-length <n>",
      "the model's context window when the engine does not report it",
      positiveInt("--context-length"),
    )
    .option("--model <name>", "vLLM model name (default: the first of /v1/models)")
    .option("--images", "run the image turn even if /model_info does not say the model takes images")
    .option("--no-images", "never run the image turn")
    .option(
      "--latency-calls <n>",
      "one-token calls timed for the proxy's added latency",
      positiveInt("--latency-calls"),
      10,
    )
    .option(
      "--bridge-tokens <list>",
      "history sizes (tokens) for the bridge's per-turn cost, comma-separated; 0 to skip",
      "8000,32000",
    )
    .option("--json", "print the report as JSON")
    .exitOverride()
    .configureOutput({ writeErr: (s) => process.stderr.write(s) });
}

/** Parses `argv`, runs, prints, and returns the exit code. */
export async function main(argv: string[]): Promise<number> {
  const cmd = gpuCheckCommand();
  try {
    cmd.parse(argv, { from: "user" });
  } catch (err) {
    const code = (err as { code?: string }).code;
    if (code === "commander.helpDisplayed" || code === "commander.version") return 0;
    return 2;
  }
  const o = cmd.opts<Record<string, unknown>>();
  if (!o.sglang && !o.vllm) {
    process.stderr.write("gpu-check: give --sglang URL and/or --vllm URL (see --help)\n");
    return 2;
  }
  const tokens = String(o.bridgeTokens)
    .split(",")
    .map((s) => Number(s.trim()))
    .filter((n) => n > 0);
  if (tokens.some((n) => !Number.isInteger(n))) {
    process.stderr.write("gpu-check: --bridge-tokens must be integers\n");
    return 2;
  }
  // commander's --images / --no-images pair leaves the value undefined when neither was given.
  const images = o.images === undefined ? null : o.images === true;
  const report = await runGpuCheck({
    ...(typeof o.sglang === "string" ? { sglang: o.sglang } : {}),
    ...(typeof o.vllm === "string" ? { vllm: o.vllm } : {}),
    ...(typeof o.tokenizerPath === "string" ? { tokenizerPath: o.tokenizerPath } : {}),
    ...(typeof o.contextLength === "number" ? { contextLength: o.contextLength } : {}),
    ...(typeof o.model === "string" ? { model: o.model } : {}),
    images,
    latencyCalls: Number(o.latencyCalls),
    bridgeTokens: tokens,
    json: o.json === true,
  });
  if (o.json === true) {
    console.log(
      JSON.stringify(
        { passed: report.passed, counts: report.counts(), rows: report.rows, figures: report.figures },
        null,
        2,
      ),
    );
  } else {
    console.log(formatReport(report));
  }
  return report.passed ? 0 : 1;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  process.exitCode = await main(process.argv.slice(2));
}
