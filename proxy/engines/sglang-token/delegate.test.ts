/**
 * Delegated parsing against the simulated engine and the simulated router, which refuse parser
 * names the way SGLang and its router do.
 */
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startSimRouter } from "../../../sim/router";
import { type SimEngineHandle, startSimEngine } from "../../../sim/server";
import { type RecordingProxy, startProxy } from "../../server";
import { delegatedParserNames, UnmappedParserError } from "./delegate";
import { TokenMode, TokenModeConfigError } from "./mode";

const MODEL = "Qwen/Qwen3-0.6B";
const quiet = { info() {}, warn() {}, error() {} };
const tools: OpenAI.ChatCompletionTool[] = [
  {
    type: "function",
    function: {
      name: "calculator",
      parameters: { type: "object", properties: { expression: { type: "string" } } },
    },
  },
];

let sim: SimEngineHandle;
const closers: Array<() => Promise<void>> = [];
beforeAll(async () => {
  sim = await startSimEngine({ model: MODEL });
}, 30_000);
afterAll(async () => {
  for (const c of closers.reverse()) await c();
  await sim.close();
});

async function proxyOn(opts: { engineUrl?: string; routerUrl?: string }): Promise<RecordingProxy> {
  const p = await startProxy({
    engine: "sglang",
    modelServed: MODEL,
    delegateParsing: true,
    healthIntervalMs: 0,
    logger: quiet,
    ...opts,
  });
  closers.push(() => p.close());
  return p;
}

async function toolTurn(p: RecordingProxy, id: string) {
  const { key } = p.openSession(id, { harness: "scripted" });
  const openai = new OpenAI({ apiKey: key, baseURL: `${p.url}/v1`, maxRetries: 0 });
  const r = await openai.chat.completions.create({
    model: "m",
    messages: [{ role: "user", content: "What is 6 * 7?" }],
    tools,
  });
  return r.choices[0]!;
}

describe("parser names for SGLang", () => {
  it("maps Polar's names to the engine's and the router's (SGLang has no `qwen3` tool parser)", () => {
    expect(delegatedParserNames("qwen3", "qwen3")).toEqual({
      tool: { engine: "qwen25", router: "qwen" },
      reasoning: { engine: "qwen3", router: "qwen3" },
    });
    expect(delegatedParserNames("qwen3_coder", "deepseek-r1")).toEqual({
      tool: { engine: "qwen3_coder", router: "qwen_coder" },
      reasoning: { engine: "deepseek-r1", router: "deepseek_r1" },
    });
    expect(delegatedParserNames("hermes", "none").reasoning).toBeNull();
    expect(() => delegatedParserNames("llama3", "qwen3")).toThrow(UnmappedParserError);
    expect(() => delegatedParserNames("qwen3", "kimi")).toThrow(/kimi.*no SGLang parser/);
  });

  it("refuses an unknown name at start, naming the option", async () => {
    const err = await TokenMode.create({ delegateParsing: true, reasoningParser: "kimi" }, MODEL).catch(
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(TokenModeConfigError);
    expect((err as TokenModeConfigError).option).toBe("reasoningParser");
    const mode = await TokenMode.create({ delegateParsing: true }, MODEL);
    expect(mode.delegated?.tool.engine).toBe("qwen25");
  });

  it("a model family sets the tokenizer, its template and both parsers; each can still be given", async () => {
    const ds = await TokenMode.create(
      { modelFamily: "deepseek_v3", delegateParsing: true },
      "deepseek-ai/DeepSeek-V3",
    );
    expect([ds.toolCallParser, ds.reasoningParser]).toEqual(["deepseekv3", "none"]);
    expect(ds.delegated).toEqual({ tool: { engine: "deepseekv3", router: "deepseek" }, reasoning: null });
    expect(ds.tokenizer.tokenId("<｜end▁of▁sentence｜>")).toBe(1);
    // The family's tool template, not the folder's (which lists no tools).
    const tools = [{ type: "function", function: { name: "calc" } }];
    expect(ds.tokenizer.render([{ role: "user", content: "x" }], { tools })).toContain("## Tools");
    const hermes = await TokenMode.create({ modelFamily: "deepseek_v3", toolCallParser: "hermes" }, "m");
    expect([hermes.toolCallParser, hermes.reasoningParser]).toEqual(["hermes", "none"]);
    const err = await TokenMode.create({ modelFamily: "llama" }, "m").catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TokenModeConfigError);
    expect((err as TokenModeConfigError).option).toBe("modelFamily");
    const qwen = await TokenMode.create({}, MODEL);
    expect([qwen.toolCallParser, qwen.reasoningParser, qwen.tokenizer.tokenId("<|im_end|>")]).toEqual([
      "qwen3",
      "qwen3",
      151645,
    ]);
  });
});

describe("--delegate-parsing end to end", () => {
  it("a tool turn through the simulated engine comes back with tool_calls (default parser qwen3)", async () => {
    const p = await proxyOn({ engineUrl: sim.url });
    const choice = await toolTurn(p, "d1");
    const m = choice.message as OpenAI.ChatCompletionMessage & { reasoning_content?: string };
    expect(choice.finish_reason).toBe("tool_calls");
    expect(m.tool_calls?.[0]).toMatchObject({ type: "function", function: { name: "calculator" } });
    const call = m.tool_calls![0] as OpenAI.ChatCompletionMessageFunctionToolCall;
    expect(JSON.parse(call.function.arguments)).toHaveProperty("expression");
    expect(m.reasoning_content).toMatch(/6 \* 7/);
  });

  it("through the router itself (its workers speak gRPC) uses /parse/reasoning and /parse/function_call", async () => {
    const router = await startSimRouter({ workers: [sim.url], connectionMode: "gRPC" });
    closers.push(() => router.close());
    const p = await proxyOn({ routerUrl: router.url });
    expect(p.status().replicas).toMatchObject([{ url: router.url, source: "router", aborts: "disconnect" }]);
    const choice = await toolTurn(p, "d2");
    expect(choice.finish_reason).toBe("tool_calls");
    expect(choice.message.tool_calls?.[0]).toMatchObject({ function: { name: "calculator" } });
    expect(router.requests.filter((r) => r.startsWith("POST"))).toEqual([
      "POST /generate",
      "POST /parse/reasoning",
      "POST /parse/function_call",
    ]);
  });
});
