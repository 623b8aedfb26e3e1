/**
 * The end-of-turn token a reference-engine checkpoint favours for each model family is the one the
 * proxy's token mode stops on with that family's tokenizer (`npm run demo:rl --model-family`).
 */
import { describe, expect, it } from "vitest";
import { loadFamilyTokenizer, MODEL_FAMILIES, modelFamily } from "../tokenizer/families";
import { endOfTurnToken } from "./reference-engine";

describe("endOfTurnToken", () => {
  it("is each family's turn end: <|im_end|> for qwen3, <｜end▁of▁sentence｜> for deepseek_v3", () => {
    expect(endOfTurnToken()).toBe("<|im_end|>");
    expect(endOfTurnToken("qwen3")).toBe("<|im_end|>");
    expect(endOfTurnToken("deepseek_v3")).toBe("<｜end▁of▁sentence｜>");
  });

  it("is one token of the family's tokenizer, among the ids the proxy stops on", async () => {
    for (const name of MODEL_FAMILIES) {
      const tok = await loadFamilyTokenizer(modelFamily(name));
      const ids = tok.encode(endOfTurnToken(name));
      expect(ids, name).toHaveLength(1);
      expect(tok.eosTokenIds, name).toContain(ids[0]);
    }
  });
});
