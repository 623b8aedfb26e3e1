import { describe, expect, it } from "vitest";
import { matchEnginePrompt } from "./engine-prompt";

const PAD = 9;

describe("matchEnginePrompt", () => {
  it("recognises the engine's ids as the sent ids with each image pad expanded", () => {
    expect(matchEnginePrompt([1, 5, PAD, 6, 2], [1, 5, 2], PAD).kind).toBe("mismatch");
    expect(matchEnginePrompt([1, 5, PAD, 6, 2], [1, 5, PAD, 6, 2], PAD)).toEqual({ kind: "same" });
    expect(
      matchEnginePrompt([1, 5, PAD, 6, 5, PAD, 6], [1, 5, PAD, PAD, PAD, 6, 5, PAD, PAD, 6], PAD),
    ).toEqual({ kind: "expanded", runs: [3, 2] });
  });

  it("names where they part: another id, too few ids, extra ids, a pad run where none was sent; without a pad id only equality matches", () => {
    expect(matchEnginePrompt([1, 2, 3], [1, 4, 3], PAD)).toEqual({
      kind: "mismatch",
      reason: "the engine's prompt has 4 at 1 where 2 was sent (sent position 1)",
    });
    expect(matchEnginePrompt([1, 2, 3], [1, 2], PAD)).toEqual({
      kind: "mismatch",
      reason: "the engine's prompt has nothing at 2 where 3 was sent (sent position 2)",
    });
    // Distinct lengths (6 ids against an expansion of 4), so the count is the difference.
    expect(matchEnginePrompt([1, PAD, 2], [1, PAD, PAD, 2, 7, 8], PAD)).toEqual({
      kind: "mismatch",
      reason: "the engine's prompt is 2 ids longer than the expansion",
    });
    expect(matchEnginePrompt([1, 2], [1, PAD, 2], PAD).kind).toBe("mismatch");
    // Without a pad token (a tokenizer with no image pad) only equality matches.
    expect(matchEnginePrompt([1, 2], [1, 2], undefined)).toEqual({ kind: "same" });
    expect(matchEnginePrompt([1, 2], [1, 2, 2], undefined).kind).toBe("mismatch");
  });

  it("refuses two adjacent sent pads as ambiguous, naming the first: against a longer run, and against the very ids sent", () => {
    // Greedy matching would give the whole run to the first pad and call the second missing: the
    // check must come first and say why.
    expect(matchEnginePrompt([1, PAD, PAD, 2], [1, PAD, PAD, PAD, 2], PAD)).toEqual({
      kind: "mismatch",
      reason: "sent ids hold adjacent image pads at 1 (ambiguous expansion)",
    });
    // Even ids equal to the sent ones: two pads may be two images or one image of two patches.
    expect(matchEnginePrompt([1, 5, PAD, PAD], [1, 5, PAD, PAD], PAD)).toEqual({
      kind: "mismatch",
      reason: "sent ids hold adjacent image pads at 2 (ambiguous expansion)",
    });
  });

  it("refuses a sent pad with no pad in the engine's prompt there, naming both positions", () => {
    // A run of zero pads is not an expansion: without the check the image would silently vanish.
    expect(matchEnginePrompt([1, PAD, 2], [1, 2], PAD)).toEqual({
      kind: "mismatch",
      reason: "the engine's prompt has no image pad at 1 (sent position 1)",
    });
    // The second image: the first one's run (2 pads) shifts the engine position past the sent one.
    expect(matchEnginePrompt([1, PAD, 5, PAD, 2], [1, PAD, PAD, 5, 2], PAD)).toEqual({
      kind: "mismatch",
      reason: "the engine's prompt has no image pad at 4 (sent position 3)",
    });
  });
});
