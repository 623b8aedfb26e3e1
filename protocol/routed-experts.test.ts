import { describe, expect, it } from "vitest";
import { base64Bytes, RoutedExperts, routedExpertRows, stitchRoutedExperts } from "./routed-experts";
import { Trace } from "./trajectory";

/** A block whose every id is `position * 10 + layer` (top-1), or `tag` when given: easy to read back. */
function block(start: number, rows: number, layers = 2, tag?: number): RoutedExperts {
  const ids = new Int32Array(rows * layers);
  for (let r = 0; r < rows; r++)
    for (let l = 0; l < layers; l++) ids[r * layers + l] = tag ?? (start + r) * 10 + l;
  return { start, rows, layers, top_k: 1, data: Buffer.from(ids.buffer).toString("base64") };
}

describe("routed-expert blocks", () => {
  it("are checked against their shape: rows × layers × top-k int32s", () => {
    expect(RoutedExperts.safeParse(block(0, 3)).success).toBe(true);
    const short = { ...block(0, 3), rows: 4 };
    const parsed = RoutedExperts.safeParse(short);
    expect(parsed.success).toBe(false);
    expect(parsed.error?.issues[0]).toMatchObject({ path: ["data"] });
    expect(parsed.error?.issues[0]?.message).toMatch(/holds 24 bytes; 4 rows × 2 layers × top-1 need 32/);
    expect(base64Bytes("not base64!")).toBe(-1);
    expect(base64Bytes("AAAAAA==")).toBe(4);
  });

  it("read back as rows of layers of top-k ids, little-endian", () => {
    expect(routedExpertRows(block(5, 2))).toEqual([
      [[50], [51]],
      [[60], [61]],
    ]);
  });
});

describe("a chain's routes stitched from its calls", () => {
  it("cover [0, total): a later call's rows replace the parent's last row", () => {
    // Turn 1 ran 6 positions (rows 0-5); turn 2 asked from 5 (its parent's last sampled token).
    const first = block(0, 6, 2, 1);
    const second = block(5, 4, 2, 2);
    const trace = stitchRoutedExperts([first, second], 9)!;
    expect(trace).toMatchObject({ start: 0, rows: 9, layers: 2, top_k: 1 });
    expect(routedExpertRows(trace).map((r) => r[0]![0])).toEqual([1, 1, 1, 1, 1, 2, 2, 2, 2]);
  });

  it("are null when a position is missing or the shapes differ", () => {
    expect(stitchRoutedExperts([block(0, 4), block(6, 2)], 8)).toBeNull(); // 4 and 5 missing
    expect(stitchRoutedExperts([block(0, 4)], 6)).toBeNull(); // ends short
    expect(stitchRoutedExperts([block(0, 4, 2), block(3, 2, 3)], 5)).toBeNull();
    expect(stitchRoutedExperts([], 0)).toBeNull();
  });

  it("a trace's routes must cover its positions [0, prompt + response − 1)", () => {
    const base = {
      prompt_ids: [1, 2, 3],
      response_ids: [4, 5],
      loss_mask: [1, 1],
      response_logprobs: [-0.1, -0.2],
      prompt_messages: [],
      response_messages: [],
      tools: null,
      finish_reason: "stop",
      reward: null,
      metadata: {},
    };
    expect(Trace.safeParse({ ...base, routed_experts: block(0, 4) }).success).toBe(true);
    const wrong = Trace.safeParse({ ...base, routed_experts: block(0, 5) });
    expect(wrong.success).toBe(false);
    expect(wrong.error?.issues[0]?.message).toMatch(/must cover positions \[0, 4\)/);
  });
});
