/**
 * `npm run bench:tokens`: token mode against re-tokenisation, on a generated corpus of multi-turn
 * tool-using sessions with drift-provoking text (non-canonical BPE splits, tool calls the harness
 * re-serialises, `<think>` blocks, compaction), for each model family token mode knows
 * (`tokenizer/families.ts`): the family's real tokenizer and template, its tool-call format and
 * parsers. The corpus is the same for every family (same seed, same tasks, calls, drift words and
 * harness behaviour); only how the model writes a call differs (`support/family-outputs.ts`), and a
 * family without a reasoning block writes no `<think>` blocks.
 *
 * Each session is played twice with the same sampled ids:
 * - `prefix_merging`: the chat server renders and encodes the whole history every turn (what the
 *   `sglang-openai` engine records), then upstream's prefix-merging builder chains the records;
 * - `conversation`: the proxy's token bridge builds each prompt (engine `sglang`), then the
 *   conversation builder.
 * A session is "one chain" when it yields a single trace with nothing truncated, and "token-exact"
 * when that trace's `prompt_ids + response_ids` equal the engine's last prompt + last sampled ids
 * (what the model really saw, with its own sampled tokens). It also times the bridge per turn
 * (prepare + parse + commit) against rendering and encoding the whole history.
 *
 * Options: `--model-family NAME|all` (default `all`: every family, one section each and a summary
 * row per family), `--json FILE` (the figures per family). Env: BENCH_SESSIONS (default 300 per
 * family), BENCH_SEED (default 1).
 */
import { writeFileSync } from "node:fs";
import { performance } from "node:perf_hooks";
import { parseArgs } from "node:util";
import type { CompletionRecord, JsonObject } from "../protocol";
import { buildPrefixMerging } from "../proxy/builders";
import { buildConversationTraces } from "../proxy/builders/conversation";
import type { GenerateResult } from "../proxy/engines/sglang-token/generate";
import { turnOutcome } from "../proxy/engines/sglang-token/turn";
import { TokenBridge } from "../tokenizer/bridge";
import {
  type ChatMessage,
  type ChatTokenizer,
  sglangToolDumps,
  type ToolDefinition,
} from "../tokenizer/chat-tokenizer";
import { loadFamilyTokenizer, MODEL_FAMILIES, type ModelFamily, modelFamily } from "../tokenizer/families";
import { type FamilyOutputs, familyOutputs } from "./support/family-outputs";

const SESSIONS = Number(process.env.BENCH_SESSIONS ?? 300);
const SEED = Number(process.env.BENCH_SEED ?? 1);

const { values: cli } = parseArgs({
  options: { "model-family": { type: "string", default: "all" }, json: { type: "string" } },
});
const familyArg = cli["model-family"]!;
if (familyArg !== "all" && !(MODEL_FAMILIES as readonly string[]).includes(familyArg)) {
  process.stderr.write(
    `--model-family: unknown family "${familyArg}" (known: ${MODEL_FAMILIES.join(", ")}, or all)\n`,
  );
  process.exit(2);
}
const FAMILIES = familyArg === "all" ? [...MODEL_FAMILIES] : [familyArg];

/** The family under measurement: its tokenizer, end-of-turn id, parsers and output dialect. */
interface Subject {
  family: ModelFamily;
  tok: ChatTokenizer;
  eot: number;
  outputs: FamilyOutputs;
}

function prng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const toolDefs: ToolDefinition[] = [
  {
    type: "function",
    function: {
      name: "bash",
      description: "Run a shell command",
      parameters: { type: "object", properties: { cmd: { type: "string" } }, required: ["cmd"] },
    },
  },
  {
    type: "function",
    function: {
      name: "read_file",
      description: "Read a file",
      parameters: {
        type: "object",
        properties: { path: { type: "string" }, limit: { type: "integer" } },
        required: ["path"],
      },
    },
  },
];
const tools = sglangToolDumps(toolDefs);
const WORDS = ["fishing", "running", "settings", "working", "testing", "reading", "loading", "missing"];
const FILES = ["a.txt", "b.txt", "notes.md", "src/main.ts", "logs/run.log"];

interface Flags {
  splits: boolean;
  /** The session thinks (a family without a reasoning block still draws it, writing no block). */
  think: boolean;
  reserialise: boolean;
  keepReasoning: boolean;
  compaction: boolean;
}

/** Ids of `text` where the drift words are sampled as two tokens (" fish" + "ing"), not the merge. */
function sampledIds(tok: ChatTokenizer, text: string, splits: boolean, rnd: () => number): number[] {
  if (!splits) return tok.encode(text);
  const out: number[] = [];
  let rest = text;
  for (;;) {
    const m = / (fishing|running|settings|working|testing|reading|loading|missing)/.exec(rest);
    if (!m) break;
    out.push(...tok.encode(rest.slice(0, m.index)));
    const word = m[0];
    const cut = word.length - 3;
    const pieces = [...tok.encode(word.slice(0, cut)), ...tok.encode(word.slice(cut))];
    out.push(...(rnd() < 0.8 ? pieces : tok.encode(word)));
    rest = rest.slice(m.index + word.length);
  }
  out.push(...tok.encode(rest));
  return out;
}

const dumps = (v: unknown) =>
  JSON.stringify(v).replaceAll('","', '", "').replaceAll('":', '": ').replaceAll(',"', ', "');

function callText(outputs: FamilyOutputs, rnd: () => number): string {
  const file = FILES[Math.floor(rnd() * FILES.length)]!;
  const word = WORDS[Math.floor(rnd() * WORDS.length)]!;
  const [name, args] =
    rnd() < 0.5 ? ["bash", { cmd: `grep -n ${word} ${file}` }] : ["read_file", { path: file, limit: 20 }];
  return outputs.callText(name as string, dumps(args));
}

/** The assistant message a harness sends back for the one it got. */
function echo(m: ChatMessage, f: Flags): ChatMessage {
  const out: ChatMessage = { role: "assistant", content: m.content ?? (f.reserialise ? "" : null) };
  if (f.keepReasoning && m.reasoning_content) out.reasoning_content = m.reasoning_content;
  if (m.tool_calls) {
    out.tool_calls = m.tool_calls.map((c, i) => {
      if (!f.reserialise) return structuredClone(c);
      const args = JSON.parse(String(c.function.arguments)) as Record<string, unknown>;
      return {
        id: `toolu_${i}`,
        type: "function",
        function: {
          name: c.function.name,
          arguments: JSON.stringify(Object.fromEntries(Object.entries(args).reverse())),
        },
      };
    });
  }
  return out;
}

interface Turn {
  messages: ChatMessage[];
  output: number[];
}

interface SessionResult {
  flags: Flags;
  turns: number;
  prefixOneChain: boolean;
  prefixExact: boolean;
  convOneChain: boolean;
  convExact: boolean;
  bridgeMs: number[];
  fullEncodeMs: number[];
  verdicts: Record<string, number>;
  /** Tool calls the model sampled, and those the family's parser read back from the ids. */
  callsSampled: number;
  callsParsed: number;
}

function fakeResult(output: number[], eot: number): GenerateResult {
  return {
    rid: null,
    outputIds: output,
    logprobs: output.map((id, i) => -((id * 7 + i) % 97) / 100 - 0.01),
    finish: { type: "stop", matched: eot, message: null },
    weightVersion: "w",
    cachedTokens: 0,
    promptTokens: null,
    completionTokens: output.length,
    promptTokenIds: null,
  };
}

function record(i: number, prompt: number[], t: Turn, message: ChatMessage, eot: number): CompletionRecord {
  return {
    completion_id: `c${i}`,
    session_id: "s",
    timestamp: "",
    api_type: "openai_chat",
    engine: "sglang-openai",
    model_requested: null,
    model_used: "m",
    original_request: {},
    request: { messages: t.messages as unknown as JsonObject[], tools } as JsonObject,
    response: { choices: [{ message: message as unknown as JsonObject }] },
    prompt_ids: prompt,
    response_ids: t.output,
    response_logprobs: fakeResult(t.output, eot).logprobs,
    finish_reason: "stop",
    weight_version: "w",
    cached_tokens: 0,
    latency_ms: 0,
    replica: "r",
    metadata: {},
  };
}

function playSession({ family, tok, eot, outputs }: Subject, index: number): SessionResult {
  const rnd = prng(SEED * 1_000_003 + index);
  const flags: Flags = {
    splits: rnd() < 0.6,
    think: rnd() < 0.5,
    reserialise: rnd() < 0.4,
    keepReasoning: rnd() < 0.5,
    compaction: rnd() < 0.2,
  };
  const bridge = new TokenBridge(tok, { harness: "bench" });
  const sys: ChatMessage = { role: "system", content: "You are a coding agent. Use the tools." };
  let messages: ChatMessage[] = [sys];
  const episodes = 2 + Math.floor(rnd() * 2);
  const records: CompletionRecord[] = [];
  const bridgeMs: number[] = [];
  const fullEncodeMs: number[] = [];
  let lastPrompt: number[] = [];
  let lastOutput: number[] = [];
  let turnNo = 0;
  let callsSampled = 0;
  let callsParsed = 0;
  for (let e = 0; e < episodes; e++) {
    const query = `Task ${e + 1}: check the ${WORDS[Math.floor(rnd() * WORDS.length)]} step in ${FILES[e % FILES.length]}.`;
    if (flags.compaction && e === episodes - 1 && e > 0) {
      messages = [sys, { role: "user", content: `Summary of earlier work: ${e} tasks done. ${query}` }];
    } else {
      messages = [...messages, { role: "user", content: query }];
    }
    const calls = 1 + Math.floor(rnd() * 3);
    for (let k = 0; k <= calls; k++) {
      const final = k === calls;
      if (!final) callsSampled++;
      // Every draw is made for every family, so each family plays the same corpus; one without a
      // reasoning block leaves the block out.
      const thinks = flags.think && rnd() < 0.7;
      const thought = thinks ? WORDS[Math.floor(rnd() * WORDS.length)] : "";
      const think = thinks && outputs.thinks ? `<think>\nI keep ${thought} in mind.\n</think>\n\n` : "";
      const body = final
        ? `Done: the ${WORDS[Math.floor(rnd() * WORDS.length)]} part is fine and nothing is missing.`
        : `${rnd() < 0.5 ? `Now the ${WORDS[Math.floor(rnd() * WORDS.length)]} check.\n` : ""}${callText(outputs, rnd)}`;
      const output = [...tok.encode(think), ...sampledIds(tok, body, flags.splits, rnd), eot];
      const turn: Turn = { messages, output };

      // Token mode: bridge + parse + commit, timed.
      const t0 = performance.now();
      const prepared = bridge.prepare({ messages, tools });
      let n = 0;
      const { message, outcome } = turnOutcome(tok, fakeResult(output, eot), {
        tools: toolDefs,
        toolCallParser: family.toolCallParser,
        reasoningParser: family.reasoningParser,
        makeId: () => `call_${turnNo}_${n++}`,
      });
      bridge.commit(prepared, outcome);
      bridgeMs.push(performance.now() - t0);
      callsParsed += message.tool_calls?.length ?? 0;

      // Chat-server mode: the whole history rendered and encoded again.
      const t1 = performance.now();
      const serverPrompt = tok.encode(tok.render(messages, { tools }));
      fullEncodeMs.push(performance.now() - t1);
      records.push(record(turnNo, serverPrompt, turn, message, eot));
      lastPrompt = [...prepared.promptIds];
      lastOutput = output;
      turnNo++;

      messages = [...messages, echo(message, flags)];
      for (const [j, c] of (message.tool_calls ?? []).entries())
        messages.push({ role: "tool", tool_call_id: c.id ?? `x${j}`, content: `line ${j + 1}: ok` });
    }
  }
  const pm = buildPrefixMerging(records, { session_id: "s", task_id: "t", config: {} });
  const pmOne =
    pm.metadata.chain_count === 1 &&
    pm.metadata.truncated_chains === 0 &&
    pm.metadata.dropped_completions === 0;
  const last = records.at(-1)!;
  const pt = pm.traces[0]!;
  const pmExact =
    pmOne && sameIds([...pt.prompt_ids, ...pt.response_ids], [...last.prompt_ids, ...last.response_ids]);
  const traces = buildConversationTraces(bridge.turns());
  const ct = traces[0]!;
  const convOne = traces.length === 1;
  const convExact =
    convOne && sameIds([...ct.prompt_ids, ...ct.response_ids], [...lastPrompt, ...lastOutput]);
  return {
    flags,
    turns: turnNo,
    prefixOneChain: pmOne,
    prefixExact: pmExact,
    convOneChain: convOne,
    convExact,
    bridgeMs,
    fullEncodeMs,
    verdicts: bridge.verdictCounts(),
    callsSampled,
    callsParsed,
  };
}

function sameIds(a: readonly number[], b: readonly number[]): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

function pct(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] ?? 0;
}

const share = (rs: SessionResult[], key: keyof SessionResult): number | null =>
  rs.length === 0 ? null : rs.filter((r) => r[key] === true).length / rs.length;
const percent = (x: number | null) => (x === null ? "-" : `${(100 * x).toFixed(1)}%`);
const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
const timing = (xs: number[]) => ({ mean: mean(xs), p50: pct(xs, 50), p99: pct(xs, 99) });

/** One family's figures (also the `--json` output, one entry per family). */
interface FamilyFigures {
  family: string;
  describes: string;
  seed: number;
  sessions: number;
  turns: number;
  /** Shares of sessions (0–1; null when no session of the row). */
  rows: Array<{
    name: string;
    n: number;
    prefixOneChain: number | null;
    prefixExact: number | null;
    convOneChain: number | null;
    convExact: number | null;
  }>;
  perTurnMs: { bridge: ReturnType<typeof timing>; fullEncode: ReturnType<typeof timing> };
  verdicts: Record<string, number>;
  /** The tokenizer's end-of-turn id (which vocabulary ran), and the calls sampled / parsed back. */
  endOfTurnId: number;
  calls: { sampled: number; parsed: number };
  /** Process CPU time (user + system) per turn, both pipelines together. */
  cpuMsPerTurn: number;
}

/** Plays the corpus for one family (its tokenizer loaded first, outside the measured time). */
async function measure(name: string): Promise<FamilyFigures> {
  const family = modelFamily(name);
  const tok = await loadFamilyTokenizer(family);
  const subject: Subject = {
    family,
    tok,
    eot: new TokenBridge(tok).endOfTurnId,
    outputs: familyOutputs(family),
  };
  const cpuStart = process.cpuUsage();
  const results: SessionResult[] = [];
  for (let i = 0; i < SESSIONS; i++) results.push(playSession(subject, i));
  const cpu = process.cpuUsage(cpuStart);
  const groups: Array<[string, SessionResult[]]> = [
    ["all sessions", results],
    ["non-canonical splits", results.filter((r) => r.flags.splits)],
    ["tool calls re-serialised", results.filter((r) => r.flags.reserialise)],
    // A family without a reasoning block writes none: no row rather than an empty one.
    ...(subject.outputs.thinks
      ? [["<think> blocks", results.filter((r) => r.flags.think)] as [string, SessionResult[]]]
      : []),
    ["compaction", results.filter((r) => r.flags.compaction)],
    ["no compaction", results.filter((r) => !r.flags.compaction)],
  ];
  const turns = results.reduce((n, r) => n + r.turns, 0);
  const verdicts: Record<string, number> = {};
  for (const r of results)
    for (const [v, c] of Object.entries(r.verdicts)) verdicts[v] = (verdicts[v] ?? 0) + c;
  return {
    family: family.name,
    describes: subject.outputs.describes,
    seed: SEED,
    sessions: SESSIONS,
    turns,
    rows: groups.map(([row, rs]) => ({
      name: row,
      n: rs.length,
      prefixOneChain: share(rs, "prefixOneChain"),
      prefixExact: share(rs, "prefixExact"),
      convOneChain: share(rs, "convOneChain"),
      convExact: share(rs, "convExact"),
    })),
    perTurnMs: {
      bridge: timing(results.flatMap((r) => r.bridgeMs)),
      fullEncode: timing(results.flatMap((r) => r.fullEncodeMs)),
    },
    verdicts,
    endOfTurnId: subject.eot,
    calls: {
      sampled: results.reduce((n, r) => n + r.callsSampled, 0),
      parsed: results.reduce((n, r) => n + r.callsParsed, 0),
    },
    cpuMsPerTurn: (cpu.user + cpu.system) / 1000 / turns,
  };
}

const row = (f: FamilyFigures, name: string) => f.rows.find((r) => r.name === name)!;
const ms = (x: number) => x.toFixed(2);

function printSummary(all: FamilyFigures[]): void {
  console.log(
    `bench:tokens — ${SESSIONS} sessions per family (seed ${SEED}): one row per family, then each family's tables\n`,
  );
  console.log(
    "| family | tokenizer and template | turns | prefix_merging token-exact | conversation token-exact | no compaction: conversation token-exact | bridge p50 (ms) | render + encode p50 (ms) |",
  );
  console.log("|---|---|---|---|---|---|---|---|");
  for (const f of all) {
    const everyone = row(f, "all sessions");
    console.log(
      `| ${f.family} | ${f.describes} | ${f.turns} | ${percent(everyone.prefixExact)} | ${percent(everyone.convExact)} | ${percent(row(f, "no compaction").convExact)} | ${ms(f.perTurnMs.bridge.p50)} | ${ms(f.perTurnMs.fullEncode.p50)} |`,
    );
  }
}

function printFamily(f: FamilyFigures): void {
  console.log(`\n### ${f.family}: ${f.sessions} sessions, ${f.turns} turns, ${f.describes}\n`);
  console.log(
    "| sessions | n | prefix_merging one chain | prefix_merging token-exact | conversation one chain | conversation token-exact |",
  );
  console.log("|---|---|---|---|---|---|");
  for (const r of f.rows) {
    console.log(
      `| ${r.name} | ${r.n} | ${percent(r.prefixOneChain)} | ${percent(r.prefixExact)} | ${percent(r.convOneChain)} | ${percent(r.convExact)} |`,
    );
  }
  if (!f.rows.some((r) => r.name === "<think> blocks"))
    console.log(`\n${f.family} has no reasoning block: its sessions write no \`<think>\` blocks.`);
  const { bridge, fullEncode } = f.perTurnMs;
  console.log("\n| per turn (ms) | mean | p50 | p99 |");
  console.log("|---|---|---|---|");
  console.log(
    `| token bridge (prepare + parse + commit) | ${ms(bridge.mean)} | ${ms(bridge.p50)} | ${ms(bridge.p99)} |`,
  );
  console.log(
    `| render + encode the whole history | ${ms(fullEncode.mean)} | ${ms(fullEncode.p50)} | ${ms(fullEncode.p99)} |`,
  );
  console.log(
    `\nturn verdicts (conversation): ${Object.entries(f.verdicts)
      .map(([v, c]) => `${v} ${c}`)
      .join(", ")}`,
  );
  console.log(
    `tool calls: ${f.calls.parsed} of ${f.calls.sampled} sampled read back by the ${f.family} parser; end of turn id ${f.endOfTurnId}`,
  );
  console.log(`process CPU time: ${ms(f.cpuMsPerTurn)} ms per turn for both pipelines together`);
}

const figures: FamilyFigures[] = [];
for (const name of FAMILIES) figures.push(await measure(name));
printSummary(figures);
for (const f of figures) printFamily(f);
if (cli.json) writeFileSync(cli.json, `${JSON.stringify(figures, null, 2)}\n`);
