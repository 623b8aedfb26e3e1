/**
 * `npx tsx scripts/run-harnesses.ts [--keep] [pi qwen_code …]` (or `scripts/run-harnesses.sh`):
 * the real harness CLIs on the calculator task, end to end.
 *
 * Starts the local stack (control plane, SIMULATED SGLang engine, one gateway whose proxy runs in
 * token mode, `--engine sglang`), submits `examples/calculator/task.<harness>.yaml` for each
 * harness asked for (4 samples each, graded by `test_on_output`, trajectories built by the
 * `conversation` builder, the token-mode default for a task that names none), fetches every
 * session's completion records and prints one row per harness: API family, sessions, turns,
 * tokens, rewards, bridge verdicts. Results and records are
 * saved under `.polar/harness-runs/<batch>/`.
 *
 * CLIs missing from `.polar/harnesses` are installed first at their pinned versions
 * (`scripts/install-harnesses.sh`, once; it needs the npm registry); the run itself needs no network:
 * the gateway gets `POLAR_HARNESS_DIR` and puts its `bin/` first on the sessions' PATH, so the
 * presets' install steps are skipped.
 *
 * Exit code 0 only when every session COMPLETED, every harness's group got rewards 1 and 0, and
 * every record is token-exact (see {@link checkHarnessRun}).
 *
 * @module
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { join, relative } from "node:path";
import { pathToFileURL } from "node:url";
import { type LocalStack, startLocalStack } from "../cli/local-stack";
import { table } from "../cli/report";
import { loadTaskFile } from "../cli/task-file";
import { REPO_ROOT } from "../cli/wrangler-dev";
import type { CompletionRecord, SessionResult, TaskSpecInput } from "../protocol";
import { toolSchemas, withoutDefaults } from "../tokenizer/bridge";
import {
  type ChatMessage,
  type ChatTokenizer,
  loadChatTokenizer,
  sglangToolDumps,
  type ToolDefinition,
} from "../tokenizer/chat-tokenizer";
import { tryParseJson } from "../tokenizer/parsers/json-text";
import {
  DEFAULT_HARNESS_DIR,
  ensureHarnesses,
  type InstallableHarness,
  missingHarnesses,
} from "./ensure-harnesses";

/**
 * The harness runs of the calculator example (`examples/calculator/task.<name>.yaml`), in the order
 * they are run and reported. A run is a preset, or a preset on another of its API families
 * (`continue_anthropic`: the `continue` preset with `agent.settings.provider: anthropic`).
 */
export const HARNESS_NAMES = [
  "pi",
  "qwen_code",
  "claude_code",
  "codex",
  "opencode",
  "gemini_cli",
  "copilot_cli",
  "cline",
  "kilo_code",
  "continue",
  "continue_anthropic",
  "grok_cli",
  "nanocoder",
] as const;
export type HarnessName = (typeof HARNESS_NAMES)[number];

/** Runs whose name is not their preset's: the preset whose CLI they run. */
const RUN_PRESET: Partial<Record<HarnessName, InstallableHarness>> = { continue_anthropic: "continue" };

/**
 * The presets (CLIs to install) of some harness runs, each once.
 *
 * @example
 * ```ts
 * presetsOf(["continue", "continue_anthropic"]); // ["continue"]
 * ```
 */
export function presetsOf(runs: readonly HarnessName[]): InstallableHarness[] {
  return [...new Set(runs.map((r) => RUN_PRESET[r] ?? (r as InstallableHarness)))];
}

// Where `scripts/install-harnesses.sh` puts the CLIs by default, and which of them a folder lacks.
export { DEFAULT_HARNESS_DIR, missingHarnesses };

/** One harness's sessions with their completion records. */
export interface HarnessRun {
  harness: HarnessName;
  task_id: string;
  sessions: Array<{ result: SessionResult; records: CompletionRecord[] }>;
}

/** Options of {@link runHarnesses}. */
export interface RunHarnessesOptions {
  harnesses: readonly HarnessName[];
  /** Folder with `bin/<cli>` (default `.polar/harnesses`). */
  harnessDir?: string;
  /** Sessions run at once by the gateway (default 4). */
  maxRun?: number;
  /** Wait for all results at most this long (default 15 min). */
  timeoutMs?: number;
  /** Samples per harness (default: the task file's `num_samples`, 4). */
  samples?: number;
  /** Each session's `timeout_seconds` (default: the task file's, 300). */
  sessionTimeoutSeconds?: number;
  log?: (line: string) => void;
  /** Use a running stack instead of starting one (tests share theirs). */
  stack?: LocalStack;
  /** Keep the stack's folder (session workspaces and the CLIs' logs) after the run. */
  keep?: boolean;
}

/**
 * The calculator task of `harness`, as its file says: it names no builder, so the token-mode
 * gateway gives it `conversation` (one trace per chain), as any user's task gets.
 */
export function harnessTask(harness: HarnessName): TaskSpecInput {
  const file = join(REPO_ROOT, "examples/calculator", `task.${harness}.yaml`);
  return loadTaskFile(file).tasks[0]!;
}

/**
 * The local stack's gateway flags for a harness run: token mode, all samples of a group at once.
 *
 * @example
 * ```ts
 * const stack = await startLocalStack({ gatewayArgs: harnessGatewayArgs(4) });
 * ```
 */
export function harnessGatewayArgs(maxRun = 4): string[] {
  return ["--engine", "sglang", "--max-run", String(maxRun), "--max-init", String(maxRun)];
}

/**
 * A finished session's completion records from the control plane (retried until its upload is in;
 * empty for a session that never reached the model).
 *
 * @example
 * ```ts
 * const records = await fetchRecords(stack, result.session_id);
 * ```
 */
export async function fetchRecords(stack: LocalStack, sessionId: string): Promise<CompletionRecord[]> {
  const url = new URL(`/v1/sessions/${encodeURIComponent(sessionId)}/completions`, stack.controlPlane.url);
  let last = "";
  for (let attempt = 0; attempt < 10; attempt++) {
    let res: Response;
    let text: string;
    try {
      res = await fetch(url, { headers: { authorization: `Bearer ${stack.tokens.trainer}` } });
      text = await res.text();
    } catch (err) {
      // The control plane aborts a body that comes up short rather than end it as a short 200.
      last = (err as Error).message;
      await new Promise((r) => setTimeout(r, 250));
      continue;
    }
    // A session that never reached the model (the CLI failed to start) has no records to upload.
    if (res.status === 404) return [];
    if (res.status === 409) {
      // not_ready: the result (or its upload) is not in yet.
      last = text;
      await new Promise((r) => setTimeout(r, 1000 * Number(res.headers.get("retry-after") ?? 1)));
      continue;
    }
    if (!res.ok) throw new Error(`completions of ${sessionId}: HTTP ${res.status} ${text}`);
    return JSON.parse(text) as CompletionRecord[];
  }
  throw new Error(`completions of ${sessionId}: not available after 10 reads: ${last}`);
}

/**
 * Submits the calculator task of every harness in one batch on a local stack whose gateway has
 * the harness folder on its PATH, and collects results and completion records.
 *
 * @example
 * ```ts
 * const runs = await runHarnesses({ harnesses: ["pi", "qwen_code"] });
 * console.log(harnessTable(runs));
 * ```
 */
export async function runHarnesses(opts: RunHarnessesOptions): Promise<HarnessRun[]> {
  const log = opts.log ?? (() => {});
  const dir = opts.harnessDir ?? DEFAULT_HARNESS_DIR;
  const missing = missingHarnesses(dir, presetsOf(opts.harnesses));
  if (missing.length > 0) {
    throw new Error(
      `harness CLIs not installed in ${dir}: ${missing.join(", ")} (run scripts/install-harnesses.sh ${missing.join(" ")})`,
    );
  }
  // The gateway children inherit this: the sessions' PATH starts with <dir>/bin.
  process.env.POLAR_HARNESS_DIR = dir;
  const stack =
    opts.stack ??
    (await startLocalStack({
      gateways: 1,
      gatewayArgs: [...harnessGatewayArgs(opts.maxRun), ...(opts.keep ? ["--keep-workspaces"] : [])],
      keepState: opts.keep ?? false,
    }));
  if (opts.keep) log(`stack folder (kept): ${stack.root}`);
  try {
    const tasks = opts.harnesses.map(harnessTask).map((t) => ({
      ...t,
      ...(opts.samples === undefined ? {} : { num_samples: opts.samples }),
      ...(opts.sessionTimeoutSeconds === undefined ? {} : { timeout_seconds: opts.sessionTimeoutSeconds }),
    }));
    const created = await stack.client.submit({ tasks });
    log(
      `submitted batch ${created.batch_id}: ${created.tasks} tasks, ${created.sessions} sessions (${created.sessions / created.tasks} each)`,
    );
    const byTask = new Map<string, HarnessRun>(
      tasks.map((t, i) => [t.task_id, { harness: opts.harnesses[i]!, task_id: t.task_id, sessions: [] }]),
    );
    for await (const { result } of stack.client.streamResults(created.batch_id, {
      timeoutMs: opts.timeoutMs ?? 15 * 60_000,
    })) {
      const run = byTask.get(result.task_id);
      if (!run) throw new Error(`result of unknown task ${result.task_id}`);
      const records = await fetchRecords(stack, result.session_id);
      run.sessions.push({ result, records });
      log(
        `${result.session_id} (${run.harness}) ${result.status} reward=${result.reward ?? "-"} turns=${records.length}${result.error ? ` error=${result.error.kind}: ${result.error.message}` : ""}`,
      );
    }
    for (const run of byTask.values())
      run.sessions.sort((a, b) => a.result.session_id.localeCompare(b.result.session_id));
    return [...byTask.values()];
  } finally {
    if (!opts.stack) await stack.stop();
  }
}

type Verdicts = Record<string, number>;

const verdictOf = (r: CompletionRecord) =>
  String((r.metadata.bridge as { verdict?: unknown } | undefined)?.verdict ?? "none");
const flagsOf = (r: CompletionRecord): string[] => {
  const flags = (r.metadata.bridge as { flags?: unknown } | undefined)?.flags;
  return Array.isArray(flags) ? flags.map(String) : [];
};
const turnIdOf = (r: CompletionRecord) => (r.metadata.bridge as { turn_id?: unknown } | undefined)?.turn_id;
const parentOf = (r: CompletionRecord) =>
  (r.metadata.bridge as { parent_turn_id?: unknown } | undefined)?.parent_turn_id;

/** Qwen3's `</think>`: the sampled ids up to it are the reply's reasoning. */
const THINK_END = 151668;

/**
 * What the model saw of the reasoning a CLI dropped: for each `reasoning_dropped` turn, the
 * parent's sampled reasoning tokens (up to and including `</think>`), which the bridge kept in the
 * prompt although the CLI's history no longer held them.
 */
function droppedReasoningTokens(records: readonly CompletionRecord[]): number {
  const byTurn = new Map(records.map((r) => [turnIdOf(r), r]));
  let kept = 0;
  for (const r of records) {
    if (!flagsOf(r).includes("reasoning_dropped")) continue;
    const parent = byTurn.get(parentOf(r));
    const end = parent?.response_ids.indexOf(THINK_END) ?? -1;
    if (end >= 0) kept += end + 1;
  }
  return kept;
}

/** Per-harness figures of the report table. */
export interface HarnessSummary {
  harness: HarnessName;
  api: string;
  sessions: number;
  completed: number;
  turns: number[];
  promptTokens: number;
  sampledTokens: number;
  rewards: Array<number | null>;
  verdicts: Verdicts;
  /** Turns whose request sent the previous reply back without its reasoning. */
  reasoningDropped: number;
  /** The dropped replies' sampled reasoning tokens, which the bridge kept in the next prompt. */
  reasoningTokensKept: number;
  /** Turns that had a previous reply to send back (every turn extending another). */
  followUps: number;
}

/**
 * Figures of one harness run: turns per session, tokens (prompt tokens of every call, and sampled
 * tokens), rewards, verdict counts, turns that came back without the previous reply's reasoning.
 *
 * @example
 * ```ts
 * summarizeHarness(runs[0]).verdicts; // { new_chain: 4, extended: 17 }
 * ```
 */
export function summarizeHarness(run: HarnessRun): HarnessSummary {
  const records = run.sessions.flatMap((s) => s.records);
  const verdicts: Verdicts = {};
  for (const r of records) verdicts[verdictOf(r)] = (verdicts[verdictOf(r)] ?? 0) + 1;
  return {
    harness: run.harness,
    api: [...new Set(records.map((r) => r.api_type))].join(",") || "-",
    sessions: run.sessions.length,
    completed: run.sessions.filter((s) => s.result.status === "COMPLETED").length,
    turns: run.sessions.map((s) => s.records.length),
    promptTokens: records.reduce((n, r) => n + r.prompt_ids.length, 0),
    sampledTokens: records.reduce((n, r) => n + r.response_ids.length, 0),
    rewards: run.sessions.map((s) => s.result.reward),
    verdicts,
    reasoningDropped: records.filter((r) => flagsOf(r).includes("reasoning_dropped")).length,
    reasoningTokensKept: run.sessions.reduce((n, s) => n + droppedReasoningTokens(s.records), 0),
    followUps: records.filter((r) => typeof parentOf(r) === "string").length,
  };
}

/**
 * The report: one row per harness.
 *
 * @example
 * ```ts
 * console.log(harnessTable(runs.map(summarizeHarness)));
 * ```
 */
export function harnessTable(summaries: HarnessSummary[]): string {
  return table(
    [
      "harness",
      "API family",
      "sessions",
      "turns",
      "tokens (prompt+sampled)",
      "rewards",
      "verdicts",
      "reasoning dropped",
    ],
    summaries.map((s) => [
      s.harness,
      s.api,
      `${s.completed}/${s.sessions} completed`,
      s.turns.join(" "),
      `${s.promptTokens}+${s.sampledTokens}`,
      s.rewards.map((r) => r ?? "-").join(" "),
      Object.entries(s.verdicts)
        .map(([v, n]) => `${v} ${n}`)
        .join(", "),
      `${s.reasoningDropped}/${s.followUps} turns (${s.reasoningTokensKept} tokens kept)`,
    ]),
  );
}

/**
 * What must hold for a harness run, as a list of problems (empty = good): every session
 * COMPLETED; rewards 1 and 0 in the group; every record in token mode with aligned logprobs;
 * the prompt ids of every `new_chain` / `extended` turn decode to the Qwen3 template's render of
 * the request the engine served (messages and tools); every chain of the `conversation` trajectory
 * is one token sequence (bridged ids masked 0, sampled ids 1).
 *
 * @example
 * ```ts
 * expect(checkHarnessRun(run, tokenizer)).toEqual([]);
 * ```
 */
export function checkHarnessRun(run: HarnessRun, tokenizer: ChatTokenizer): string[] {
  const problems: string[] = [];
  const rewards = new Set(run.sessions.map((s) => s.result.reward));
  if (!rewards.has(1) || !rewards.has(0))
    problems.push(`${run.harness}: rewards ${[...rewards].join(",")} are not a mix of 1 and 0`);
  for (const { result, records } of run.sessions) {
    const at = `${run.harness} ${result.session_id}`;
    const byTurn = new Map(records.map((r) => [turnIdOf(r), r]));
    if (result.status !== "COMPLETED")
      problems.push(
        `${at}: ${result.status} ${result.error ? `${result.error.kind}: ${result.error.message}` : ""}`,
      );
    if (records.length < 2) problems.push(`${at}: ${records.length} model calls`);
    for (const [i, r] of records.entries()) {
      const where = `${at} call ${i}`;
      if (r.engine !== "sglang") problems.push(`${where}: engine ${r.engine}, not token mode`);
      if (r.response_ids.length === 0) problems.push(`${where}: no sampled ids`);
      if (r.response_logprobs?.length !== r.response_ids.length)
        problems.push(`${where}: ${r.response_logprobs?.length} logprobs for ${r.response_ids.length} ids`);
      const verdict = verdictOf(r);
      if (verdict !== "new_chain" && verdict !== "extended") continue;
      const tools = (r.request.tools as unknown as ToolDefinition[] | undefined) ?? [];
      const render = (messages: ChatMessage[]) =>
        tokenizer.render(messages, {
          ...(tools.length ? { tools: sglangToolDumps(tools) } : {}),
          ...(r.request.chat_template_kwargs
            ? { templateKwargs: r.request.chat_template_kwargs as Record<string, unknown> }
            : {}),
          addGenerationPrompt: true,
        });
      const sent = r.request.messages as unknown as ChatMessage[];
      // A CLI that sends replies back without their reasoning (reasoning_dropped) still gets a
      // prompt that holds it: the bridge extends the sampled ids, so that prompt is the render of
      // the history with each earlier reply's sampled reasoning in place.
      const messages = flagsOf(r).includes("reasoning_dropped")
        ? withSampledReasoning(sent, ancestorReasoning(r, byTurn))
        : sent;
      const decoded = tokenizer.decode(r.prompt_ids);
      // The bridge renders its own copy of the history: an echoed call that Claude Code filled in
      // with a schema default (`Edit` + `replace_all: false`) reaches the tokens as it was sampled.
      if (
        decoded !== render(messages) &&
        decoded !== render(withoutDefaultArguments(messages, sglangToolDumps(tools)))
      )
        problems.push(`${where} (${verdict}): prompt ids do not decode to the template's render`);
    }
    for (const [k, t] of result.trajectory.traces.entries()) {
      const n = t.response_ids.length;
      if (t.loss_mask.length !== n || t.response_logprobs?.length !== n)
        problems.push(`${at} trace ${k}: mask/logprobs not aligned with ${n} response ids`);
      const sampled = t.loss_mask.filter((m) => m === 1).length;
      if (sampled === 0) problems.push(`${at} trace ${k}: no trained tokens`);
    }
    const sampledInRecords = records.reduce((s, r) => s + r.response_ids.length, 0);
    const trained = result.trajectory.traces.reduce(
      (s, t) => s + t.loss_mask.filter((m) => m === 1).length,
      0,
    );
    if (trained !== sampledInRecords)
      problems.push(`${at}: traces train ${trained} tokens, the engine sampled ${sampledInRecords}`);
  }
  return problems;
}

/** The reasoning of each reply on a turn's chain before it, oldest first. */
function ancestorReasoning(r: CompletionRecord, byTurn: Map<unknown, CompletionRecord>): string[] {
  const out: string[] = [];
  for (let p = byTurn.get(parentOf(r)); p; p = byTurn.get(parentOf(p))) {
    const message = (
      p.response.choices as Array<{ message: { reasoning_content?: string } }> | undefined
    )?.[0]?.message;
    out.unshift(message?.reasoning_content ?? "");
  }
  return out;
}

/** The history with the k-th assistant message given the k-th sampled reasoning where it has none. */
function withSampledReasoning(messages: ChatMessage[], reasoning: string[]): ChatMessage[] {
  let k = 0;
  return messages.map((m) => {
    if (m.role !== "assistant") return m;
    const sampled = reasoning[k++];
    return m.reasoning_content || !sampled ? m : { ...m, reasoning_content: sampled };
  });
}

/** Assistant tool calls without the arguments that equal their tool schema's declared default. */
function withoutDefaultArguments(messages: ChatMessage[], tools: unknown[]): ChatMessage[] {
  const schemas = toolSchemas(tools);
  return messages.map((m) => {
    if (m.role !== "assistant" || !Array.isArray(m.tool_calls)) return m;
    const tool_calls = m.tool_calls.map((c) => {
      const schema = schemas.get(c.function.name);
      const args = c.function.arguments;
      const parsed = typeof args === "string" ? tryParseJson(args) : undefined;
      if (!schema || parsed === undefined) return c;
      return {
        ...c,
        function: { ...c.function, arguments: JSON.stringify(withoutDefaults(parsed, schema)) },
      };
    });
    return { ...m, tool_calls };
  });
}

/**
 * One row per session: reward, turns, tokens (prompt tokens of the longest call + sampled tokens),
 * bridge verdicts, traces.
 *
 * @example
 * ```ts
 * console.log(sessionRows(runs));
 * ```
 */
export function sessionRows(runs: HarnessRun[]): string {
  const rows = runs.flatMap((run) =>
    run.sessions.map(({ result, records }) => {
      const verdicts: Verdicts = {};
      for (const r of records) verdicts[verdictOf(r)] = (verdicts[verdictOf(r)] ?? 0) + 1;
      return [
        run.harness,
        result.session_id.split(".").slice(-2).join("."),
        result.status,
        result.reward ?? "-",
        records.length,
        `${Math.max(0, ...records.map((r) => r.prompt_ids.length))}+${records.reduce((n, r) => n + r.response_ids.length, 0)}`,
        Object.entries(verdicts)
          .map(([v, n]) => `${v} ${n}`)
          .join(", "),
        result.trajectory.traces.length,
      ];
    }),
  );
  return table(
    [
      "harness",
      "sample",
      "status",
      "reward",
      "turns",
      "tokens (longest prompt+sampled)",
      "verdicts",
      "traces",
    ],
    rows,
  );
}

async function main(): Promise<void> {
  const keep = process.argv.includes("--keep");
  const args = process.argv.slice(2).filter((a) => a !== "--keep");
  const unknown = args.filter((a) => !(HARNESS_NAMES as readonly string[]).includes(a));
  if (unknown.length > 0) {
    console.error(`unknown harness ${unknown.join(", ")}; choose from ${HARNESS_NAMES.join(", ")}`);
    process.exit(2);
  }
  const harnesses = args.length ? (args as HarnessName[]) : [...HARNESS_NAMES];
  const started = Date.now();
  const log = (line: string) => console.log(`[${((Date.now() - started) / 1000).toFixed(1)}s] ${line}`);
  // The pinned CLIs, installed once when the harness folder lacks them (needs the npm registry).
  const installed = await ensureHarnesses(presetsOf(harnesses), { log });
  if (!installed.ok) {
    console.error(installed.reason);
    process.exit(2);
  }
  log(
    `harnesses ${harnesses.join(", ")} on the calculator task; SIMULATED SGLang engine, proxy in token mode`,
  );
  const [runs, tokenizer] = await Promise.all([runHarnesses({ harnesses, log, keep }), loadChatTokenizer()]);
  const outDir = join(
    REPO_ROOT,
    ".polar",
    "harness-runs",
    `${new Date().toISOString().replace(/[:.]/g, "-")}`,
  );
  mkdirSync(outDir, { recursive: true });
  for (const run of runs)
    for (const s of run.sessions)
      writeFileSync(join(outDir, `${s.result.session_id}.json`), `${JSON.stringify(s, null, 2)}\n`);
  console.log(`\n${sessionRows(runs)}\n\n${harnessTable(runs.map(summarizeHarness))}\n`);
  const problems = runs.flatMap((r) => checkHarnessRun(r, tokenizer));
  for (const p of problems) console.log(`PROBLEM ${p}`);
  console.log(`results and completion records in ${relative(process.cwd(), outDir)}/`);
  process.exit(problems.length === 0 ? 0 : 1);
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) await main();
