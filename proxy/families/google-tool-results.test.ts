/**
 * Gemini function results as the model sees them: `functionResponse.response = {output}` (what
 * Gemini CLI sends for every tool) reaches the chat template as the output text itself, other
 * responses as JSON. Through the proxy in token mode with the real Qwen3 tokenizer and template.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { JsonObject } from "../../protocol";
import { type ChatTokenizer, loadChatTokenizer } from "../../tokenizer/chat-tokenizer";
import { type RecordingProxy, startProxy } from "../server";
import { type GenerateDouble, IM_END, startGenerateDouble } from "../testing/generate-double";
import { functionResponseText, googleToChat } from "./google";

const FILE = 'function subtract(a, b) {\n  return a + b; // "bug"\n}\n';

describe("functionResponseText", () => {
  it("unwraps a lone output key and keeps every other response as JSON", () => {
    expect(functionResponseText({ output: FILE })).toBe(FILE);
    expect(functionResponseText({ output: { lines: 3 } })).toBe('{"lines":3}');
    expect(functionResponseText({ error: "no such file" })).toBe('{"error":"no such file"}');
    expect(functionResponseText({ output: "x", error: "y" })).toBe('{"output":"x","error":"y"}');
    expect(functionResponseText({ result: 391 })).toBe('{"result":391}');
    expect(functionResponseText(undefined)).toBe("{}");
  });

  it("googleToChat gives the tool message the output text, answered by call id", () => {
    const chat = googleToChat(
      {
        contents: [
          { role: "user", parts: [{ text: "read it" }] },
          {
            role: "model",
            parts: [{ functionCall: { id: "c1", name: "read_file", args: { file_path: "a" } } }],
          },
          {
            role: "user",
            parts: [{ functionResponse: { id: "c1", name: "read_file", response: { output: FILE } } }],
          },
        ],
      },
      "m",
    );
    expect((chat.messages as JsonObject[])[2]).toEqual({ role: "tool", tool_call_id: "c1", content: FILE });
  });
});

describe("in token mode, the prompt holds the output as text", () => {
  let tok: ChatTokenizer;
  let engine: GenerateDouble;
  let proxy: RecordingProxy;
  beforeAll(async () => {
    tok = await loadChatTokenizer();
    engine = await startGenerateDouble();
    proxy = await startProxy({
      engine: "sglang",
      engineUrl: engine.url,
      modelServed: "Qwen/Qwen3-8B",
      logger: { info() {}, warn() {}, error() {} },
    });
  }, 30_000);
  afterAll(async () => {
    await proxy.close();
    await engine.close();
  });

  it("renders {output} unescaped inside <tool_response> and {error} as JSON", async () => {
    const { key } = proxy.openSession("g-1", { task_id: "t", harness: "gemini_cli" });
    const tools = [
      {
        functionDeclarations: [
          {
            name: "read_file",
            parametersJsonSchema: { type: "object", properties: { file_path: { type: "string" } } },
          },
        ],
      },
    ];
    const call = { functionCall: { id: "c1", name: "read_file", args: { file_path: "calc.js" } } };
    const ask = (response: JsonObject) =>
      fetch(`${proxy.url}/v1beta/models/m:generateContent`, {
        method: "POST",
        headers: { "x-goog-api-key": key, "content-type": "application/json" },
        body: JSON.stringify({
          tools,
          contents: [
            { role: "user", parts: [{ text: "read calc.js" }] },
            { role: "model", parts: [call] },
            { role: "user", parts: [{ functionResponse: { id: "c1", name: "read_file", response } }] },
          ],
        }),
      }).then((r) => r.json());
    engine.queue.push(
      { output: [...tok.encode("Done."), IM_END] },
      { output: [...tok.encode("No."), IM_END] },
    );
    await ask({ output: FILE });
    await ask({ error: "File not found: calc.js" });
    const [ok, failed] = proxy.completions("g-1");
    expect(tok.decode(ok!.prompt_ids)).toContain(`<tool_response>\n${FILE}\n</tool_response>`);
    expect(tok.decode(failed!.prompt_ids)).toContain(
      '<tool_response>\n{"error":"File not found: calc.js"}\n</tool_response>',
    );
  });
});
