/**
 * `npm run bench:tokens`: token mode against re-tokenisation, on a generated corpus of multi-turn
 * tool-using sessions with drift-provoking text (non-canonical BPE splits, tool calls the harness
 * re-serialises, Qwen3 `<think>` blocks, compaction), with the real Qwen3 tokenizer and template.
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
 * Env: BENCH_SESSIONS (default 300), BENCH_SEED (default 1).
 */
import { performance } from "node:perf_hooks";
import type { CompletionRecord, JsonObject } from "../protocol";
import { buildPrefixMerging } from "../proxy/builders";
import { buildConversationTraces } from "../proxy/builders/conversation";
import type { GenerateResult } from "../proxy/engines/sglang-token/generate";
import { turnOutcome } from "../proxy/engines/sglang-token/turn";
import { TokenBridge } from "../tokenizer/bridge";
import {
  type ChatMessage,
  loadChatTokenizer,
  sglangToolDumps,
  type ToolDefinition,
} from "../tokenizer/chat-tokenizer";

const SESSIONS = Number(process.env.BENCH_SESSIONS ?? 300);
const SEED = Number(process.env.BENCH_SEED ?? 1);

const tok = await loadChatTokenizer();
const EOT = tok.tokenId("<|im_end|>")!;

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
  think: boolean;
  reserialise: boolean;
  keepReasoning: boolean;
  compaction: boolean;
}

/** Ids of `text` where the drift words are sampled as two tokens (" fish" + "ing"), not the merge. */
function sampledIds(text: string, splits: boolean, rnd: () => number): number[] {
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

function callText(rnd: () => number): string {
  const file = FILES[Math.floor(rnd() * FILES.length)]!;
  const word = WORDS[Math.floor(rnd() * WORDS.length)]!;
  const [name, args] =
    rnd() < 0.5 ? ["bash", { cmd: `grep -n ${word} ${file}` }] : ["read_file", { path: file, limit: 20 }];
  return `<tool_call>\n{"name": "${name}", "arguments": ${dumps(args)}}\n</tool_call>`;
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
}

function fakeResult(output: number[]): GenerateResult {
  return {
    rid: null,
    outputIds: output,
    logprobs: output.map((id, i) => -((id * 7 + i) % 97) / 100 - 0.01),
    finish: { type: "stop", matched: EOT, message: null },
    weightVersion: "w",
    cachedTokens: 0,
    promptTokens: null,
    completionTokens: output.length,
    promptTokenIds: null,
  };
}

function record(i: number, prompt: number[], t: Turn, message: ChatMessage): CompletionRecord {
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
    response_logprobs: fakeResult(t.output).logprobs,
    finish_reason: "stop",
    weight_version: "w",
    cached_tokens: 0,
    latency_ms: 0,
    replica: "r",
    metadata: {},
  };
}

function playSession(index: number): SessionResult {
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
      const think =
        flags.think && rnd() < 0.7
          ? `<think>\nI keep ${WORDS[Math.floor(rnd() * WORDS.length)]} in mind.\n</think>\n\n`
          : "";
      const body = final
        ? `Done: the ${WORDS[Math.floor(rnd() * WORDS.length)]} part is fine and nothing is missing.`
        : `${rnd() < 0.5 ? `Now the ${WORDS[Math.floor(rnd() * WORDS.length)]} check.\n` : ""}${callText(rnd)}`;
      const output = [...tok.encode(think), ...sampledIds(body, flags.splits, rnd), EOT];
      const turn: Turn = { messages, output };

      // Token mode: bridge + parse + commit, timed.
      const t0 = performance.now();
      const prepared = bridge.prepare({ messages, tools });
      let n = 0;
      const { message, outcome } = turnOutcome(tok, fakeResult(output), {
        tools: toolDefs,
        makeId: () => `call_${turnNo}_${n++}`,
      });
      bridge.commit(prepared, outcome);
      bridgeMs.push(performance.now() - t0);

      // Chat-server mode: the whole history rendered and encoded again.
      const t1 = performance.now();
      const serverPrompt = tok.encode(tok.render(messages, { tools }));
      fullEncodeMs.push(performance.now() - t1);
      records.push(record(turnNo, serverPrompt, turn, message));
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
  };
}

function sameIds(a: readonly number[], b: readonly number[]): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

function pct(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] ?? 0;
}

const cpuStart = process.cpuUsage();
const results: SessionResult[] = [];
for (let i = 0; i < SESSIONS; i++) results.push(playSession(i));
const cpu = process.cpuUsage(cpuStart);

const share = (rs: SessionResult[], key: keyof SessionResult) =>
  rs.length === 0 ? "-" : `${((100 * rs.filter((r) => r[key] === true).length) / rs.length).toFixed(1)}%`;
const rows: Array<[string, SessionResult[]]> = [
  ["all sessions", results],
  ["non-canonical splits", results.filter((r) => r.flags.splits)],
  ["tool calls re-serialised", results.filter((r) => r.flags.reserialise)],
  ["<think> blocks", results.filter((r) => r.flags.think)],
  ["compaction", results.filter((r) => r.flags.compaction)],
  ["no compaction", results.filter((r) => !r.flags.compaction)],
];
const turns = results.reduce((n, r) => n + r.turns, 0);
console.log(
  `bench:tokens — ${SESSIONS} sessions, ${turns} turns, real Qwen3 tokenizer and template (seed ${SEED})\n`,
);
console.log(
  "| sessions | n | prefix_merging one chain | prefix_merging token-exact | conversation one chain | conversation token-exact |",
);
console.log("|---|---|---|---|---|---|");
for (const [name, rs] of rows) {
  console.log(
    `| ${name} | ${rs.length} | ${share(rs, "prefixOneChain")} | ${share(rs, "prefixExact")} | ${share(rs, "convOneChain")} | ${share(rs, "convExact")} |`,
  );
}
const bridgeMs = results.flatMap((r) => r.bridgeMs);
const fullMs = results.flatMap((r) => r.fullEncodeMs);
const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
console.log("\n| per turn (ms) | mean | p50 | p99 |");
console.log("|---|---|---|---|");
console.log(
  `| token bridge (prepare + parse + commit) | ${mean(bridgeMs).toFixed(2)} | ${pct(bridgeMs, 50).toFixed(2)} | ${pct(bridgeMs, 99).toFixed(2)} |`,
);
console.log(
  `| render + encode the whole history | ${mean(fullMs).toFixed(2)} | ${pct(fullMs, 50).toFixed(2)} | ${pct(fullMs, 99).toFixed(2)} |`,
);
const verdictTotals: Record<string, number> = {};
for (const r of results)
  for (const [v, c] of Object.entries(r.verdicts)) verdictTotals[v] = (verdictTotals[v] ?? 0) + c;
console.log(
  `\nturn verdicts (conversation): ${Object.entries(verdictTotals)
    .map(([v, c]) => `${v} ${c}`)
    .join(", ")}`,
);
console.log(
  `process CPU time: ${((cpu.user + cpu.system) / 1000 / turns).toFixed(2)} ms per turn for both pipelines together`,
);
