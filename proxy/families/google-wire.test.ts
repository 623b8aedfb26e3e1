/**
 * Gemini requests as Google's Python SDK sends them: snake_case proto field names (function
 * declarations, thinkingConfig) read as their camelCase JSON names with free-form values kept, and
 * a streamed turn sent back as one `model` content per chunk read as one assistant turn.
 */
import { describe, expect, it } from "vitest";
import { encodeReasoning } from "../json";
import { google, googleToChat } from "./google";
import { jsonName, normalizeGeminiRequest, standardBase64 } from "./google-wire";

const ctx = (path: string) => ({ path, query: new URLSearchParams(), headers: {} });

describe("Gemini proto field names", () => {
  it("names fields as proto3 JSON does", () => {
    expect(jsonName("thought_signature")).toBe("thoughtSignature");
    expect(jsonName("parameters_json_schema")).toBe("parametersJsonSchema");
    expect(jsonName("mimeType")).toBe("mimeType");
  });

  it("camel-cases message fields but keeps arguments, responses, JSON schemas and property names", () => {
    const body = {
      contents: [
        {
          role: "model",
          parts: [
            { function_call: { name: "edit", args: { file_path: "a.py" } }, thought_signature: "c2ln" },
          ],
        },
        { role: "user", parts: [{ function_response: { name: "edit", response: { exit_code: 0 } } }] },
      ],
      tools: [
        {
          function_declarations: [
            { name: "a", parameters_json_schema: { type: "object", properties: { old_string: {} } } },
            { name: "b", parameters: { type: "OBJECT", properties: { file_path: { max_length: 9 } } } },
          ],
        },
      ],
      generation_config: { max_output_tokens: 8, thinking_config: { include_thoughts: true } },
    };
    expect(normalizeGeminiRequest(body)).toEqual({
      contents: [
        {
          role: "model",
          parts: [{ functionCall: { name: "edit", args: { file_path: "a.py" } }, thoughtSignature: "c2ln" }],
        },
        { role: "user", parts: [{ functionResponse: { name: "edit", response: { exit_code: 0 } } }] },
      ],
      tools: [
        {
          functionDeclarations: [
            { name: "a", parametersJsonSchema: { type: "object", properties: { old_string: {} } } },
            { name: "b", parameters: { type: "OBJECT", properties: { file_path: { maxLength: 9 } } } },
          ],
        },
      ],
      generationConfig: { maxOutputTokens: 8, thinkingConfig: { includeThoughts: true } },
    });
  });

  it("reads inline data written in URL-safe base64 (as Pydantic writes bytes) as standard base64", () => {
    const png = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0xfb, 0xff, 0xfe, 0x3e]);
    expect(standardBase64(png.toString("base64url"))).toBe(png.toString("base64"));
    expect(standardBase64(png.toString("base64"))).toBe(png.toString("base64"));
    const chat = googleToChat(
      {
        contents: [
          {
            role: "user",
            parts: [{ inline_data: { data: png.toString("base64url"), mime_type: "image/png" } }],
          },
        ],
      },
      "g",
    );
    expect(chat.messages).toEqual([
      {
        role: "user",
        content: [
          { type: "image_url", image_url: { url: `data:image/png;base64,${png.toString("base64")}` } },
        ],
      },
    ]);
  });

  it("keeps the camelCase spelling when a body has both", () => {
    expect(normalizeGeminiRequest({ maxOutputTokens: 5, max_output_tokens: 9 })).toEqual({
      maxOutputTokens: 5,
    });
    expect(normalizeGeminiRequest({ max_output_tokens: 9, maxOutputTokens: 5 })).toEqual({
      maxOutputTokens: 5,
    });
  });

  it("lets the family read tools and thinking switches sent in snake_case", () => {
    const schema = {
      type: "object",
      properties: { expression: { type: "string" } },
      required: ["expression"],
    };
    const body = {
      contents: [{ role: "user", parts: [{ text: "hi" }] }],
      tools: [{ functionDeclarations: [{ name: "calculator", parameters_json_schema: schema }] }],
      generationConfig: { thinkingConfig: { include_thoughts: true } },
    };
    const parsed = google.parse(body, ctx("/v1beta/models/g:generateContent"));
    expect(parsed.chat.tools).toEqual([
      { type: "function", function: { name: "calculator", parameters: schema } },
    ]);
    expect(parsed.reply.includeThoughts).toBe(true);
    const off = googleToChat(
      { contents: body.contents, generation_config: { thinking_config: { thinking_budget: 0 } } },
      "g",
    );
    expect(off.chat_template_kwargs).toEqual({ enable_thinking: false });
  });
});

describe("a streamed Gemini turn sent back chunk by chunk", () => {
  it("is one assistant message with the text, the calls and the reasoning of its signature", () => {
    const call = { functionCall: { id: "c1", name: "calculator", args: { expression: "1 + 1" } } };
    const chat = googleToChat(
      {
        contents: [
          { role: "user", parts: [{ text: "Q" }] },
          { role: "model", parts: [{ text: "Let me " }] },
          { role: "model", parts: [{ text: "check." }] },
          { role: "model", parts: [{ ...call, thoughtSignature: encodeReasoning("think") }] },
          { role: "model", parts: [{ text: "" }] },
          {
            role: "user",
            parts: [{ functionResponse: { id: "c1", name: "calculator", response: { r: 2 } } }],
          },
        ],
      },
      "g",
    );
    expect(chat.messages).toEqual([
      { role: "user", content: "Q" },
      {
        role: "assistant",
        content: "Let me check.",
        reasoning_content: "think",
        tool_calls: [
          {
            id: "c1",
            type: "function",
            function: { name: "calculator", arguments: '{"expression":"1 + 1"}' },
          },
        ],
      },
      { role: "tool", tool_call_id: "c1", content: '{"r":2}' },
    ]);
  });
});
