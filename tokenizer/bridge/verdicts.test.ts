import { describe, expect, it } from "vitest";
import { emptyFlagCounts } from "./flags";
import { emptyVerdictCounts, VerdictTally } from "./verdicts";

describe("VerdictTally", () => {
  it("counts and flagCounts of a pair never added are all zeros, on an empty tally and beside another pair", () => {
    const tally = new VerdictTally();
    // Their documented contract ("zeros when unseen"): asking before a pair's first turn is not an error.
    expect(tally.counts("codex", "Qwen3-8B")).toEqual(emptyVerdictCounts());
    expect(tally.flagCounts("codex", "Qwen3-8B")).toEqual(emptyFlagCounts());
    tally.add("codex", "Qwen3-8B", "extended", ["reasoning_dropped"]);
    // Same harness, other model; and the model's name as the harness: distinct pairs.
    expect(tally.counts("codex", "Qwen3-32B")).toEqual(emptyVerdictCounts());
    expect(tally.flagCounts("codex", "Qwen3-32B")).toEqual(emptyFlagCounts());
    expect(tally.counts("Qwen3-8B", "codex")).toEqual(emptyVerdictCounts());
    expect(tally.flagCounts("Qwen3-8B", "codex")).toEqual(emptyFlagCounts());
  });

  it("a turn added without flags counts its verdict and no flag (the snapshot holds only the known flag keys)", () => {
    const tally = new VerdictTally();
    tally.add("claude", "Qwen3-8B", "new_chain");
    tally.add("claude", "Qwen3-8B", "extended");
    expect(tally.snapshot()).toEqual([
      {
        harness: "claude",
        model: "Qwen3-8B",
        counts: { ...emptyVerdictCounts(), new_chain: 1, extended: 1 },
        flags: emptyFlagCounts(),
      },
    ]);
    expect(tally.flagCounts("claude", "Qwen3-8B")).toEqual(emptyFlagCounts());
  });

  it("counts and flagCounts return copies: changing them leaves the tally as it was", () => {
    const tally = new VerdictTally();
    tally.add("codex", "Qwen3-8B", "compacted", ["image_prompt_unverified"]);
    tally.counts("codex", "Qwen3-8B").compacted = 99;
    tally.flagCounts("codex", "Qwen3-8B").image_prompt_unverified = 99;
    tally.counts("codex", "unseen").extended = 99;
    expect(tally.counts("codex", "Qwen3-8B")).toEqual({ ...emptyVerdictCounts(), compacted: 1 });
    expect(tally.flagCounts("codex", "Qwen3-8B")).toEqual({
      ...emptyFlagCounts(),
      image_prompt_unverified: 1,
    });
    expect(tally.counts("codex", "unseen")).toEqual(emptyVerdictCounts());
  });
});
