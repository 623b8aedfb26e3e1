/**
 * `npm run bench:long-history`: the token bridge at long histories, with the real Qwen3 tokenizer
 * and template. One agent session grows, tool call after tool call (each tool result a file's
 * worth of code), until its history holds 8k, 32k and 128k tokens; at each size it then plays
 * further turns (a short tool call and result each) and times every turn of the bridge
 * (prepare + parse + commit), in CPU time of this process (`process.cpuUsage`) and wall time, and
 * puts it beside rendering and encoding the whole history again (what a chat server does every
 * turn). It also weighs what the proxy keeps per session at that size: the bridge's heap (its
 * turns, ids and messages), from the heap before and after with a forced GC in between.
 *
 * Goal (issue: scale, measured): ≤ 1 ms of CPU per turn at 32k tokens.
 *
 * Run: `npm run bench:long-history` (env: BENCH_TURNS per size, default 20; BENCH_JSON=FILE writes
 * the figures). Prints a Markdown table.
 *
 * @module
 */
import { writeFileSync } from "node:fs";
import { performance } from "node:perf_hooks";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import type { GenerateResult } from "../proxy/engines/sglang-token/generate";
import { turnOutcome } from "../proxy/engines/sglang-token/turn";
import { TokenBridge } from "../tokenizer/bridge";
import {
  type ChatMessage,
  loadChatTokenizer,
  sglangToolDumps,
  type ToolDefinition,
} from "../tokenizer/chat-tokenizer";

const TURNS = Number(process.env.BENCH_TURNS ?? 20);
/** History sizes measured (tokens); env BENCH_SIZES, a comma list. */
const SIZES = (process.env.BENCH_SIZES ?? "8192,32768,131072").split(",").map(Number);

// A forced GC makes the heap figures mean something; --expose-gc at run time, not a CLI flag.
setFlagsFromString("--expose-gc");
const gc = runInNewContext("gc") as () => void;

const tok = await loadChatTokenizer();
const EOT = tok.tokenId("<|im_end|>")!;
const toolDefs: ToolDefinition[] = [
  {
    type: "function",
    function: {
      name: "read_file",
      description: "Read a file",
      parameters: { type: "object", properties: { path: { type: "string" } }, required: ["path"] },
    },
  },
];
const tools = sglangToolDumps(toolDefs);

/** A file's worth of plausible code (about 1,000 tokens), different for each `n`. */
function fileText(n: number): string {
  const lines: string[] = [];
  for (let i = 0; i < 60; i++)
    lines.push(
      `export function step${n}_${i}(input: number[]): number { return input.reduce((a, b) => a + b * ${i + n}, 0); }`,
    );
  return lines.join("\n");
}

function generated(output: number[]): GenerateResult {
  return {
    rid: null,
    outputIds: output,
    logprobs: output.map((_, i) => -((i % 97) + 1) / 100),
    finish: { type: "stop", matched: EOT, message: null },
    weightVersion: "w",
    cachedTokens: 0,
    promptTokens: null,
    completionTokens: output.length,
    promptTokenIds: null,
  };
}

/** One turn through the bridge: the model calls read_file on `path`; returns the message and CPU/wall ms. */
function turn(bridge: TokenBridge, messages: ChatMessage[], path: string, id: string) {
  const output = [
    ...tok.encode(`<tool_call>\n{"name": "read_file", "arguments": {"path": "${path}"}}\n</tool_call>`),
    EOT,
  ];
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  const prepared = bridge.prepare({ messages, tools });
  const { message, outcome } = turnOutcome(tok, generated(output), { tools: toolDefs, makeId: () => id });
  bridge.commit(prepared, outcome);
  const wallMs = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  return { message, promptTokens: prepared.promptIds.length, cpuMs: (cpu.user + cpu.system) / 1000, wallMs };
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? Number.NaN;
}

/** Figures at one history size. */
export interface LongHistoryRow {
  targetTokens: number;
  promptTokens: number;
  turns: number;
  cpuMsP50: number;
  cpuMsP99: number;
  wallMsP50: number;
  /** Render + encode of the whole history once (the chat server's way), ms. */
  fullEncodeMs: number;
  /** Heap the bridge holds for the session (MiB). */
  bridgeHeapMiB: number;
}

const rows: LongHistoryRow[] = [];
gc();
const heapStart = process.memoryUsage().heapUsed;
const bridge = new TokenBridge(tok, { harness: "bench" });
let messages: ChatMessage[] = [
  { role: "system", content: "You are a coding agent. Read what you need." },
  { role: "user", content: "Sum up what the files in src/ compute." },
];
let n = 0;
for (const target of SIZES) {
  // Grow: tool calls whose results are whole files, until the prompt reaches the target.
  let promptTokens = 0;
  while (promptTokens < target) {
    const t = turn(bridge, messages, `src/f${n}.ts`, `call_${n}`);
    promptTokens = t.promptTokens;
    messages = [...messages, t.message, { role: "tool", tool_call_id: `call_${n}`, content: fileText(n) }];
    n++;
  }
  // Measure: short tool results, so the history stays at this size.
  const cpu: number[] = [];
  const wall: number[] = [];
  let last = 0;
  for (let k = 0; k < TURNS; k++) {
    const t = turn(bridge, messages, `notes/${k}.md`, `call_${n}`);
    cpu.push(t.cpuMs);
    wall.push(t.wallMs);
    last = t.promptTokens;
    messages = [
      ...messages,
      t.message,
      { role: "tool", tool_call_id: `call_${n}`, content: `note ${k}: ok` },
    ];
    n++;
  }
  const t0 = performance.now();
  tok.encode(tok.render(messages, { tools }));
  const fullEncodeMs = performance.now() - t0;
  // The heap now holds the bridge and the harness's `messages`; weigh a copy of the messages and
  // take it off.
  gc();
  const held = process.memoryUsage().heapUsed - heapStart;
  let copy: ChatMessage[] | null = structuredClone(messages);
  gc();
  const messagesHeap = process.memoryUsage().heapUsed - heapStart - held;
  if (copy.length !== messages.length) throw new Error("copy lost messages");
  copy = null;
  const bridgeHeap = held - messagesHeap;
  cpu.sort((a, b) => a - b);
  wall.sort((a, b) => a - b);
  rows.push({
    targetTokens: target,
    promptTokens: last,
    turns: TURNS,
    cpuMsP50: percentile(cpu, 50),
    cpuMsP99: percentile(cpu, 99),
    wallMsP50: percentile(wall, 50),
    fullEncodeMs,
    bridgeHeapMiB: bridgeHeap / 2 ** 20,
  });
  console.error(`${target} tokens: done`);
}
if (bridge.turns().length === 0) throw new Error("the bridge recorded no turn");

if (process.env.BENCH_JSON) writeFileSync(process.env.BENCH_JSON, `${JSON.stringify(rows, null, 2)}\n`);
console.log("\nToken bridge at long histories (real Qwen3 tokenizer and template), one session growing");
console.log(
  `per turn = prepare + parse + commit, ${TURNS} turns at each size; goal ≤ 1 ms CPU per turn at 32k\n`,
);
console.log(
  "| history (tokens) | bridge CPU per turn p50 / p99 (ms) | wall p50 (ms) | whole history rendered + encoded (ms) | ratio | bridge heap (MiB) |",
);
console.log("|---:|---|---:|---:|---:|---:|");
for (const r of rows)
  console.log(
    `| ${r.promptTokens} | ${r.cpuMsP50.toFixed(2)} / ${r.cpuMsP99.toFixed(2)} | ${r.wallMsP50.toFixed(2)} | ${r.fullEncodeMs.toFixed(1)} | ${(r.fullEncodeMs / r.wallMsP50).toFixed(0)}× | ${r.bridgeHeapMiB.toFixed(1)} |`,
  );
