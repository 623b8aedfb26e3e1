/**
 * Token text with the real Qwen3 tokenizer: one string per id, each id decoded alone, stored
 * compact (prompt past the prefix shared with the trace before) and expanded back whole.
 */
import { beforeAll, describe, expect, it } from "vitest";
import { compactTokenText, expandTokenText, TokenTextShapeError, TokenTextUpload } from "../protocol";
import { type ChatTokenizer, loadChatTokenizer } from "../tokenizer/chat-tokenizer";

let tok: ChatTokenizer;
// Loading the tokenizer can pass the 10 s default of a hook on a loaded machine.
beforeAll(async () => {
  tok = await loadChatTokenizer();
}, 60_000);

/** Two turns as a per-request builder gives them: the second prompt extends the first call. */
function twoTurns() {
  const first = [{ role: "user", content: "What is 2 + 2? Answer with émojis 🙂 too." }];
  const p1 = tok.encode(tok.render(first, { addGenerationPrompt: true }));
  const r1 = [...tok.encode("4 🙂"), tok.tokenId("<|im_end|>")!];
  const p2 = [
    ...p1,
    ...r1,
    ...tok.encode("\n<|im_start|>user\nAnd 3 + 3?<|im_end|>\n<|im_start|>assistant\n"),
  ];
  const r2 = [...tok.encode("6"), tok.tokenId("<|im_end|>")!];
  return [
    { prompt_ids: p1, response_ids: r1 },
    { prompt_ids: p2, response_ids: r2 },
  ];
}

describe("token text", () => {
  it("has exactly one string per id, each the id decoded alone, and the prompt repeats are stored once", () => {
    const traces = twoTurns();
    const upload = TokenTextUpload.parse(compactTokenText(traces, (id) => tok.decode([id])));
    expect(upload.traces[0]!.prompt_shared).toBe(0);
    expect(upload.traces[1]!.prompt_shared).toBe(
      traces[0]!.prompt_ids.length + traces[0]!.response_ids.length,
    );
    expect(upload.traces[1]!.prompt.length).toBe(
      traces[1]!.prompt_ids.length - upload.traces[1]!.prompt_shared,
    );
    const served = expandTokenText(upload, "b.0.0");
    expect(served.session_id).toBe("b.0.0");
    expect(served.traces).toHaveLength(traces.length);
    served.traces.forEach((t, i) => {
      const ids = traces[i]!;
      expect(t.prompt).toEqual(ids.prompt_ids.map((id) => tok.decode([id])));
      expect(t.response).toEqual(ids.response_ids.map((id) => tok.decode([id])));
    });
    // Special tokens keep their text; an ASCII stretch joins back to the decoded whole.
    expect(served.traces[0]!.prompt[0]).toBe("<|im_start|>");
    expect(served.traces[1]!.response.join("")).toBe("6<|im_end|>");
  });

  it("refuses a compact text whose shared prefix is longer than the trace before", () => {
    const bad = { v: 1 as const, traces: [{ prompt_shared: 2, prompt: ["a"], response: [] }] };
    expect(() => expandTokenText(bad, "b.0.0")).toThrow(TokenTextShapeError);
    expect(() => expandTokenText(bad, "b.0.0")).toThrow(/traces\[0\]\.prompt_shared/);
  });
});
