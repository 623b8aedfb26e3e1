import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type SimEngineHandle, startSimEngine } from "./server";

let sim: SimEngineHandle;
beforeAll(async () => {
  sim = await startSimEngine({ port: 0 });
});
afterAll(async () => {
  await sim.close();
});

interface Answer {
  normal_text?: string;
  calls: Array<{ parameters: string }>;
  error: { message: string };
}

async function post(path: string, body: unknown): Promise<{ status: number; json: Answer }> {
  const r = await fetch(`${sim.url}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  return { status: r.status, json: (await r.json()) as Answer };
}

const tools = [
  { type: "function", function: { name: "calc", parameters: { type: "object", properties: {} } } },
];
const text =
  'Let me add.\n<tool_call>\n{"name": "calc", "arguments": {"expr": "1+2", "note": "é"}}\n</tool_call>';

describe("POST /parse_function_call (SGLang's shape)", () => {
  it("gives normal_text and calls whose parameters are a JSON string", async () => {
    const r = await post("/parse_function_call", { text, tool_call_parser: "qwen25", tools });
    expect(r.status).toBe(200);
    expect(r.json).toEqual({
      normal_text: "Let me add.\n",
      calls: [
        { tool_index: -1, name: "calc", parameters: '{"expr": "1+2", "note": "é"}', tool_call_id: null },
      ],
    });
    expect(JSON.parse(r.json.calls[0]!.parameters)).toEqual({ expr: "1+2", note: "é" });
  });

  it("parses no call without tools, as SGLang's parse_non_stream", async () => {
    const r = await post("/parse_function_call", { text, tool_call_parser: "qwen", tools: [] });
    expect(r.json).toEqual({ normal_text: text, calls: [] });
  });

  it("refuses a parser name SGLang does not register (there is no `qwen3`) with a 500", async () => {
    const r = await post("/parse_function_call", { text, tool_call_parser: "qwen3", tools });
    expect(r.status).toBe(500);
    expect(r.json.error.message).toBe("Unsupported tool_call_parser: qwen3");
    expect((await post("/parse_function_call", { text, tools })).json.error.message).toContain("None");
    expect((await post("/parse_function_call", { tool_call_parser: "qwen25" })).status).toBe(400);
  });
});

describe("POST /separate_reasoning (SGLang's shape)", () => {
  it("splits reasoning_text from text; the *-thinking names start inside the block", async () => {
    const r = await post("/separate_reasoning", {
      text: "<think>\nhm\n</think>\n\n42",
      reasoning_parser: "qwen3",
    });
    expect(r.json).toEqual({ reasoning_text: "hm\n", text: "42" });
    const forced = await post("/separate_reasoning", {
      text: "hm</think>42",
      reasoning_parser: "qwen3-thinking",
    });
    expect(forced.json).toEqual({ reasoning_text: "hm", text: "42" });
    const none = await post("/separate_reasoning", { text: "plain", reasoning_parser: "qwen3" });
    expect(none.json).toEqual({ reasoning_text: "", text: "plain" });
  });

  it("refuses an unknown reasoning parser as SGLang does (ValueError → 500)", async () => {
    const r = await post("/separate_reasoning", { text: "x", reasoning_parser: "qwen3_thinking" });
    expect(r.status).toBe(500);
    expect(r.json.error.message).toBe("Unsupported model type: qwen3_thinking");
  });
});
