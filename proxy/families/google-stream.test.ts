/**
 * Gemini SSE chunks shaped as Google's SDKs keep them: the thought signature on the first function
 * call (as Gemini sends it), and a final chunk that always has a part (google-genai's chats drop a
 * streamed turn with an empty chunk from their history).
 */
import { describe, expect, it } from "vitest";
import type { JsonObject } from "../../protocol";
import { decodeReasoning } from "../json";
import { completionDeltas } from "./common";
import { google } from "./google";

const ctx = {
  path: "/v1beta/models/g:streamGenerateContent",
  query: new URLSearchParams("alt=sse"),
  headers: {},
};

/** The parts of each SSE chunk the writer emits for a complete answer. */
function chunkParts(message: JsonObject): JsonObject[][] {
  const req = google.parse({ contents: [{ role: "user", parts: [{ text: "q" }] }] }, ctx);
  const completion = { id: "c", choices: [{ index: 0, message, finish_reason: "stop" }], usage: {} };
  const writer = google.stream(req, { id: "c", created: 0 });
  let out = writer.start();
  for (const ev of completionDeltas(completion, false)) out += writer.delta(ev);
  out += writer.finish(completion);
  return out
    .split("\n\n")
    .filter((f) => f.startsWith("data: "))
    .map((f) => {
      const body = JSON.parse(f.slice("data: ".length)) as {
        candidates: Array<{ content: { parts: JsonObject[] } }>;
      };
      return body.candidates[0]!.content.parts;
    });
}

const call = (id: string) => ({ id, type: "function", function: { name: "calc", arguments: '{"e":"1"}' } });

describe("streamed Gemini answers", () => {
  it("carry the thought signature on the first function call, not on a trailing empty part", () => {
    const chunks = chunkParts({
      role: "assistant",
      content: null,
      reasoning_content: "why",
      tool_calls: [call("a"), call("b")],
    });
    const parts = chunks.flat();
    const signed = parts.filter((p) => p.thoughtSignature !== undefined);
    expect(signed).toHaveLength(1);
    expect(signed[0]!.functionCall).toMatchObject({ id: "a" });
    expect(decodeReasoning(signed[0]!.thoughtSignature)).toBe("why");
  });

  it("put the signature of a text answer in the final chunk", () => {
    const chunks = chunkParts({ role: "assistant", content: "hi", reasoning_content: "why" });
    expect(chunks.at(-1)).toEqual([{ text: "", thoughtSignature: expect.any(String) }]);
    expect(decodeReasoning(chunks.at(-1)![0]!.thoughtSignature)).toBe("why");
  });

  it("never end with a chunk without parts, reasoning or not", () => {
    for (const message of [
      { role: "assistant", content: "hi" },
      { role: "assistant", content: null, tool_calls: [call("a")] },
    ]) {
      const chunks = chunkParts(message);
      for (const parts of chunks) expect(parts.length).toBeGreaterThan(0);
      expect(chunks.flat().some((p) => p.thoughtSignature !== undefined)).toBe(false);
    }
  });
});
