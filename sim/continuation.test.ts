import { beforeAll, describe, expect, it } from "vitest";
import { type ChatTokenizer, loadChatTokenizer } from "../tokenizer/chat-tokenizer";
import { openAssistantTurn, remainingAnswer } from "./continuation";

let tok: ChatTokenizer;
beforeAll(async () => {
  tok = await loadChatTokenizer();
});

describe("an open assistant turn at the end of a prompt", () => {
  it("is found after the last generation prompt, also after a non-thinking empty think block", () => {
    const base = tok.encode("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
    expect(openAssistantTurn(tok, base)).toBeNull();
    expect(openAssistantTurn(tok, [...base, ...tok.encode("Hel")])).toEqual({ starts: [base.length] });
    const think = tok.encode("<think>\n\n</think>\n\n");
    expect(openAssistantTurn(tok, [...base, ...think, ...tok.encode("Hel")])).toEqual({
      starts: [base.length + think.length, base.length],
    });
  });

  it("is not found once the turn was closed, nor in a prompt with no assistant turn", () => {
    const closed = tok.encode("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello<|im_end|>\n");
    expect(openAssistantTurn(tok, closed)).toBeNull();
    expect(openAssistantTurn(tok, tok.encode("<|im_start|>user\nHi"))).toBeNull();
  });
});

describe("what is left to sample", () => {
  it("is the answer's rest when the prompt holds its beginning, else null", () => {
    expect(remainingAnswer([1, 2, 3, 4], [9, 9, 1, 2], 2)).toEqual([3, 4]);
    expect(remainingAnswer([1, 2, 3, 4], [9, 9, 1, 2, 3, 4], 2)).toEqual([]);
    expect(remainingAnswer([1, 2, 3, 4], [9, 9, 1, 5], 2)).toBeNull();
    expect(remainingAnswer([1, 2], [9, 9, 1, 2, 3], 2)).toBeNull();
    expect(remainingAnswer([1, 2], [9, 9], 2)).toBeNull();
  });
});

describe("the simulated engine continues a turn it had begun", () => {
  it("answers the prompt plus the first k sampled ids with the turn's remaining ids, over HTTP", async () => {
    const { startSimEngine } = await import("./server");
    const sim = await startSimEngine({ port: 0, seed: 3 });
    try {
      const generate = async (input_ids: number[]) => {
        const res = await fetch(`${sim.url}/generate`, {
          method: "POST",
          headers: { "content-type": "application/json", "x-smg-routing-key": "session-1" },
          body: JSON.stringify({ input_ids, sampling_params: { max_new_tokens: 512 }, return_logprob: true }),
        });
        expect(res.status).toBe(200);
        return (await res.json()) as { output_ids: number[]; meta_info: { finish_reason: { type: string } } };
      };
      const prompt = tok.encode(
        tok.render([{ role: "user", content: "What is 12 * 34?" }], { addGenerationPrompt: true }),
      );
      const whole = await generate(prompt);
      expect(whole.output_ids.length).toBeGreaterThan(6);
      for (const k of [1, 5, whole.output_ids.length - 1]) {
        const kept = whole.output_ids.slice(0, k);
        const rest = await generate([...prompt, ...kept]);
        expect([...kept, ...rest.output_ids]).toEqual(whole.output_ids);
        expect(rest.meta_info.finish_reason.type).toBe(whole.meta_info.finish_reason.type);
      }
      // A turn the policy would not have begun this way is answered as a prompt like any other.
      const foreign = await generate([...prompt, ...tok.encode("Bananas")]);
      expect(foreign.output_ids.length).toBeGreaterThan(0);
    } finally {
      await sim.close();
    }
  });
});
