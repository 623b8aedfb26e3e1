/**
 * Several text parts of one message, in the families that send content as blocks or parts: they
 * reach the engine side as text parts, and the chat template gets them as SGLang gives a
 * string-content template (Qwen3's) its content, joined with a space, never glued together.
 */
import { beforeAll, describe, expect, it } from "vitest";
import type { JsonObject } from "../../protocol";
import { type ChatTokenizer, loadChatTokenizer } from "../../tokenizer/chat-tokenizer";
import { anthropicToChat } from "./anthropic";
import { partsContent } from "./common";
import { googleToChat } from "./google";
import { responses } from "./responses";

const CTX = "<session_context>\nfolder: /w\n</session_context>";
const ASK = "The tests in test_calculator.js fail.";
const TWO = [CTX, ASK];
const RENDERED = `${CTX} ${ASK}`;

let tok: ChatTokenizer;
beforeAll(async () => {
  tok = await loadChatTokenizer();
});

const ctx = { path: "/v1/responses", query: new URLSearchParams(), headers: {} };
const messagesOf = (chat: JsonObject) => chat.messages as JsonObject[];
const textParts = (texts: string[]) => texts.map((text) => ({ type: "text", text }));
const render = (messages: JsonObject[]) => tok.render(messages, { addGenerationPrompt: true });

describe("partsContent", () => {
  it("one text part is a string; several stay parts; none is empty text", () => {
    expect(partsContent(textParts(["a"]))).toBe("a");
    expect(partsContent(textParts(["a", "b"]))).toEqual(textParts(["a", "b"]));
    expect(partsContent([])).toBe("");
  });
});

describe("text parts reach the template as the engine joins them", () => {
  it("Anthropic: user text blocks, system blocks and a tool_result's blocks", () => {
    const messages = messagesOf(
      anthropicToChat({
        system: [
          { type: "text", text: "x-anthropic-billing-header: cc_version=2" },
          { type: "text", text: "You are an agent." },
          { type: "text", text: "Be brief." },
        ],
        messages: [
          { role: "user", content: textParts(TWO) },
          { role: "assistant", content: [{ type: "tool_use", id: "t1", name: "Read", input: {} }] },
          {
            role: "user",
            content: [
              { type: "tool_result", tool_use_id: "t1", is_error: true, content: textParts(["a", "b"]) },
            ],
          },
        ],
      }),
    );
    // The billing block is gone; the other two stay parts.
    expect(messages[0]).toEqual({ role: "system", content: textParts(["You are an agent.", "Be brief."]) });
    expect(messages[1]).toEqual({ role: "user", content: textParts(TWO) });
    expect(messages[3]).toMatchObject({ role: "tool", content: textParts(["Error: a", "b"]) });
    const prompt = render(messages);
    expect(prompt).toContain("You are an agent. Be brief.");
    expect(prompt).toContain(RENDERED);
    expect(prompt).toContain("Error: a b");
  });

  it("Gemini: the parts of a user content; a model turn's parts stay one text as sampled", () => {
    const messages = messagesOf(
      googleToChat(
        {
          contents: [
            { role: "user", parts: [{ text: CTX }, { text: ASK }] },
            { role: "model", parts: [{ text: "Look" }, { text: "ing." }] },
          ],
        },
        "m",
      ),
    );
    expect(messages[0]).toEqual({ role: "user", content: textParts(TWO) });
    expect(messages[1]).toMatchObject({ role: "assistant", content: "Looking." });
    expect(render(messages)).toContain(RENDERED);
  });

  it("Responses: input_text parts of a message and of developer instructions", () => {
    const { chat } = responses.parse(
      {
        model: "m",
        instructions: "You are Codex.",
        input: [
          { type: "message", role: "developer", content: [{ type: "input_text", text: "<permissions>" }] },
          { type: "message", role: "user", content: TWO.map((text) => ({ type: "input_text", text })) },
        ],
      },
      ctx,
    );
    const messages = messagesOf(chat);
    expect(messages[0]).toEqual({ role: "system", content: "You are Codex.\n\n<permissions>" });
    expect(messages[1]).toEqual({ role: "user", content: textParts(TWO) });
    expect(render(messages)).toContain(RENDERED);
  });
});
