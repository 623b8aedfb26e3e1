import { describe, expect, it } from "vitest";
import {
  decideAnswer,
  parseArithmetic,
  readTurns,
  syntheticLogprob,
  WRONG_ANSWER_PROBABILITY,
} from "./policy";

const chat = (...turns: Array<[string, string]>) =>
  `${turns.map(([role, content]) => `<|im_start|>${role}\n${content}<|im_end|>\n`).join("")}<|im_start|>assistant\n`;

const question = chat(["system", "Answer briefly."], ["user", "What is 17 * 23?"]);

describe("parseArithmetic", () => {
  it("computes + - * / on integers, exact or rounded, and flags division by zero", () => {
    expect(parseArithmetic("What is 17 * 23?")).toMatchObject({ expression: "17 * 23", result: "391" });
    expect(parseArithmetic("compute 1000+24")?.result).toBe("1024");
    expect(parseArithmetic("what's 5 - 12")?.result).toBe("-7");
    expect(parseArithmetic("391 / 17 = ?")?.result).toBe("23");
    expect(parseArithmetic("7 / 3")?.result).toBe("2.3333");
    expect(parseArithmetic("6 ÷ 0")).toMatchObject({ op: "/", result: undefined });
    expect(parseArithmetic("123456789012 * 987654321098")?.result).toBe("121932631136585886175176");
    expect(parseArithmetic("no numbers here")).toBeUndefined();
    expect(parseArithmetic("version 1.2 - 3")).toBeUndefined();
  });
});

describe("readTurns", () => {
  it("reads ChatML turns and drops the empty generation prompt", () => {
    expect(readTurns(question)).toEqual([
      { role: "system", content: "Answer briefly." },
      { role: "user", content: "What is 17 * 23?" },
    ]);
    expect(readTurns("plain prompt 2 + 2 =")).toEqual([{ role: "user", content: "plain prompt 2 + 2 =" }]);
  });
});

describe("decideAnswer", () => {
  it("answers arithmetic with a think block and a final sentence ending in the result", () => {
    const a = decideAnswer({ seed: 0, routingKey: "k", prompt: question, temperature: 0 });
    expect(a.kind).toBe("arithmetic");
    expect(a.correct).toBe(true);
    expect(a.text).toMatch(
      /^<think>\nI need 17 \* 23\. 17 \* 20 = 340 and 17 \* 3 = 51, so 340 \+ 51 = 391\.\n<\/think>\n\n/,
    );
    expect(a.text.match(/-?\d+/g)?.at(-1)).toBe("391");
  });

  it("is deterministic per (seed, routing key, prompt) and differs across keys", () => {
    const keys = Array.from({ length: 200 }, (_, i) => `session-${i}`);
    const answers = keys.map((routingKey) => decideAnswer({ seed: 1, routingKey, prompt: question }));
    const again = keys.map((routingKey) => decideAnswer({ seed: 1, routingKey, prompt: question }));
    expect(again).toEqual(answers);
    expect(new Set(answers.map((a) => a.text)).size).toBeGreaterThan(3);
    const wrong = answers.filter((a) => !a.correct);
    // 25% wrong, with generous bounds for 200 draws.
    expect(wrong.length / answers.length).toBeGreaterThan(WRONG_ANSWER_PROBABILITY - 0.12);
    expect(wrong.length / answers.length).toBeLessThan(WRONG_ANSWER_PROBABILITY + 0.12);
    for (const a of wrong) {
      const shown = a.text.match(/-?\d+/g)!.at(-1);
      expect(shown).not.toBe("391");
    }
    const otherSeed = keys.map((routingKey) => decideAnswer({ seed: 2, routingKey, prompt: question }).text);
    expect(otherSeed).not.toEqual(answers.map((a) => a.text));
  });

  it("is greedy at temperature 0: always correct, whatever the key", () => {
    const texts = ["a", "b", "c", "d"].map(
      (routingKey) => decideAnswer({ seed: 3, routingKey, prompt: question, temperature: 0 }).text,
    );
    expect(new Set(texts).size).toBe(1);
  });

  it("omits the think block when thinking is disabled in the prompt", () => {
    const a = decideAnswer({
      seed: 0,
      routingKey: "k",
      prompt: `${question}<think>\n\n</think>\n\n`,
      temperature: 0,
    });
    expect(a.text).toBe("17 * 23 = 391.");
  });

  it("re-checks on 'Are you sure?', fixing a wrong answer sometimes, and honours 'just the number'", () => {
    const afterRight = chat(
      ["user", "What is 17 * 23?"],
      ["assistant", "17 * 23 = 391."],
      ["user", "Are you sure?"],
    );
    const r = decideAnswer({ seed: 0, routingKey: "k", prompt: afterRight });
    expect(r).toMatchObject({ kind: "recheck", correct: true });
    expect(r.text).toContain("Yes, I am sure: 17 * 23 = 391.");

    const terse = chat(
      ["user", "What is 17 * 23?"],
      ["assistant", "17 * 23 = 392."],
      ["user", "Are you sure? Reply with just the number."],
    );
    const outcomes = Array.from({ length: 100 }, (_, i) =>
      decideAnswer({ seed: 0, routingKey: `s${i}`, prompt: terse }),
    );
    for (const o of outcomes) expect(o.text).toMatch(/\n\n(391|392)$/);
    const fixed = outcomes.filter((o) => o.correct).length;
    expect(fixed).toBeGreaterThan(25);
    expect(fixed).toBeLessThan(75);
  });

  it("calls a calculator tool when offered, then answers with the tool's result", () => {
    const tools = `<|im_start|>system\n# Tools\n<tools>\n{"type": "function", "function": {"name": "calculator", "parameters": {"type": "object", "properties": {"expr": {"type": "string"}}}}}\n</tools><|im_end|>\n`;
    const call = decideAnswer({
      seed: 0,
      routingKey: "k",
      prompt: `${tools}${chat(["user", "What is 17 * 23?"])}`,
    });
    expect(call.kind).toBe("tool_call");
    expect(call.text).toMatch(
      /<\/think>\n\n<tool_call>\n\{"name": "calculator", "arguments": \{"expr": "17 \* 23"\}\}\n<\/tool_call>$/,
    );
    const result = decideAnswer({
      seed: 0,
      routingKey: "k",
      prompt: chat(
        ["user", "What is 17 * 23?"],
        ["assistant", "<tool_call>..."],
        ["user", "<tool_response>\n391\n</tool_response>"],
      ),
    });
    expect(result).toMatchObject({ kind: "tool_result", correct: true });
    expect(result.text.endsWith("17 * 23 = 391.")).toBe(true);
  });

  it("gives a generic reply naming itself a simulated policy, without leaking special tokens", () => {
    const a = decideAnswer({
      seed: 0,
      routingKey: "k",
      prompt: chat(["user", "Tell me a joke <|im_end|> please"]),
    });
    expect(a.kind).toBe("generic");
    expect(a.text).toMatch(/simulated policy/i);
    expect(a.text).not.toContain("<|im_end|>");
  });
});

describe("syntheticLogprob", () => {
  it("is deterministic and in (-3, 0]", () => {
    const values = Array.from({ length: 1000 }, (_, i) => syntheticLogprob(0, "k", i, 100 + i));
    for (const v of values) {
      expect(v).toBeLessThanOrEqual(0);
      expect(v).toBeGreaterThan(-3);
    }
    expect(new Set(values).size).toBeGreaterThan(900);
    expect(syntheticLogprob(0, "k", 5, 42)).toBe(syntheticLogprob(0, "k", 5, 42));
    expect(syntheticLogprob(0, "k", 5, 42)).not.toBe(syntheticLogprob(0, "other", 5, 42));
  });
});
