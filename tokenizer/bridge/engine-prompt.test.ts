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

  it("names where they part: another id, extra ids, a pad run where none was sent, adjacent pads", () => {
    expect(matchEnginePrompt([1, 2, 3], [1, 4, 3], PAD)).toEqual({
      kind: "mismatch",
      reason: "the engine's prompt has 4 at 1 where 2 was sent (sent position 1)",
    });
    expect(matchEnginePrompt([1, 2], [1, 2, 3], PAD)).toMatchObject({ reason: /1 ids longer/ });
    expect(matchEnginePrompt([1, 2], [1, PAD, 2], PAD).kind).toBe("mismatch");
    expect(matchEnginePrompt([1, PAD, PAD, 2], [1, PAD, PAD, PAD, 2], PAD)).toMatchObject({
      reason: /adjacent image pads/,
    });
    // Without a pad token (a tokenizer with no image pad) only equality matches.
    expect(matchEnginePrompt([1, 2], [1, 2], undefined)).toEqual({ kind: "same" });
    expect(matchEnginePrompt([1, 2], [1, 2, 2], undefined).kind).toBe("mismatch");
  });
});
